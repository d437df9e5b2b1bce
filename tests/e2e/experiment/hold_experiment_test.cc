// The acceptance run of hold experiments on an emulated fleet, with every part real: the
// server, three agents under rxfleet-emulate whose traffic models follow the seed
// measurements (USB 3: 613 -> 1002 Mbit/s with a 32 µs hold; Pi 1 B+ over USB 2: 85.7 % UDP
// loss with 32 µs, 3.8 % with 1024 µs), and an Experiment document as an operator writes it.
// Expected: both USB 3 segments gain throughput on the short arm with a 95 % interval that
// excludes zero; the Pi 1 / USB 2 segment's short arm is stopped by the drop guardrail and its
// adapters go back to 1024 µs in their registers while the experiment runs on elsewhere.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/experiment/experiment.h"
#include "common/proto/experiment.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/e2e/experiment/emulated_fleet.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::EmulatedHost;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::WaitFor;
using ::rxfleet::testing::WithDeadline;

// Switchback in four-second periods (one second of burn-in, three valid one-second windows),
// segments by USB speed and board; the drop guardrail needs 3 adapters and 6 windows.
constexpr char kExperiment[] = R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: hold-e2e}
spec:
  selector: {chips: [rtl8922au]}
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  control: control
  design: switchback
  duration: 40s
  windowLength: 1s
  periodLength: 4s
  burnIn: 1s
  primaryMetric: rx_throughput_bps
  secondaryMetrics: [rx_drop_ratio]
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
  segments: [usb_speed, board]
  minAdaptersPerArm: 3
  minWindowsPerArm: 6
)";

class HoldExperimentTest : public ::rxfleet::testing::EmulatedFleetTest {
 protected:
  HoldExperimentTest()
      : EmulatedFleetTest("rxfleet-hold-experiment", [] {
          std::vector<EmulatedHost> hosts(3);
          hosts[0] = {"x86-1", "experiment-x86-usb3", "x86", nullptr, ""};
          hosts[1] = {"pi5-1", "experiment-pi5-usb3", "pi5", nullptr, ""};
          hosts[2] = {"pi1-1", "experiment-pi1-usb2", "pi1", nullptr, ""};
          return hosts;
        }()) {}

  std::optional<v1::Experiment> GetExperiment() {
    v1::GetExperimentRequest request;
    request.set_name("hold-e2e");
    v1::Experiment experiment;
    grpc::ClientContext context;
    if (!fleet_->GetExperiment(WithDeadline(&context), request, &experiment).ok()) {
      return std::nullopt;
    }
    return experiment;
  }
};

const v1::SegmentReport* FindSegment(const v1::ExperimentReport& report, const std::string& board) {
  for (const v1::SegmentReport& segment : report.segments()) {
    auto it = segment.segment().find("board");
    if (it != segment.segment().end() && it->second == board) return &segment;
  }
  return nullptr;
}

const v1::ArmComparison* FindComparison(const v1::SegmentReport& segment,
                                        const std::string& metric) {
  for (const v1::ArmComparison& c : segment.comparisons()) {
    if (c.arm() == "short" && c.metric() == metric) return &c;
  }
  return nullptr;
}

