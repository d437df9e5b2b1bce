// The acceptance test of active throughput probes (issue #19): an experiment with
// `primaryMetric: probe_rx_throughput_bps` on an idle emulated fleet gets a conclusive report
// from probes alone. Every part is real: rxfleet-server, one rxfleet-agent under
// rxfleet-emulate with four RTL8922AU at SuperSpeed and no offered traffic (their emulated
// rx_bytes never move), and four veth pairs named as the adapters' netdevs whose peers the
// emulator shapes to the traffic model's capacity x 0.1 (61.3 Mbit/s at the 1024 µs hold,
// 100.2 Mbit/s at 32 µs; docs/EMULATOR.md "Shaped netdevs"). Each peer runs its own iperf3
// server at one shared address; the agent's probe binds to the netdev and so measures its own
// adapter's shaped link.
//
// Skips (with the reason) when not root or without `ip`/`iperf3`.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/experiment/experiment.h"
#include "common/proto/experiment.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/agent/telemetry/telemetry_support.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/veth_fleet.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::VethFleet;
using ::rxfleet::testing::VethFleetOptions;
using ::rxfleet::testing::WaitFor;
using ::rxfleet::testing::WriteTextFile;

constexpr int kAdapters = 4;
constexpr char kHostId[] = "x86-probe-1";

// Switchback in 32-second periods of two 16-second windows: the first is burn-in, the second
// is valid. A 2 s probe takes a 4 s slot (probe + kProbeSlotMargin), so four slots fit in a
// window and every adapter probes in every window against its own iperf3 server. Two blocks:
// each adapter has two valid windows per arm.
constexpr char kExperiment[] = R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: probe-e2e}
spec:
  selector: {chips: [rtl8922au]}
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  control: control
  design: switchback
  duration: 128s
  windowLength: 16s
  periodLength: 32s
  burnIn: 1s
  primaryMetric: probe_rx_throughput_bps
  probe: {server: "SERVER", duration: 2s}
  minAdaptersPerArm: 3
  minWindowsPerArm: 4
)";

// Four RTL8922AU at SuperSpeed as in tests/labs/experiment-x86-usb3.yaml, without offered
// traffic, each netdev shaped on its veth peer.
std::string Lab(const VethFleet& fleet) {
  std::string lab = "host_class: x86\ndevices:\n";
  for (int k = 0; k < kAdapters; ++k) {
    const testing::Veth& v = fleet.veths()[static_cast<size_t>(k)];
    absl::StrAppend(&lab, "  - name: x86-be6500-", k + 1, R"(
    vid: 0x0bda
    pid: 0x8912
    speed: 5000
    bus: 2
    port: ")",
                    k + 1, "\"\n    devnum: ", 11 + k, R"(
    manufacturer: Realtek
    product: 802.11be WLAN Adapter
    serial: 00e04c00010)",
                    k + 1, R"(
    registers: {0x6000: 0x80FF2014, 0x6004: 0x0000001F}
    netdev: {name: )",
                    v.host_device, ", driver: rtw89_8922au, shape: {netns: ", v.netns,
                    ", device: ", v.peer_device, ", scale: 0.1}}\n");
  }
  return lab;
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

class ProbeExperimentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::VethFleetUnavailableReason(); !why.empty()) {
      GTEST_SKIP() << why;
    }
    VethFleetOptions options;
    for (int k = 0; k < kAdapters; ++k) {
      options.host_devices.push_back(absl::StrCat("wlx00e04c00010", k + 1));
    }
    absl::StatusOr<std::unique_ptr<VethFleet>> fleet = VethFleet::Create(options);
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);

    // A build whose Experiment document knows no probes cannot run this test at all.
    const std::string document =
        absl::StrReplaceAll(kExperiment, {{"SERVER", fleet_->server_address()}});
    absl::StatusOr<experiments::Experiment> parsed =
        experiments::ParseExperiment(document, "probe-e2e.yaml");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    experiment_ = experiments::ExperimentToProto(*parsed);

    ASSERT_TRUE(WriteTextFile(dir_.File("lab.yaml"), Lab(*fleet_)).ok());

    absl::StatusOr<testing::StartedServer> server = testing::StartServerProcess(
        {BinaryPath("server/rxfleet-server"), "--insecure", "--listen", "127.0.0.1:0", "--db",
         dir_.File("server.db"), "--http-listen", "none", "--push-debounce", "50ms"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->child);
    const std::string address = absl::StrCat("127.0.0.1:", server->port);
    fleet_service_ =
        v1::FleetService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));

    const std::filesystem::path home = dir_.path() / "agent";
    std::filesystem::create_directories(home / "tmp");
    state_file_ = (home / "state.json").string();
    absl::StatusOr<std::unique_ptr<ChildProcess>> agent =
        ChildProcess::Start({EmulatorPath(),
                             "--lab",
                             dir_.File("lab.yaml"),
                             "--state-out",
                             state_file_,
                             "--timeout",
                             "600",
                             "--",
                             BinaryPath("agent/rxfleet-agent"),
                             "--standalone",
                             "--server",
                             address,
                             "--insecure",
                             "--host-id",
                             kHostId,
                             "--label",
                             "board=x86",
                             "--state-dir",
                             (home / "state").string(),
                             "--policy-file",
                             (home / "policies.d").string(),
                             "--status-socket",
                             "none",
                             "--metrics-address",
                             "127.0.0.1:0",
                             "--probe-target",
                             "none",
                             "--reconcile-period",
                             "200ms"},
                            {"TMPDIR=" + (home / "tmp").string()});
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    absl::StatusOr<std::string> endpoint = agent_->WaitForLineContaining(
        Stream::kStderr, "metrics endpoint on http://", absl::Seconds(30));
    ASSERT_TRUE(endpoint.ok()) << agent_->Text(Stream::kStderr);
    metrics_port_ = std::stoi(endpoint->substr(endpoint->rfind(':') + 1));
  }

  std::vector<agent::telemetry::Sample> Scrape() const {
    auto response = agent::telemetry::HttpGet(metrics_port_, "/metrics");
    if (!response.ok()) return {};
    auto samples = agent::telemetry::ParseExposition(response->body);
    return samples.ok() ? *samples : std::vector<agent::telemetry::Sample>{};
  }

  // Waits for the host's stream; true when it is connected and announces `probes` (a failure
  // is added otherwise).
  bool ConnectedWithProbes() {
    if (!WaitFor([&] { return Host().has_value() && Host()->status().connected(); },
                 absl::Seconds(60))) {
      ADD_FAILURE() << "the host never connected\n" << Logs();
      return false;
    }
    const std::optional<v1::Host> host = Host();
    if (!host.has_value()) return false;
    const auto& capabilities = host->status().capabilities();
    if (std::find(capabilities.begin(), capabilities.end(), "probes") == capabilities.end()) {
      ADD_FAILURE() << "the agent does not announce the `probes` capability";
      return false;
    }
    return true;
  }

  void TearDown() override {
    if (agent_ != nullptr) agent_->Terminate(absl::Seconds(15));
    if (server_ != nullptr) server_->Terminate(absl::Seconds(15));
    fleet_.reset();
  }

  std::string Logs() const {
    std::string logs;
    if (server_) absl::StrAppend(&logs, "--- server\n", server_->Text(Stream::kStderr));
    if (agent_) absl::StrAppend(&logs, "--- agent\n", agent_->Text(Stream::kStderr));
    if (fleet_) absl::StrAppend(&logs, fleet_->Logs());
    return logs;
  }

  std::optional<v1::Host> Host() {
    v1::GetHostRequest request;
    request.set_name(kHostId);
    v1::Host host;
    grpc::ClientContext context;
    if (!fleet_service_->GetHost(WithDeadline(&context), request, &host).ok()) return std::nullopt;
    return host;
  }

  bool AllObserve(uint32_t hold_us) {
    v1::ListAdaptersRequest request;
    v1::ListAdaptersResponse response;
    grpc::ClientContext context;
    if (!fleet_service_->ListAdapters(WithDeadline(&context), request, &response).ok()) {
      return false;
    }
    if (response.adapters_size() < kAdapters) return false;
    for (const v1::Adapter& a : response.adapters()) {
      if (!a.status().has_observed() || a.status().observed().decoded().hold_us() != hold_us) {
        return false;
      }
    }
    return true;
  }

  std::optional<v1::Experiment> GetExperiment() {
    v1::GetExperimentRequest request;
    request.set_name("probe-e2e");
    v1::Experiment experiment;
    grpc::ClientContext context;
    if (!fleet_service_->GetExperiment(WithDeadline(&context), request, &experiment).ok()) {
      return std::nullopt;
    }
    return experiment;
  }

  TempDir dir_{"rxfleet-probe-experiment"};
  std::unique_ptr<VethFleet> fleet_;
  v1::Experiment experiment_;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<v1::FleetService::Stub> fleet_service_;
  std::unique_ptr<ChildProcess> agent_;
  std::string state_file_;
  int metrics_port_ = 0;
};

