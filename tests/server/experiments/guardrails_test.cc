#include "server/experiments/guardrails.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/experiments/report.h"
#include "tests/server/experiments/scenarios.h"

namespace rxfleet::experiments {
namespace {

using ::testing::HasSubstr;
using testing::kStart;
using testing::MixedFleet;
using testing::MustAssigner;
using testing::MustParseExperiment;
using testing::SimAdapter;
using testing::SimOptions;
using testing::Simulate;

std::vector<GuardrailDecision> MustEvaluate(const Experiment& e, const std::vector<Window>& windows,
                                            const std::vector<StoppedArm>& stopped = {}) {
  absl::StatusOr<std::vector<GuardrailDecision>> d =
      EvaluateGuardrails(e, kStart, windows, stopped);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : std::vector<GuardrailDecision>{};
}

TEST(GuardrailsTest, StopsTheShortHoldOnPi1Usb2Only) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  SimOptions sim;
  sim.until = kStart + absl::Hours(2);  // four periods: two on each arm
  const std::vector<Window> windows = Simulate(assigner, MixedFleet(), sim);
  const std::vector<GuardrailDecision> decisions = MustEvaluate(e, windows);
  ASSERT_EQ(decisions.size(), 1u);
  const GuardrailDecision& d = decisions[0];
  EXPECT_EQ(d.arm, "short");
  EXPECT_EQ(d.segment, (std::vector<std::string>{"high", "pi1"}));
  EXPECT_EQ(d.metric, Metric::kRxDropRatio);
  EXPECT_EQ(d.op, GuardrailOp::kAtMost);
  EXPECT_DOUBLE_EQ(d.threshold, 0.05);
  EXPECT_NEAR(d.observed, 0.857, 0.02);
  EXPECT_GT(d.bound, 0.05);
  EXPECT_LE(d.bound, d.observed);
  EXPECT_EQ(d.adapters, 4u);
  EXPECT_EQ(d.windows, 4u * 2u * 25u);
  EXPECT_EQ(d.reason, "GuardrailTripped");
  EXPECT_THAT(d.message, HasSubstr("rx_drop_ratio 85."));
  EXPECT_THAT(d.message, HasSubstr("breaks <= 5.000 % over 4 adapters, 200 windows"));

  // Once recorded, the decision is not repeated; the stop sends those adapters to control.
  const StoppedArm stop = ToStoppedArm(d, kStart + absl::Hours(2));
  EXPECT_EQ(stop.segment, d.segment);
  EXPECT_EQ(stop.reason, "GuardrailTripped");
  EXPECT_TRUE(MustEvaluate(e, windows, {stop}).empty());
  const std::vector<StoppedArm> stopped = {stop};
  int redirected = 0;
  for (const SimAdapter& adapter : MixedFleet()) {
    for (int k = 4; k < 8; ++k) {
      const Assignment a =
          *assigner.Assign(adapter.key, adapter.segment, kStart + absl::Minutes(30) * k, stopped);
      if (adapter.segment[1] == "pi1") {
        EXPECT_EQ(a.arm, "control");
        redirected += a.sent_to_control;
      } else {
        EXPECT_EQ(a.arm_index, a.scheduled_arm_index);
      }
    }
  }
  EXPECT_EQ(redirected, 4 * 2);  // 4 Pi 1 adapters, 2 of the 4 periods scheduled short

  // The report marks the arm stopped in that segment only and says why.
  absl::StatusOr<Report> r = ComputeReport(e, windows, {kStart, kStart + absl::Hours(2), stopped});
  ASSERT_TRUE(r.ok()) << r.status();
  for (const SegmentResult& s : r->segments) {
    EXPECT_EQ(s.arms[1].stopped, s.values[1] == "pi1") << s.values[1];
    EXPECT_FALSE(s.arms[0].stopped);
  }
  bool noted = false;
  for (const ReportNote& note : r->notes) {
    if (note.code == kNoteGuardrailTripped) {
      noted = true;
      EXPECT_THAT(note.message, HasSubstr("Arm short stopped in usb_speed=high, board=pi1"));
      EXPECT_EQ(note.segment, d.segment);
    }
  }
  EXPECT_TRUE(noted);
}

TEST(GuardrailsTest, ControlIsNeverStopped) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  std::vector<SimAdapter> fleet = MixedFleet();
  for (SimAdapter& adapter : fleet) {
    adapter.arms[0].drop_ratio = 0.5;  // control breaks the guardrail everywhere
    adapter.arms[1].drop_ratio = 0.01;
  }
  SimOptions sim;
  sim.until = kStart + absl::Hours(2);
  const std::vector<GuardrailDecision> decisions = MustEvaluate(e, Simulate(assigner, fleet, sim));
  EXPECT_TRUE(decisions.empty()) << decisions[0].arm << ": " << decisions[0].message;
}

TEST(GuardrailsTest, NeedsEnoughEvidence) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  // Two Pi 1 adapters only: below minAdaptersPerArm 3, however bad.
  std::vector<SimAdapter> fleet = MixedFleet();
  fleet.erase(fleet.begin() + 6, fleet.begin() + 8);
  SimOptions sim;
  sim.until = kStart + absl::Hours(2);
  EXPECT_TRUE(MustEvaluate(e, Simulate(assigner, fleet, sim)).empty());

  // Four adapters with 2 short periods of 25 valid windows each: 200 windows, below a
  // guardrail's own minWindows of 500, so it waits.
  Experiment strict = e;
  strict.guardrails[0].min_windows = 500;
  EXPECT_TRUE(MustEvaluate(strict, Simulate(assigner, MixedFleet(), sim)).empty());

  // A mean just above the threshold with a wide spread does not trip: the lower bound is
  // below the threshold.
  std::vector<SimAdapter> noisy = MixedFleet();
  const double drops[] = {0.0, 0.01, 0.12, 0.13};
  for (int i = 0; i < 4; ++i) noisy[6 + i].arms[1].drop_ratio = drops[i];
  const std::vector<Window> windows = Simulate(assigner, noisy, sim);
  EXPECT_TRUE(MustEvaluate(e, windows).empty());
  absl::StatusOr<Report> r = ComputeReport(e, windows, {kStart, kStart + absl::Hours(2), {}});
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->segments[0].arms[1].metrics[3].estimate.mean, 0.05);  // pi1, short, drops
}

TEST(GuardrailsTest, AtLeastGuardrails) {
  Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  e.guardrails = {{Metric::kRxThroughputBps, GuardrailOp::kAtLeast, 95e6, 3, 10}};
  ASSERT_TRUE(ValidateExperiment(e).ok());
  const Assigner assigner = MustAssigner(e);
  SimOptions sim;
  sim.until = kStart + absl::Hours(2);
  const std::vector<GuardrailDecision> decisions =
      MustEvaluate(e, Simulate(assigner, MixedFleet(), sim));
  ASSERT_EQ(decisions.size(), 1u);  // Pi 1 short: 87.7 Mbit/s < 95 Mbit/s
  EXPECT_EQ(decisions[0].segment, (std::vector<std::string>{"high", "pi1"}));
  EXPECT_LT(decisions[0].bound, 95e6);
  EXPECT_THAT(decisions[0].message, HasSubstr("upper bound"));
}

}  // namespace
}  // namespace rxfleet::experiments
