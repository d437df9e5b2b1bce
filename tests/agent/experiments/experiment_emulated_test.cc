// The real rxfleet-agent under rxfleet-emulate, connected to a fake AgentService on loopback
// that pushes a two-arm hold experiment (2 s windows) and then swaps the arms: the registers
// follow the arms, and the windows' receive rate (x86 USB 3) and drop ratio (Pi 1 USB 2)
// differ by arm as the emulator's traffic model says (docs/EMULATOR.md, "Traffic model").
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/proto/time.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;

// Server side of one agent: sends a ServerConfig and the latest bundle, pushes newer bundles
// as they are set, records metric windows.
class PushingAgentService final : public v1::AgentService::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage message;
    if (!stream->Read(&message) || !message.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "hello first");
    }
    {
      absl::MutexLock lock(&mu_);
      for (const std::string& c : message.hello().capabilities()) capabilities_.push_back(c);
    }
    v1::ServerMessage config;
    config.mutable_config()->set_server_version("fake");
    *config.mutable_config()->mutable_report_interval() =
        common::DurationToProto(absl::Seconds(30));
    stream->Write(config);
    bool done = false;
    std::thread writer([&] {
      uint64_t sent = 0;
      while (true) {
        v1::ServerMessage push;
        {
          absl::MutexLock lock(&mu_);
          auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return done || bundle_.version() > sent;
          };
          mu_.Await(absl::Condition(&ready));
          if (done) return;
          *push.mutable_bundle() = bundle_;
          sent = bundle_.version();
        }
        if (!stream->Write(push)) return;
      }
    });
    while (stream->Read(&message)) {
      absl::MutexLock lock(&mu_);
      if (message.has_metric_window()) windows_.push_back(message.metric_window());
      if (message.has_ack()) acked_ = message.ack().version();
    }
    {
      absl::MutexLock lock(&mu_);
      done = true;
    }
    writer.join();
    return grpc::Status::OK;
  }

  void Push(v1::PolicyBundle bundle) {
    absl::MutexLock lock(&mu_);
    bundle_ = std::move(bundle);
  }
  bool WaitForAck(uint64_t version, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return acked_ == version; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  // Waits until every adapter has `n` valid windows of bundle `version`.
  bool WaitForValid(uint64_t version, const std::vector<std::string>& adapters, size_t n,
                    absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const std::string& adapter : adapters) {
        if (ValidLocked(version, adapter).size() < n) return false;
      }
      return true;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  std::vector<v1::MetricWindow> Valid(uint64_t version, const std::string& adapter) const {
    absl::MutexLock lock(&mu_);
    return ValidLocked(version, adapter);
  }
  std::vector<v1::MetricWindow> windows() const {
    absl::MutexLock lock(&mu_);
    return windows_;
  }
  std::vector<std::string> capabilities() const {
    absl::MutexLock lock(&mu_);
    return capabilities_;
  }

 private:
  std::vector<v1::MetricWindow> ValidLocked(uint64_t version, const std::string& adapter) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<v1::MetricWindow> out;
    for (const v1::MetricWindow& w : windows_) {
      if (w.valid() && w.bundle_version() == version && w.adapter_id() == adapter) {
        out.push_back(w);
      }
    }
    return out;
  }

  mutable absl::Mutex mu_;
  v1::PolicyBundle bundle_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::MetricWindow> windows_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> capabilities_ ABSL_GUARDED_BY(mu_);
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
};

constexpr uint32_t kShortHold = 32;
constexpr uint32_t kLongHold = 1024;

// A SWITCHBACK-style bundle: `short_adapters` get the 32 µs arm, the others the 1024 µs arm.
v1::PolicyBundle ExperimentBundle(uint64_t version, uint32_t period,
                                  const std::vector<std::string>& adapters,
                                  const std::set<std::string>& short_adapters) {
  v1::PolicyBundle bundle;
  bundle.set_version(version);
  bundle.set_nonce(absl::StrCat("nonce-", version));
  const absl::Time start = absl::Now();
  for (const std::string& adapter : adapters) {
    const bool is_short = short_adapters.contains(adapter);
    v1::ExperimentAssignment* a = bundle.add_assignments();
    a->set_adapter_id(adapter);
    a->set_experiment("hold-switchback");
    a->set_experiment_generation(1);
    a->set_arm(is_short ? "short" : "long");
    a->mutable_settings()->set_hold_us(is_short ? kShortHold : kLongHold);
    a->set_priority(500);
    a->set_period_index(period);
    *a->mutable_period_start_time() = common::TimeToProto(start);
    *a->mutable_period_end_time() = common::TimeToProto(start + absl::Minutes(10));
    *a->mutable_window_length() = common::DurationToProto(absl::Seconds(2));
    *a->mutable_burn_in() = common::DurationToProto(absl::Seconds(1));
  }
  return bundle;
}

