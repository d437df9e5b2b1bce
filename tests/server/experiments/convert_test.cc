#include "server/experiments/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/proto/time.h"
#include "server/experiments/promotion.h"
#include "tests/server/experiments/scenarios.h"

namespace rxfleet::experiments {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kStart;
using testing::MixedFleet;
using testing::MustAssigner;
using testing::MustParseExperiment;
using testing::SimOptions;
using testing::Simulate;

TEST(ExperimentProtoTest, RoundTrip) {
  Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  e.labels = {{"team", "edge"}};
  e.priority = 10;
  e.seed = 99;
  e.guardrails[1].op = GuardrailOp::kAtLeast;
  e.guardrails[0].min_windows = 20;
  e.guardrails[0].min_adapters = 4;
  e.min_adapters_per_arm = 5;
  e.min_windows_per_arm = 50;
  const v1::Experiment proto = ExperimentToProto(e);
  EXPECT_EQ(proto.spec().min_adapters_per_arm(), 5u);
  EXPECT_EQ(proto.spec().min_windows_per_arm(), 50u);
  EXPECT_EQ(proto.spec().guardrails(0).min_adapters(), 4u);
  EXPECT_EQ(proto.metadata().name(), "hold-fleet");
  EXPECT_EQ(proto.spec().design(), v1::EXPERIMENT_DESIGN_SWITCHBACK);
  EXPECT_EQ(proto.spec().arms(1).settings().hold_us(), 32u);
  EXPECT_EQ(proto.spec().period_length().seconds(), 1800);
  EXPECT_EQ(proto.spec().guardrails(0).comparator(), v1::COMPARATOR_GREATER_THAN);
  EXPECT_EQ(proto.spec().guardrails(1).comparator(), v1::COMPARATOR_LESS_THAN);
  EXPECT_EQ(proto.spec().guardrails(0).min_windows(), 20u);
  EXPECT_EQ(proto.spec().guardrails(2).metric(), "rtt_p99_seconds");
  EXPECT_DOUBLE_EQ(proto.spec().guardrails(2).threshold(), 0.02);
  EXPECT_THAT(proto.spec().segment_label_keys(), ElementsAre("usb_speed", "board"));
  absl::StatusOr<Experiment> back = ExperimentFromProto(proto, "server");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source, "server");
  back->source = e.source;
  EXPECT_EQ(*back, e);  // every field survives, including the minimums
}

TEST(ExperimentProtoTest, FromProtoErrors) {
  const v1::Experiment good = ExperimentToProto(MustParseExperiment(testing::kSwitchbackFleet));
  v1::Experiment bad = good;
  bad.mutable_spec()->set_design(v1::EXPERIMENT_DESIGN_UNSPECIFIED);
  EXPECT_THAT(ExperimentFromProto(bad, "server").status().message(),
              HasSubstr("experiment 'hold-fleet': spec.design: must be"));
  bad = good;
  bad.mutable_spec()->mutable_guardrails(0)->set_relative_to_control(true);
  EXPECT_THAT(ExperimentFromProto(bad, "server").status().message(),
              HasSubstr("spec.guardrails[0].relative_to_control: relative guardrails are not"));
  bad = good;
  bad.mutable_spec()->set_primary_metric("rx_bytes_per_second");
  EXPECT_THAT(ExperimentFromProto(bad, "server").status().message(),
              HasSubstr("spec.primary_metric: unknown metric 'rx_bytes_per_second'"));
  bad = good;
  bad.mutable_spec()->mutable_arms(1)->set_weight(0);
  EXPECT_THAT(ExperimentFromProto(bad, "server").status().message(),
              HasSubstr("experiment 'hold-fleet': spec.arms[1].weight: weight 0 is out of range"));
  // Defaults: control = first arm, window 60 s.
  v1::Experiment defaults = good;
  defaults.mutable_spec()->clear_control_arm();
  defaults.mutable_spec()->clear_window_length();
  absl::StatusOr<Experiment> e = ExperimentFromProto(defaults, "server");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->control_arm, "control");
  EXPECT_EQ(e->window_length, absl::Seconds(60));
}

