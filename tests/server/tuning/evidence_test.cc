#include "server/tuning/evidence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/server/tuning/tuning_sim.h"

namespace rxfleet::tuning {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTuning[] = R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: ev}
spec:
  segments: [usb_speed]
  candidates: [128us, 1024us]
  objective: {metric: rtt_p99_seconds, direction: minimize}
  guardrails:
    - {metric: busiest_core_ratio, op: "<=", threshold: 0.9}
    - {metric: rtt_p99_seconds, op: "<=", threshold: 20ms}
  budget: {maxWindows: 1000}
  periodLength: 10m
)";

TEST(EvidenceTest, HoldArmName) { EXPECT_EQ(HoldArmName(128), "hold-128us"); }

TEST(EvidenceTest, ComparisonExperimentIsTheIncumbentFirstSwitchback) {
  const HoldTuning t = testing::MustParseTuning(kTuning);
  const std::vector<uint32_t> holds = {128};
  absl::StatusOr<experiments::Experiment> e =
      ComparisonExperiment(t, {"super"}, 1024, holds, absl::Minutes(25));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->control_arm, "hold-1024us");
  ASSERT_EQ(e->arms.size(), 2u);
  EXPECT_EQ(e->arms[1].settings.hold_us, 128u);
  EXPECT_EQ(e->design, experiments::Design::kSwitchback);
  EXPECT_EQ(e->duration, absl::Minutes(30));  // rounded up to whole periods
  EXPECT_EQ(e->primary_metric, experiments::Metric::kRttP99Seconds);
  // The guardrail metrics other than the objective, once each.
  EXPECT_THAT(e->secondary_metrics, ElementsAre(experiments::Metric::kBusiestCoreRatio));
  // A challenger equal to the incumbent is not a comparison.
  const std::vector<uint32_t> same = {1024};
  EXPECT_FALSE(ComparisonExperiment(t, {"super"}, 1024, same, absl::Minutes(25)).ok());
}

TEST(EvidenceTest, ClearsMinEffectInTheObjectivesDirection) {
  EXPECT_TRUE(ClearsMinEffect(Direction::kMaximize, {0.021, 0.2}, 0.02));
  EXPECT_FALSE(ClearsMinEffect(Direction::kMaximize, {0.019, 0.2}, 0.02));
  EXPECT_TRUE(ClearsMinEffect(Direction::kMinimize, {-0.3, -0.05}, 0.02));
  EXPECT_FALSE(ClearsMinEffect(Direction::kMinimize, {-0.3, -0.01}, 0.02));
}

TEST(EvidenceTest, AlwaysValidRelativeIsWiderThanTheFixedHorizonInterval) {
  const std::vector<double> treatment = {110, 121, 104, 118, 112, 109, 115, 120};
  const std::vector<double> control = {100, 108, 97, 106, 101, 99, 104, 109};
  absl::StatusOr<experiments::DifferenceEstimate> d = experiments::PairedTTest(treatment, control);
  ASSERT_TRUE(d.ok());
  std::optional<experiments::AlwaysValidEstimate> av = AlwaysValidRelative(*d);
  ASSERT_TRUE(av.has_value());
  ASSERT_TRUE(d->relative.has_value());
  EXPECT_LT(av->ci.low, d->relative->ci.low);
  EXPECT_GT(av->ci.high, d->relative->ci.high);
  EXPECT_TRUE(av->ci.Contains(d->relative->value));
  experiments::DifferenceEstimate no_relative = *d;
  no_relative.relative.reset();
  EXPECT_FALSE(AlwaysValidRelative(no_relative).has_value());
}

TEST(EvidenceTest, EmptyWindowsGiveAnInconclusiveRow) {
  const HoldTuning t = testing::MustParseTuning(kTuning);
  const ChallengerInfo info{128, "active", ""};
  absl::StatusOr<Evidence> ev =
      ComputeEvidence(t, {"super"}, 1024, {&info, 1}, testing::kStart, 0, 4, {}, testing::kStart);
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_EQ(ev->candidates.size(), 1u);
  EXPECT_FALSE(ev->candidates[0].conclusive);
  EXPECT_EQ(ev->candidates[0].pairs, 0u);
  ASSERT_EQ(ev->candidates[0].guardrails.size(), 2u);
  EXPECT_EQ(ev->candidates[0].guardrails[0].check.state,
            experiments::GuardrailState::kNotEnoughData);
  const std::string text = RenderEvidenceText(t, *ev);
  EXPECT_THAT(text, HasSubstr("128µs [active]: 0 pairs"));
  // A tuning is judged on always-valid statistics at every look: no experiment header, no
  // planned end and no fixed-horizon peeking warning.
  EXPECT_THAT(text, Not(HasSubstr("Experiment ")));
  EXPECT_THAT(text, Not(HasSubstr("Planned:")));
  EXPECT_THAT(text, Not(HasSubstr("[peeking]")));
  EXPECT_THAT(text, HasSubstr("always-valid (mSPRT) 95 % interval and p; * objective"));
}

TEST(EvidenceTest, TheEpochStartIsInUtcToTheSecondAsEverywhereElse) {
  // Not the server's local time zone with nanoseconds ("...T00:00:00.25+01:00").
  const HoldTuning t = testing::MustParseTuning(kTuning);
  const ChallengerInfo info{128, "active", ""};
  const absl::Time start = testing::kStart + absl::Milliseconds(250);
  absl::StatusOr<Evidence> ev =
      ComputeEvidence(t, {"super"}, 1024, {&info, 1}, start, 0, 4, {}, start);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_THAT(RenderEvidenceText(t, *ev),
              HasSubstr(", periods 0..4 of the epoch starting 2026-01-01T00:00:00Z\n"));
}

}  // namespace
}  // namespace rxfleet::tuning