double RxMbps(const v1::MetricWindow& w) {
  return static_cast<double>(w.rx_bytes()) * 8 / 1e6 /
         absl::ToDoubleSeconds(common::DurationFromProto(w.window_duration()));
}

double DropRatio(const v1::MetricWindow& w) {
  const double total = static_cast<double>(w.rx_packets() + w.rx_dropped());
  return total == 0 ? 0 : static_cast<double>(w.rx_dropped()) / total;
}

struct LabCase {
  std::string lab;
  std::vector<std::string> adapters;
};

class ExperimentEmulatedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (agent_) agent_->Terminate();
    server_->Shutdown();
  }

  void StartAgent(const std::string& lab) {
    std::filesystem::create_directories(dir_.path() / "tmp");
    std::vector<std::string> argv = {
        EmulatorPath(),
        "--lab",
        SourcePath(lab),
        "--state-out",
        dir_.File("state.json"),
        "--timeout",
        "200",
        "--",
        BinaryPath("agent/rxfleet-agent"),
        "--standalone",
        "--server",
        absl::StrCat("127.0.0.1:", port_),
        "--insecure",
        "--status-socket",
        "none",
        "--reconcile-period",
        "500ms",
        "--state-dir",
        dir_.File("agent-state"),
    };
    auto child = ChildProcess::Start(argv, {"TMPDIR=" + dir_.File("tmp")});
    ASSERT_TRUE(child.ok()) << child.status();
    agent_ = *std::move(child);
  }

  // Runs the experiment: the first two adapters short, the others long, then the arms swapped;
  // waits for two valid windows per adapter and bundle.
  void RunSwitchback(const LabCase& lab) {
    StartAgent(lab.lab);
    const std::set<std::string> first(lab.adapters.begin(), lab.adapters.begin() + 2);
    const std::set<std::string> second(lab.adapters.begin() + 2, lab.adapters.end());
    bundles_[1] = ExperimentBundle(1, 0, lab.adapters, first);
    service_.Push(bundles_[1]);
    ASSERT_TRUE(service_.WaitForAck(1, absl::Seconds(60))) << agent_->Text(Stream::kStderr);
    ASSERT_TRUE(service_.WaitForValid(1, lab.adapters, 2, absl::Seconds(60)))
        << agent_->Text(Stream::kStderr);
    bundles_[2] = ExperimentBundle(2, 1, lab.adapters, second);
    service_.Push(bundles_[2]);
    ASSERT_TRUE(service_.WaitForAck(2, absl::Seconds(60))) << agent_->Text(Stream::kStderr);
    ASSERT_TRUE(service_.WaitForValid(2, lab.adapters, 2, absl::Seconds(60)))
        << agent_->Text(Stream::kStderr);
  }

  // Checks each valid window's arm, observed register and `check` of the model figure.
  struct Summary {
    int windows = 0;
    double rx_mbps = 0;
    double drop_ratio = 0;
    double MeanRxMbps() const { return windows == 0 ? 0 : rx_mbps / windows; }
  };

  // Checks each valid window's tags and observed register, runs `check` on it, and returns the
  // per-arm summary.
  template <typename Check>
  std::map<std::string, Summary> ExpectByArm(const LabCase& lab, Check check) {
    const std::set<std::string> first(lab.adapters.begin(), lab.adapters.begin() + 2);
    std::map<std::string, Summary> by_arm;
    for (uint64_t version : {1u, 2u}) {
      for (const std::string& adapter : lab.adapters) {
        const bool is_short = (version == 1) == first.contains(adapter);
        for (const v1::MetricWindow& w : service_.Valid(version, adapter)) {
          SCOPED_TRACE(
              absl::StrCat("bundle ", version, " adapter ", adapter, " window at ",
                           absl::FormatTime(common::TimeFromProto(w.window_start_time())), " for ",
                           absl::FormatDuration(common::DurationFromProto(w.window_duration())),
                           ": rx_bytes ", w.rx_bytes(), ", rx_dropped ", w.rx_dropped()));
          EXPECT_EQ(w.experiment(), "hold-switchback");
          EXPECT_EQ(w.arm(), is_short ? "short" : "long");
          EXPECT_EQ(w.period_index(), version - 1);
          EXPECT_EQ(w.observed_settings().hold_us(), is_short ? kShortHold : kLongHold);
          // No window of the arm starts before its period did. (The agent ticks on the 2 s
          // edges, but how late a tick runs depends on the machine's load: not asserted.)
          const absl::Duration offset =
              common::TimeFromProto(w.window_start_time()) -
              common::TimeFromProto(bundles_[version].assignments(0).period_start_time());
          EXPECT_GE(offset, absl::ZeroDuration()) << absl::FormatDuration(offset);
          check(w, is_short);
          Summary& summary = by_arm[is_short ? "short" : "long"];
          ++summary.windows;
          summary.rx_mbps += RxMbps(w);
          summary.drop_ratio += DropRatio(w);
        }
      }
    }
    for (const auto& [arm, summary] : by_arm) {
      std::cout << lab.lab << " arm " << arm << ": " << summary.windows
                << " valid windows, mean rx " << summary.rx_mbps / summary.windows
                << " Mbit/s, mean drop ratio " << summary.drop_ratio / summary.windows << "\n";
    }
    return by_arm;
  }

  PushingAgentService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  TempDir dir_{"rxfleet-experiment-emulated"};
  std::unique_ptr<ChildProcess> agent_;
  std::map<uint64_t, v1::PolicyBundle> bundles_;  // by version
};