// A Duration whose seconds and nanos have different signs is not a valid Duration; it used to
// be folded into another value ({3600 s, -1 ns} became 3599.999999999 s).
TEST(ExperimentProtoTest, MixedSignDurationsAreRefused) {
  const v1::Experiment good = ExperimentToProto(MustParseExperiment(testing::kSwitchbackFleet));
  v1::Experiment bad = good;
  bad.mutable_spec()->mutable_duration()->set_seconds(3600);
  bad.mutable_spec()->mutable_duration()->set_nanos(-1);
  absl::StatusOr<Experiment> e = ExperimentFromProto(bad, "server");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(),
              HasSubstr("spec.duration: seconds 3600 and nanos -1 have different signs"));
  bad = good;
  bad.mutable_spec()->mutable_burn_in()->set_seconds(-1);
  bad.mutable_spec()->mutable_burn_in()->set_nanos(500000000);
  EXPECT_THAT(ExperimentFromProto(bad, "server").status().message(),
              HasSubstr("spec.burn_in: seconds -1 and nanos 500000000 have different signs"));
  bad = good;
  bad.mutable_spec()->mutable_period_length()->set_nanos(1000000000);
  EXPECT_THAT(ExperimentFromProto(bad, "server").status().message(),
              HasSubstr("spec.period_length: nanos 1000000000 is outside"));
}

TEST(AssignmentProtoTest, CarriesArmSettingsAndPeriod) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  const Assignment a =
      *assigner.Assign("x86-1/port-2", {"super", "x86"}, kStart + absl::Minutes(95), {});
  const v1::ExperimentAssignment p = AssignmentToProto(e, 4, "port-2", a);
  EXPECT_EQ(p.adapter_id(), "port-2");
  EXPECT_EQ(p.experiment(), "hold-fleet");
  EXPECT_EQ(p.experiment_generation(), 4);
  EXPECT_EQ(p.arm(), a.arm);
  EXPECT_EQ(p.settings().hold_us(), a.arm == "short" ? 32u : 1024u);
  EXPECT_EQ(p.period_index(), 3u);
  EXPECT_EQ(common::TimeFromProto(p.period_start_time()), kStart + absl::Minutes(90));
  EXPECT_EQ(common::TimeFromProto(p.period_end_time()), kStart + absl::Hours(2));
  EXPECT_EQ(common::DurationFromProto(p.window_length()), e.window_length);
  EXPECT_EQ(common::DurationFromProto(p.burn_in()), e.burn_in);
}

TEST(StoppedArmProtoTest, RoundTrip) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const StoppedArm s{"short", {"high", "pi1"}, "GuardrailTripped", "drops", kStart};
  const v1::StoppedArm p = StoppedArmToProto(e, s);
  EXPECT_EQ(p.segment().at("board"), "pi1");
  EXPECT_EQ(p.segment().at("usb_speed"), "high");
  absl::StatusOr<StoppedArm> back = StoppedArmFromProto(e, p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  v1::StoppedArm bad = p;
  bad.mutable_segment()->erase("board");
  EXPECT_FALSE(StoppedArmFromProto(e, bad).ok());
  bad = p;
  bad.set_arm("long");
  EXPECT_FALSE(StoppedArmFromProto(e, bad).ok());
}