TEST_F(ProbeExperimentTest, ProbesAloneGiveAConclusiveReportOnAnIdleFleet) {
  ASSERT_TRUE(ConnectedWithProbes());
  // The built-in default: 32 µs at SuperSpeed.
  ASSERT_TRUE(WaitFor([&] { return AllObserve(32); }, absl::Seconds(90))) << Logs();

  v1::CreateExperimentRequest create;
  *create.mutable_experiment() = experiment_;
  v1::CreateExperimentResponse created;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        fleet_service_->CreateExperiment(WithDeadline(&context), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(created.experiment().status().phase(), v1::EXPERIMENT_PHASE_RUNNING);

  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::Experiment> e = GetExperiment();
        return e.has_value() && e->status().phase() == v1::EXPERIMENT_PHASE_COMPLETED;
      },
      absl::Seconds(240)))
      << Logs();

  v1::GetExperimentReportRequest report_request;
  report_request.set_name("probe-e2e");
  v1::ExperimentReport report;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        fleet_service_->GetExperimentReport(WithDeadline(&context), report_request, &report);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  SCOPED_TRACE(report.text());
  std::cout << report.text() << std::endl;  // the report an operator reads, in the test log
  EXPECT_EQ(report.phase(), v1::EXPERIMENT_PHASE_COMPLETED);
  ASSERT_EQ(report.segments_size(), 1) << Logs();
  const v1::SegmentReport& segment = report.segments(0);
  const v1::ArmComparison* throughput = nullptr;
  for (const v1::ArmComparison& c : segment.comparisons()) {
    if (c.arm() == "short" && c.metric() == "probe_rx_throughput_bps") throughput = &c;
  }
  ASSERT_NE(throughput, nullptr) << Logs();
  EXPECT_EQ(throughput->treatment_units(), static_cast<uint32_t>(kAdapters));
  EXPECT_TRUE(throughput->conclusive());
  EXPECT_GT(throughput->diff(), 0);
  EXPECT_GT(throughput->ci95_low(), 0) << "the interval must exclude zero";
  EXPECT_LT(throughput->p_value(), 0.05);
  for (const v1::ArmReport& arm : segment.arms()) {
    ASSERT_GT(arm.metrics_size(), 0) << arm.arm();
    EXPECT_EQ(arm.metrics(0).metric(), "probe_rx_throughput_bps");
    EXPECT_GT(arm.metrics(0).samples(), 0u) << arm.arm();
  }

  // From probes alone: the emulated netdevs never received a byte, and each shaped link ran
  // at both arms' rates.
  agent_->Terminate(absl::Seconds(15));
  agent_.reset();
  absl::StatusOr<nlohmann::json> state = ReadJsonFile(state_file_);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->at("devices").size(), static_cast<size_t>(kAdapters));
  for (const nlohmann::json& device : state->at("devices")) {
    const nlohmann::json& netdev = device.at("netdev");
    EXPECT_EQ(netdev.at("rx_bytes"), 0) << device.at("name");
    std::vector<uint64_t> rates;
    for (const nlohmann::json& r : netdev.at("shape").at("rates")) {
      rates.push_back(r.at("rate_bps").get<uint64_t>());
    }
    EXPECT_THAT(rates, ::testing::IsSupersetOf({61'300'000u, 100'200'000u})) << device.at("name");
  }
}

