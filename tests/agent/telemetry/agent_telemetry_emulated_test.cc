// rxfleet-agent --standalone under rxfleet-emulate, scraped over HTTP: the adapter's identity,
// the hold it keeps applied, and a receive rate that matches the emulator's traffic model for
// that hold, USB speed and host class.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/telemetry/telemetry_support.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::agent::telemetry {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::testing::Contains;
using ::testing::Pair;

// The adapter the rate is measured on: "be6500" of the lab, on port 2-2.
constexpr char kAdapter[] = "port-2-2";
// Its offered traffic in tests/agent/telemetry/labs/telemetry-host.yaml.
constexpr double kOfferedRxMbps = 1200;
constexpr double kOfferedTxMbps = 50;

// One row of the table in docs/EMULATOR.md, "Traffic model": RX capacity and host loss at the
// shortest (32 µs) and longest (1024 µs) hold.
struct ModelRow {
  double capacity_32_mbps;
  double capacity_1024_mbps;
  double loss_32;
  double loss_1024;
};
// "SuperSpeed, x86 | 1002 → 613 | 0" (the lab's host_class is x86, the adapter at 5000 Mbit/s).
constexpr ModelRow kSuperSpeedX86 = {1002, 613, 0, 0};

// The documented interpolation: f = (clamp(hold_us, 32, 1024) − 32) / 992,
// X = (1 − f)·X(32 µs) + f·X(1024 µs), rx = min(offered_rx, capacity)·(1 − loss).
double ModelRxMbps(const ModelRow& row, double hold_us, double offered_rx_mbps) {
  const double f = (std::clamp(hold_us, 32.0, 1024.0) - 32.0) / 992.0;
  const double capacity = (1 - f) * row.capacity_32_mbps + f * row.capacity_1024_mbps;
  const double loss = (1 - f) * row.loss_32 + f * row.loss_1024;
  return std::min(offered_rx_mbps, capacity) * (1 - loss);
}

// Outside the Pi 1 class TX is limited by the 32 µs RX capacity only.
double ModelTxMbps(const ModelRow& row, double offered_tx_mbps) {
  return std::min(offered_tx_mbps, row.capacity_32_mbps);
}

absl::StatusOr<std::vector<Sample>> Scrape(int port) {
  absl::StatusOr<HttpResponse> response = HttpGet(port, "/metrics");
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return absl::InternalError(absl::StrCat("/metrics answered ", response->status));
  }
  return ParseExposition(response->body);
}

// Scrapes until `done` accepts the samples, at most until `timeout` has passed.
absl::StatusOr<std::vector<Sample>> ScrapeUntil(
    int port, absl::Duration timeout, const std::function<bool(const std::vector<Sample>&)>& done) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no scrape";
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<Sample>> samples = Scrape(port);
    if (samples.ok() && done(*samples)) return samples;
    last = samples.ok() ? "condition not met" : samples.status().ToString();
    absl::SleepFor(absl::Milliseconds(20));  // poll interval, not synchronisation
  }
  return absl::DeadlineExceededError(absl::StrCat("metrics never matched: ", last));
}

struct Reading {
  absl::Time at;
  double rx_bytes = 0;
  double tx_bytes = 0;
};

// The first scrape whose receive counter differs from `previous`: taken right after one of the
// agent's sampler ticks, timed at the middle of its HTTP exchange.
absl::StatusOr<Reading> NextTick(int port, double previous, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no scrape";
  while (absl::Now() < deadline) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::vector<Sample>> samples = Scrape(port);
    const absl::Time end = absl::Now();
    if (samples.ok()) {
      const std::optional<double> rx =
          FindValue(*samples, "rxfleet_adapter_receive_bytes_total", {{"adapter", kAdapter}});
      const std::optional<double> tx =
          FindValue(*samples, "rxfleet_adapter_transmit_bytes_total", {{"adapter", kAdapter}});
      if (rx.has_value() && tx.has_value() && *rx != previous) {
        return Reading{start + (end - start) / 2, *rx, *tx};
      }
      last = "receive counter unchanged or absent";
    } else {
      last = samples.status().ToString();
    }
    absl::SleepFor(absl::Milliseconds(20));  // poll interval, not synchronisation
  }
  return absl::DeadlineExceededError(absl::StrCat("no sampler tick seen: ", last));
}