TEST(WindowProtoTest, Fields) {
  v1::MetricWindow p;
  p.set_adapter_id("port-1");
  p.set_arm("short");
  p.set_period_index(3);
  *p.mutable_window_start_time() = common::TimeToProto(kStart);
  p.mutable_window_duration()->set_seconds(60);
  p.set_rx_bytes(7500000000);
  p.set_rx_packets(99);
  p.set_rx_dropped(1);
  p.mutable_rtt()->set_count(5);
  p.mutable_rtt()->set_p99_seconds(0.002);
  p.set_probes_sent(10);
  p.set_probes_lost(1);
  p.set_busiest_core_ratio(0.25);
  p.set_valid(false);
  p.set_invalid_reason("counter_reset");
  const Window w = WindowFromProto(p, "pi-3", {"high", "pi1"});
  EXPECT_EQ(w.adapter, "pi-3/port-1");
  EXPECT_EQ(w.segment, (std::vector<std::string>{"high", "pi1"}));
  EXPECT_EQ(w.start, kStart);
  EXPECT_EQ(w.duration, absl::Minutes(1));
  EXPECT_FALSE(w.valid);
  EXPECT_EQ(w.invalid_reason, "counter_reset");
  EXPECT_DOUBLE_EQ(*MetricValue(w, Metric::kRxThroughputBps), 1e9);  // 7.5 GB in 60 s
  EXPECT_DOUBLE_EQ(*MetricValue(w, Metric::kRxDropRatio), 0.01);
  EXPECT_DOUBLE_EQ(*MetricValue(w, Metric::kRttP99Seconds), 0.002);
  EXPECT_DOUBLE_EQ(*MetricValue(w, Metric::kProbeLossRatio), 0.1);
  EXPECT_DOUBLE_EQ(*MetricValue(w, Metric::kBusiestCoreRatio), 0.25);
  Window empty;
  empty.duration = absl::Minutes(1);
  EXPECT_FALSE(MetricValue(empty, Metric::kRttMeanSeconds).has_value());
  EXPECT_FALSE(MetricValue(empty, Metric::kRxDropRatio).has_value());
  EXPECT_FALSE(MetricValue(empty, Metric::kProbeLossRatio).has_value());
  EXPECT_EQ(*MetricValue(empty, Metric::kRxThroughputBps), 0.0);
}