// A server policy with a probe, four adapters whose iperf3 servers share one address (one
// iperf3 server as far as the server can tell): the server gives each its own slot of the
// minute (PolicyBundle.probe_slots), and the agent runs each probe in its slot.
TEST_F(ProbeExperimentTest, ServerPolicyProbesAreStaggeredAcrossAdapters) {
  ASSERT_TRUE(ConnectedWithProbes());
  constexpr absl::Duration kDuration = absl::Seconds(2);
  v1::ApplyPolicyRequest apply;
  v1::Policy* policy = apply.mutable_policy();
  policy->mutable_metadata()->set_name("minutely-probe");
  policy->mutable_spec()->mutable_selector()->add_chips("rtl8922au");
  v1::ProbeSpec* probe = policy->mutable_spec()->mutable_probe();
  probe->set_server(fleet_->server_address());
  probe->mutable_duration()->set_seconds(absl::ToInt64Seconds(kDuration));
  probe->mutable_interval()->set_seconds(60);
  {
    v1::ApplyPolicyResponse applied;
    grpc::ClientContext context;
    const grpc::Status status =
        fleet_service_->ApplyPolicy(WithDeadline(&context), apply, &applied);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Every adapter runs once within its first minute; wait for all four.
  std::vector<agent::telemetry::Sample> samples;
  ASSERT_TRUE(WaitFor(
      [&] {
        samples = Scrape();
        int ok = 0;
        for (const agent::telemetry::Sample& sample : samples) {
          if (sample.name == "rxfleet_probe_runs_total" && sample.labels.at("result") == "ok" &&
              sample.value >= 1) {
            ++ok;
          }
        }
        return ok == kAdapters;
      },
      absl::Seconds(150)))
      << Logs();

  // Ends modulo the minute: slots of duration + 2 s, so ends at least 3 s apart.
  std::vector<double> ends;
  for (const agent::telemetry::Sample& sample : samples) {
    if (sample.name == "rxfleet_probe_last_run_timestamp_seconds") {
      ends.push_back(std::fmod(sample.value, 60.0));
    }
    if (sample.name == "rxfleet_probe_failures_total") {
      EXPECT_EQ(sample.value, 0) << "no probe may meet another at the iperf3 server: "
                                 << sample.labels.at("adapter") << " "
                                 << sample.labels.at("reason");
    }
  }
  ASSERT_EQ(ends.size(), static_cast<size_t>(kAdapters));
  // The server's slots (docs/SERVER.md, "Probe slots"): slot j starts at j * (2 s + 2 s) + 1 s
  // into the minute, so run j ends about 2 s later (plus iperf3's set-up and teardown). The
  // agent's own stable offsets, without slots, would be spread over the whole minute.
  std::sort(ends.begin(), ends.end());
  for (size_t j = 0; j < ends.size(); ++j) {
    const double slot_end = 1.0 + 4.0 * static_cast<double>(j) + 2.0;
    EXPECT_GE(ends[j], slot_end) << "run " << j;
    EXPECT_LT(ends[j], slot_end + 2.0) << "run " << j;
  }
  const std::string logs = agent_->Text(Stream::kStderr);
  EXPECT_THAT(logs, ::testing::Not(::testing::HasSubstr(": busy: "))) << logs;
}

}  // namespace
}  // namespace rxfleet