TEST_F(ExperimentEmulatedTest, X86Usb3ReceiveRateFollowsTheArm) {
  const LabCase lab{"tests/labs/experiment-x86-usb3.yaml",
                    {"port-2-1", "port-2-2", "port-2-3", "port-2-4"}};
  ASSERT_NO_FATAL_FAILURE(RunSwitchback(lab));
  const std::vector<std::string> capabilities = service_.capabilities();
  EXPECT_NE(std::find(capabilities.begin(), capabilities.end(), "metric_windows"),
            capabilities.end());
  // Model at 1200 Mbit/s offered: 1002 Mbit/s with 32 µs, 613 with 1024 µs. The emulator
  // advances its statistics every 100 ms, so a single 2 s window may be off by several percent
  // (more on a loaded machine).
  // Each window lies on its arm's side of the midpoint; the means match the model closely.
  std::map<std::string, Summary> by_arm =
      ExpectByArm(lab, [](const v1::MetricWindow& w, bool is_short) {
        if (is_short) {
          EXPECT_GT(RxMbps(w), (1002 + 613) / 2.0);
        } else {
          EXPECT_LT(RxMbps(w), (1002 + 613) / 2.0);
        }
        EXPECT_EQ(w.rx_dropped(), 0u);
      });
  EXPECT_NEAR(by_arm["short"].MeanRxMbps(), 1002, 1002 * 0.08);
  EXPECT_NEAR(by_arm["long"].MeanRxMbps(), 613, 613 * 0.08);
  // Windows before the arm was in the registers are reported, marked invalid. A window may
  // also be invalid because a tick found the netdev statistics unreadable ("adapter_gone",
  // e.g. while the emulator rewrites them on a loaded machine); never for another reason.
  bool saw_invalid = false;
  for (const v1::MetricWindow& w : service_.windows()) {
    if (!w.valid()) {
      saw_invalid = true;
      EXPECT_TRUE(w.invalid_reason() == "burn_in" || w.invalid_reason() == "settings_not_applied" ||
                  w.invalid_reason() == "adapter_gone")
          << w.invalid_reason();
    }
  }
  EXPECT_TRUE(saw_invalid);
}

TEST_F(ExperimentEmulatedTest, Pi1Usb2DropsFollowTheArm) {
  const LabCase lab{"tests/labs/experiment-pi1-usb2.yaml",
                    {"port-1-1.2", "port-1-1.3", "port-1-1.4", "port-1-1.5"}};
  ASSERT_NO_FATAL_FAILURE(RunSwitchback(lab));
  // Model at 50 Mbit/s offered: 85.7 % dropped with 32 µs, 3.8 % with 1024 µs.
  ExpectByArm(lab, [](const v1::MetricWindow& w, bool is_short) {
    if (is_short) {
      EXPECT_GT(DropRatio(w), 0.5);
    } else {
      EXPECT_LT(DropRatio(w), 0.05);
    }
  });
}

TEST_F(ExperimentEmulatedTest, Pi5Usb3ReceiveRateFollowsTheArm) {
  const LabCase lab{"tests/labs/experiment-pi5-usb3.yaml",
                    {"port-2-1.1", "port-2-1.2", "port-4-1.1", "port-4-1.2"}};
  ASSERT_NO_FATAL_FAILURE(RunSwitchback(lab));
  // Model at 1200 Mbit/s offered: 1010 Mbit/s with 32 µs, 587 with 1024 µs.
  std::map<std::string, Summary> by_arm =
      ExpectByArm(lab, [](const v1::MetricWindow& w, bool is_short) {
        if (is_short) {
          EXPECT_GT(RxMbps(w), (1010 + 587) / 2.0);
        } else {
          EXPECT_LT(RxMbps(w), (1010 + 587) / 2.0);
        }
      });
  EXPECT_NEAR(by_arm["short"].MeanRxMbps(), 1010, 1010 * 0.08);
  EXPECT_NEAR(by_arm["long"].MeanRxMbps(), 587, 587 * 0.08);
}

}  // namespace
}  // namespace rxfleet::agent