TEST(ReportProtoTest, MapsSegmentsArmsComparisonsAndNotes) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  SimOptions sim;
  sim.until = kStart + absl::Hours(4);
  absl::StatusOr<Report> r =
      ComputeReport(e, Simulate(assigner, MixedFleet(), sim), {kStart, sim.until, {}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ExperimentReport p = ReportToProto(*r, 2, v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_EQ(p.experiment(), "hold-fleet");
  EXPECT_EQ(p.generation(), 2);
  EXPECT_EQ(p.phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_EQ(p.primary_metric(), "rx_throughput_bps");
  EXPECT_EQ(common::TimeFromProto(p.first_window_time()), kStart + absl::Minutes(5));
  ASSERT_EQ(p.segments_size(), 3);
  const v1::SegmentReport& pi5 = p.segments(1);
  EXPECT_EQ(pi5.segment().at("board"), "pi5");
  ASSERT_EQ(pi5.arms_size(), 2);
  EXPECT_EQ(pi5.arms(0).arm(), "control");
  EXPECT_EQ(pi5.arms(0).adapters(), 1u);
  ASSERT_EQ(pi5.arms(0).metrics_size(), 4);
  EXPECT_EQ(pi5.arms(0).metrics(0).metric(), "rx_throughput_bps");
  EXPECT_TRUE(std::isnan(pi5.arms(0).metrics(0).ci95_low()));  // one adapter: no interval
  EXPECT_EQ(pi5.comparisons_size(), 0);                        // left out; a note explains
  const v1::SegmentReport& usb3 = p.segments(2);
  EXPECT_EQ(usb3.segment().at("usb_speed"), "super");
  EXPECT_EQ(usb3.arms(1).windows(), 6u * 4u * 25u);
  EXPECT_EQ(usb3.arms(1).invalid_windows(), 6u * 4u * 5u);
  EXPECT_EQ(usb3.arms(1).metrics(0).samples(), 6u * 4u * 25u);
  EXPECT_FALSE(std::isnan(usb3.arms(1).metrics(0).ci95_low()));
  ASSERT_EQ(usb3.comparisons_size(), 4);
  EXPECT_EQ(usb3.comparisons(0).arm(), "short");
  EXPECT_EQ(usb3.comparisons(0).control_arm(), "control");
  EXPECT_EQ(usb3.comparisons(0).metric(), "rx_throughput_bps");
  EXPECT_GT(usb3.comparisons(0).ci95_low(), 0);
  EXPECT_NEAR(usb3.comparisons(0).relative_diff(), 0.63, 0.03);
  EXPECT_LT(usb3.comparisons(0).p_value(), 1e-4);
  const DifferenceEstimate& estimate = *r->segments[2].comparisons[0].estimate;
  EXPECT_DOUBLE_EQ(usb3.comparisons(0).always_valid_p_value(), estimate.always_valid.p_value);
  EXPECT_DOUBLE_EQ(usb3.comparisons(0).always_valid_ci95_low(), estimate.always_valid.ci.low);
  EXPECT_DOUBLE_EQ(usb3.comparisons(0).always_valid_ci95_high(), estimate.always_valid.ci.high);
  EXPECT_LT(usb3.comparisons(0).always_valid_ci95_low(), usb3.comparisons(0).ci95_low());
  EXPECT_EQ(usb3.comparisons(0).treatment_units(), 6u);
  EXPECT_EQ(usb3.comparisons(0).control_units(), 6u);
  EXPECT_TRUE(usb3.comparisons(0).conclusive());
  EXPECT_EQ(p.text(), RenderReportText(*r));
  EXPECT_NE(p.text().find("rx_throughput_bps"), std::string::npos);
  std::vector<std::string> codes;
  for (const v1::ReportNote& note : p.notes()) codes.push_back(note.code());
  EXPECT_THAT(codes, ::testing::IsSupersetOf({"not_enough_data", "excluded_windows"}));
  bool pi5_note = false;
  for (const v1::ReportNote& note : p.notes()) {
    if (note.code() == "not_enough_data" && note.segment().count("board") &&
        note.segment().at("board") == "pi5") {
      pi5_note = true;
    }
  }
  EXPECT_TRUE(pi5_note);
}

TEST(PromotionTest, SegmentNarrowsTheSelector) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  absl::StatusOr<common::Policy> policy =
      BuildPromotionPolicy(e, {"short", {"super", "x86"}, "", std::nullopt});
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->name, "hold-fleet-short");
  EXPECT_EQ(policy->settings.hold_us, 32u);
  EXPECT_THAT(policy->selector.usb_speeds, ElementsAre(common::UsbSpeed::kSuper));
  EXPECT_THAT(policy->selector.chips, ElementsAre("rtl8922au"));
  EXPECT_EQ(policy->selector.match_labels.at("board"), "x86");
  EXPECT_EQ(policy->labels.at("rxfleet.io/experiment"), "hold-fleet");
  EXPECT_EQ(policy->labels.at("rxfleet.io/arm"), "short");
  EXPECT_EQ(policy->priority, 0);

  // Only usb_speed named of (usb_speed, board): the board stays as the experiment selects it.
  policy = BuildPromotionPolicy(e, {"short", {"super", std::nullopt}, "", std::nullopt});
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_THAT(policy->selector.usb_speeds, ElementsAre(common::UsbSpeed::kSuper));
  EXPECT_EQ(policy->selector.match_labels, e.selector.match_labels);

  policy = BuildPromotionPolicy(e, {"control", {}, "keep-long", 50});
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->name, "keep-long");
  EXPECT_EQ(policy->priority, 50);
  EXPECT_EQ(policy->selector, e.selector);

  EXPECT_THAT(BuildPromotionPolicy(e, {"long", {}, "", std::nullopt}).status().message(),
              HasSubstr("has no arm 'long'"));
  EXPECT_THAT(BuildPromotionPolicy(e, {"short", {"high", ""}, "", std::nullopt}).status().message(),
              HasSubstr("segment board=(none) cannot be promoted"));
  Experiment by_host = e;
  by_host.segment_keys = {"host"};
  EXPECT_THAT(
      BuildPromotionPolicy(by_host, {"short", {"pi-1"}, "", std::nullopt}).status().message(),
      HasSubstr("not by host"));
  Experiment usb3_only = e;
  usb3_only.selector.usb_speeds = {common::UsbSpeed::kSuper};
  EXPECT_THAT(BuildPromotionPolicy(usb3_only, {"short", {"high", "pi1"}, "", std::nullopt})
                  .status()
                  .message(),
              HasSubstr("lies outside the selector"));
}

}  // namespace
}  // namespace rxfleet::experiments