class AgentTelemetryEmulatedTest : public ::testing::Test {
 protected:
  std::unique_ptr<ChildProcess> StartAgent() {
    std::filesystem::create_directories(dir_.path() / "tmp");
    std::vector<std::string> argv = {
        EmulatorPath(),
        "--lab",
        SourcePath("tests/agent/telemetry/labs/telemetry-host.yaml"),
        "--state-out",
        dir_.File("state.json"),
        "--timeout",
        "150",
        "--",
        BinaryPath("agent/rxfleet-agent"),
        "--standalone",
        "--metrics-address",
        "127.0.0.1:0",
        "--status-socket",
        "none",
        "--reconcile-period",
        "500ms",
        "--state-dir",
        dir_.File("agent-state"),
    };
    auto child = ChildProcess::Start(argv, {"TMPDIR=" + dir_.File("tmp")});
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  TempDir dir_{"rxfleet-telemetry-emulated"};
};

TEST_F(AgentTelemetryEmulatedTest, ExportsIdentityHoldAndTheModelReceiveRate) {
  std::unique_ptr<ChildProcess> agent = StartAgent();
  ASSERT_NE(agent, nullptr);
  absl::StatusOr<int> port = WaitForMetricsPort(*agent, absl::Seconds(60));
  ASSERT_TRUE(port.ok()) << port.status();

  // Applied: the agent wrote the SuperSpeed default and read it back.
  absl::StatusOr<std::vector<Sample>> applied =
      ScrapeUntil(*port, absl::Seconds(60), [](const std::vector<Sample>& s) {
        return FindValue(s, "rxfleet_adapter_state", {{"adapter", kAdapter}, {"state", "applied"}})
                       .value_or(0) == 1 &&
               FindValue(s, "rxfleet_adapter_hold_observed_seconds", {{"adapter", kAdapter}})
                   .has_value();
      });
  ASSERT_TRUE(applied.ok()) << applied.status() << "\n" << agent->Text(Stream::kStderr);

  const std::optional<std::map<std::string, std::string>> info =
      FindLabels(*applied, "rxfleet_adapter_info", {{"adapter", kAdapter}});
  ASSERT_TRUE(info.has_value());
  EXPECT_THAT(*info, Contains(Pair("chip", "RTL8922AU")));
  EXPECT_THAT(*info, Contains(Pair("vid", "0bda")));
  EXPECT_THAT(*info, Contains(Pair("pid", "8912")));
  EXPECT_THAT(*info, Contains(Pair("usb_speed", "super")));
  EXPECT_THAT(*info, Contains(Pair("port_path", "2-2")));
  EXPECT_THAT(*info, Contains(Pair("netdev", "lo")));
  EXPECT_THAT(*info, Contains(Pair("driver", "rtw89_8922au")));
  EXPECT_EQ(FindValue(*applied, "rxfleet_adapter_info", {{"adapter", kAdapter}}), 1);
  // The lab's other adapters have identities too; the MediaTek one is an observed mt76 chip.
  for (const char* other : {"port-2-3", "port-2-4", "port-2-5"}) {
    EXPECT_TRUE(FindValue(*applied, "rxfleet_adapter_info", {{"adapter", other}}).has_value())
        << other;
  }
  EXPECT_EQ(FindValue(*applied, "rxfleet_adapter_info",
                      {{"adapter", "port-2-5"},
                       {"chip", "MT7921AU"},
                       {"family", "mt76"},
                       {"managed", "false"}}),
            1);

  const double observed =
      FindValue(*applied, "rxfleet_adapter_hold_observed_seconds", {{"adapter", kAdapter}}).value();
  EXPECT_DOUBLE_EQ(observed, 3.2e-05);
  EXPECT_EQ(FindValue(*applied, "rxfleet_adapter_hold_desired_seconds", {{"adapter", kAdapter}}),
            3.2e-05);

  // Two sampler ticks at least 20 s apart; the emulator rewrites its statistics every 100 ms, so
  // the counters lag their ticks by a similar amount at both ends.
  absl::StatusOr<Reading> first = NextTick(*port, -1, absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  first = NextTick(*port, first->rx_bytes, absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  Reading second = *first;
  while (second.at - first->at < absl::Seconds(20)) {
    absl::StatusOr<Reading> next = NextTick(*port, second.rx_bytes, absl::Seconds(30));
    ASSERT_TRUE(next.ok()) << next.status();
    second = *next;
  }
  const double seconds = absl::ToDoubleSeconds(second.at - first->at);
  const double rx_mbps = (second.rx_bytes - first->rx_bytes) * 8 / seconds / 1e6;
  const double tx_mbps = (second.tx_bytes - first->tx_bytes) * 8 / seconds / 1e6;
  const double expected_rx = ModelRxMbps(kSuperSpeedX86, observed * 1e6, kOfferedRxMbps);
  const double expected_tx = ModelTxMbps(kSuperSpeedX86, kOfferedTxMbps);
  std::cout << "over " << seconds << " s: receive " << rx_mbps << " Mbit/s (model " << expected_rx
            << "), transmit " << tx_mbps << " Mbit/s (model " << expected_tx << ")\n";
  EXPECT_NEAR(rx_mbps, expected_rx, 0.05 * expected_rx) << "over " << seconds << " s";
  EXPECT_NEAR(tx_mbps, expected_tx, 0.05 * expected_tx) << "over " << seconds << " s";
  // Host loss is 0 on x86 at SuperSpeed: nothing dropped.
  absl::StatusOr<std::vector<Sample>> last = Scrape(*port);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(FindValue(*last, "rxfleet_adapter_receive_drops_total", {{"adapter", kAdapter}}), 0);
  EXPECT_EQ(FindValue(*last, "rxfleet_adapter_netdev_present", {{"adapter", kAdapter}}), 1);

  // SIGTERM to the emulator reaches the agent, which stops cleanly.
  EXPECT_EQ(agent->Terminate(absl::Seconds(10)), 0) << agent->Text(Stream::kStderr);
  absl::StatusOr<nlohmann::json> state = ReadJsonFile(dir_.File("state.json"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->at("child").at("exit_code"), 0);
  EXPECT_EQ(state->at("child").at("timed_out"), false);
}

}  // namespace
}  // namespace rxfleet::agent::telemetry