TEST_F(HoldExperimentTest, Usb3GainsThroughputAndThePi1ShortArmIsStoppedByTheDropGuardrail) {
  // Twelve adapters, each at the built-in default: 32 µs at SuperSpeed, 1024 µs at high-speed.
  ASSERT_TRUE(WaitFor(
      [&] {
        return AllObserve("board=x86", 4, 32) && AllObserve("board=pi5", 4, 32) &&
               AllObserve("board=pi1", 4, 1024);
      },
      absl::Seconds(90)))
      << Logs();

  absl::StatusOr<experiments::Experiment> parsed =
      experiments::ParseExperiment(kExperiment, "hold-e2e.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  v1::CreateExperimentRequest create;
  *create.mutable_experiment() = experiments::ExperimentToProto(*parsed);
  v1::CreateExperimentResponse created;
  {
    grpc::ClientContext context;
    const grpc::Status status = fleet_->CreateExperiment(WithDeadline(&context), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(created.experiment().status().phase(), v1::EXPERIMENT_PHASE_RUNNING);

  // The guardrail stops the short arm for Pi 1 / USB 2 only, with its reason.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::Experiment> e = GetExperiment();
        return e.has_value() && e->status().stopped_arms_size() > 0;
      },
      absl::Seconds(60)))
      << Logs();
  const v1::Experiment running = *GetExperiment();
  ASSERT_EQ(running.status().stopped_arms_size(), 1) << running.DebugString();
  const v1::StoppedArm& stopped = running.status().stopped_arms(0);
  EXPECT_EQ(stopped.arm(), "short");
  EXPECT_EQ(stopped.reason(), "GuardrailTripped");
  EXPECT_EQ(stopped.segment().at("board"), "pi1");
  EXPECT_EQ(stopped.segment().at("usb_speed"), "high");
  EXPECT_THAT(stopped.message(), ::testing::HasSubstr("rx_drop_ratio"));
  EXPECT_EQ(running.status().phase(), v1::EXPERIMENT_PHASE_RUNNING);

  // Its adapters are back at 1024 µs while the experiment goes on elsewhere.
  EXPECT_TRUE(WaitFor([&] { return AllObserve("board=pi1", 4, 1024); }, absl::Seconds(20)))
      << Logs();

  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::Experiment> e = GetExperiment();
        return e.has_value() && e->status().phase() == v1::EXPERIMENT_PHASE_COMPLETED;
      },
      absl::Seconds(90)))
      << Logs();
  // The Pi 1 adapters stayed at 1024 µs for the rest of the run.
  EXPECT_TRUE(AllObserve("board=pi1", 4, 1024));

  v1::GetExperimentReportRequest report_request;
  report_request.set_name("hold-e2e");
  v1::ExperimentReport report;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        fleet_->GetExperimentReport(WithDeadline(&context), report_request, &report);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  SCOPED_TRACE(report.text());
  std::cout << report.text() << std::endl;  // the report an operator reads, in the test log
  EXPECT_EQ(report.phase(), v1::EXPERIMENT_PHASE_COMPLETED);
  EXPECT_THAT(report.text(), ::testing::HasSubstr("rx_throughput_bps"));

  for (const std::string board : {"x86", "pi5"}) {
    const v1::SegmentReport* segment = FindSegment(report, board);
    ASSERT_NE(segment, nullptr) << board;
    EXPECT_EQ(segment->segment().at("usb_speed"), "super");
    const v1::ArmComparison* throughput = FindComparison(*segment, "rx_throughput_bps");
    ASSERT_NE(throughput, nullptr) << board;
    EXPECT_EQ(throughput->treatment_units(), 4u) << board;
    EXPECT_TRUE(throughput->conclusive()) << board;
    EXPECT_GT(throughput->diff(), 0) << board;
    EXPECT_GT(throughput->ci95_low(), 0) << board << ": the interval must exclude zero";
    EXPECT_LT(throughput->p_value(), 0.05) << board;
  }
  const v1::SegmentReport* pi1 = FindSegment(report, "pi1");
  ASSERT_NE(pi1, nullptr);
  bool short_arm_stopped = false;
  for (const v1::ArmReport& arm : pi1->arms()) {
    if (arm.arm() == "short") short_arm_stopped = arm.stopped();
  }
  EXPECT_TRUE(short_arm_stopped);

  // The experiment is over: every adapter returns to its policies (here the built-in default).
  EXPECT_TRUE(WaitFor(
      [&] {
        return AllObserve("board=x86", 4, 32) && AllObserve("board=pi5", 4, 32) &&
               AllObserve("board=pi1", 4, 1024);
      },
      absl::Seconds(20)))
      << Logs();

  // The emulated registers agree with what the agents reported.
  for (EmulatedHost& host : hosts_) {
    host.process->Terminate(absl::Seconds(15));
    host.process.reset();
    absl::StatusOr<nlohmann::json> state = ReadJsonFile(host.state_file);
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_EQ(state->at("devices").size(), 4u) << host.id;
    for (const nlohmann::json& device : state->at("devices")) {
      EXPECT_EQ(device.at("hold_us").get<int64_t>(), host.board == "pi1" ? 1024 : 32)
          << host.id << " " << device.at("name");
    }
  }
}

}  // namespace
}  // namespace rxfleet
