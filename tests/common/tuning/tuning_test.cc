// HoldTuning <-> v1::HoldTuning (common/proto/tuning.h): what the CLI sends and the server
// reads back, and the strict reading of the API message.
#include "common/proto/tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/proto/experiment.h"

namespace rxfleet::tuning {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kFull[] = R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: hold-usb3, labels: {team: edge}, resourceVersion: "7"}
spec:
  selector: {chips: [rtl8922au], matchLabels: {rack: r1}}
  segments: [usb_speed, board]
  candidates: [32us, 64us, 128us, 256us, 512us, 1024us]
  objective: {metric: rtt_p99_seconds, direction: minimize}
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05, minAdapters: 4, minWindows: 20}
    - {metric: rx_throughput_bps, op: ">=", threshold: 100000000}
  budget: {adapterShare: 0.3, maxWindows: 40000}
  minEffect: 0.05
  windowLength: 30s
  periodLength: 10m
  burnIn: 1m
  autoApply: true
  recheckShare: 0.1
  minAdaptersPerArm: 4
  minWindowsPerArm: 12
)";

HoldTuning MustParse() {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(kFull, "t.yaml");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : HoldTuning{};
}

std::string FromProtoError(const v1::HoldTuning& proto) {
  absl::StatusOr<HoldTuning> t = HoldTuningFromProto(proto, "request");
  EXPECT_FALSE(t.ok()) << "converted unexpectedly:\n" << proto.DebugString();
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(t.status().message());
}

TEST(HoldTuningProtoTest, SpecFieldsAreExplicit) {
  const v1::HoldTuning p = HoldTuningToProto(MustParse());
  EXPECT_EQ(p.metadata().name(), "hold-usb3");
  EXPECT_EQ(p.metadata().labels().at("team"), "edge");
  EXPECT_EQ(p.metadata().resource_version(), "7");
  EXPECT_FALSE(p.has_status());
  const v1::HoldTuningSpec& s = p.spec();
  EXPECT_THAT(s.selector().chips(), ElementsAre("rtl8922au"));
  EXPECT_EQ(s.selector().match_labels().at("rack"), "r1");
  EXPECT_THAT(s.segment_label_keys(), ElementsAre("usb_speed", "board"));
  EXPECT_THAT(s.candidate_hold_us(), ElementsAre(32u, 64u, 128u, 256u, 512u, 1024u));
  EXPECT_EQ(s.objective_metric(), "rtt_p99_seconds");
  EXPECT_EQ(s.objective_direction(), v1::TUNING_DIRECTION_MINIMIZE);
  ASSERT_EQ(s.guardrails_size(), 2);
  EXPECT_EQ(s.guardrails(0).metric(), "rx_drop_ratio");
  EXPECT_EQ(s.guardrails(0).comparator(), v1::COMPARATOR_GREATER_THAN);
  EXPECT_EQ(s.guardrails(0).min_adapters(), 4u);
  EXPECT_EQ(s.guardrails(0).min_windows(), 20u);
  EXPECT_EQ(s.guardrails(1).comparator(), v1::COMPARATOR_LESS_THAN);
  EXPECT_DOUBLE_EQ(s.guardrails(1).threshold(), 1e8);
  EXPECT_DOUBLE_EQ(s.adapter_share(), 0.3);
  EXPECT_EQ(s.max_windows(), 40000u);
  EXPECT_DOUBLE_EQ(s.min_effect(), 0.05);
  EXPECT_EQ(s.window_length().seconds(), 30);
  EXPECT_EQ(s.period_length().seconds(), 600);
  EXPECT_EQ(s.burn_in().seconds(), 60);
  EXPECT_TRUE(s.auto_apply());
  EXPECT_DOUBLE_EQ(s.recheck_share(), 0.1);
  EXPECT_EQ(s.min_adapters_per_arm(), 4u);
  EXPECT_EQ(s.min_windows_per_arm(), 12u);
}

TEST(HoldTuningProtoTest, RoundTrip) {
  const HoldTuning t = MustParse();
  v1::HoldTuning p = HoldTuningToProto(t);
  p.mutable_status()->set_phase(v1::HOLD_TUNING_PHASE_RUNNING);  // ignored
  absl::StatusOr<HoldTuning> back = HoldTuningFromProto(p, "request");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source, "request");
  back->source = t.source;
  EXPECT_EQ(*back, t);  // every field survives
}

TEST(HoldTuningProtoTest, DefaultsOfTheDocumentAreSentExplicitly) {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: minimal}
spec:
  candidates: [64us, 256us]
  objective: {metric: rx_throughput_bps, direction: maximize}
  budget: {maxWindows: 2000}
  periodLength: 30m
)",
                                                 "m.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  const v1::HoldTuning p = HoldTuningToProto(*t);
  EXPECT_DOUBLE_EQ(p.spec().adapter_share(), kDefaultAdapterShare);
  EXPECT_DOUBLE_EQ(p.spec().min_effect(), kDefaultMinEffect);
  EXPECT_DOUBLE_EQ(p.spec().recheck_share(), kDefaultRecheckShare);
  EXPECT_EQ(p.spec().window_length().seconds(), 60);
  EXPECT_EQ(p.spec().min_adapters_per_arm(), experiments::kDefaultMinAdaptersPerArm);
  EXPECT_EQ(p.spec().min_windows_per_arm(), experiments::kDefaultMinWindowsPerArm);
  absl::StatusOr<HoldTuning> back = HoldTuningFromProto(p, "request");
  ASSERT_TRUE(back.ok()) << back.status();
  back->source = t->source;
  EXPECT_EQ(*back, *t);
}

TEST(HoldTuningProtoTest, FromProtoErrorsNameTheField) {
  const v1::HoldTuning good = HoldTuningToProto(MustParse());
  v1::HoldTuning bad = good;
  bad.mutable_spec()->set_objective_metric("rx_bytes_per_second");
  EXPECT_THAT(FromProtoError(bad),
              HasSubstr("hold tuning 'hold-usb3': spec.objective_metric: unknown metric "
                        "'rx_bytes_per_second'"));
  bad = good;
  bad.mutable_spec()->set_objective_direction(v1::TUNING_DIRECTION_UNSPECIFIED);
  EXPECT_THAT(FromProtoError(bad),
              HasSubstr("hold tuning 'hold-usb3': spec.objective_direction: must be "
                        "TUNING_DIRECTION_MAXIMIZE or TUNING_DIRECTION_MINIMIZE"));
  bad = good;
  bad.mutable_spec()->set_objective_direction(v1::TUNING_DIRECTION_MAXIMIZE);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.objective.direction: rtt_p99_seconds is "
                                             "better when lower"));
  bad = good;
  bad.mutable_spec()->mutable_guardrails(1)->set_metric("nope");
  EXPECT_THAT(FromProtoError(bad),
              HasSubstr("hold tuning 'hold-usb3': spec.guardrails[1].metric: unknown metric"));
  bad = good;
  bad.mutable_spec()->mutable_guardrails(0)->set_comparator(v1::COMPARATOR_UNSPECIFIED);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.guardrails[0].comparator: must be"));
  bad = good;
  bad.mutable_spec()->mutable_guardrails(0)->set_relative_to_control(true);
  EXPECT_THAT(FromProtoError(bad),
              HasSubstr("spec.guardrails[0].relative_to_control: relative guardrails are not"));
  bad = good;
  bad.mutable_spec()->mutable_selector()->add_usb_speeds(v1::USB_SPEED_UNSPECIFIED);
  EXPECT_THAT(FromProtoError(bad),
              HasSubstr("hold tuning 'hold-usb3': spec.selector.usb_speeds[0]: "
                        "USB_SPEED_UNSPECIFIED"));
  bad = good;
  bad.mutable_spec()->add_candidate_hold_us(33);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("hold tuning 'hold-usb3': spec.candidates[6]"));
  bad = good;
  bad.mutable_spec()->add_candidate_hold_us(64);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.candidates[6]: duplicate hold"));
  bad = good;
  bad.mutable_spec()->clear_candidate_hold_us();
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.candidates: needs 2..16 holds, found 0"));
  bad = good;
  bad.mutable_metadata()->set_name("Not_A_Name");
  EXPECT_THAT(FromProtoError(bad), HasSubstr("metadata.name"));
  bad = good;
  bad.mutable_spec()->set_max_windows(10);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.budget.maxWindows: maxWindows 10 must lie"));
}

// proto3 cannot tell an unset number from 0: nothing is defaulted, so zeros are refused.
TEST(HoldTuningProtoTest, UnsetFieldsAreNotDefaulted) {
  const v1::HoldTuning good = HoldTuningToProto(MustParse());
  v1::HoldTuning bad = good;
  bad.mutable_spec()->set_adapter_share(0);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.budget.adapterShare: adapterShare 0 must"));
  bad = good;
  bad.mutable_spec()->set_min_effect(0);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.minEffect: minEffect 0 must"));
  bad = good;
  bad.mutable_spec()->clear_window_length();
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.windowLength"));
  bad = good;
  bad.mutable_spec()->clear_period_length();
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.periodLength"));
  bad = good;
  bad.mutable_spec()->set_min_adapters_per_arm(0);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("minAdaptersPerArm"));
  bad = good;
  bad.mutable_spec()->set_min_windows_per_arm(0);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("minWindowsPerArm"));
  bad = good;
  bad.mutable_spec()->clear_objective_metric();
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.objective_metric: unknown metric ''"));
  // Zero recheckShare and burnIn are meaningful values, not defaults.
  v1::HoldTuning zeros = good;
  zeros.mutable_spec()->set_recheck_share(0);
  zeros.mutable_spec()->clear_burn_in();
  absl::StatusOr<HoldTuning> t = HoldTuningFromProto(zeros, "request");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->recheck_share, 0);
  EXPECT_EQ(t->burn_in, absl::ZeroDuration());
}

TEST(HoldTuningProtoTest, InvalidDurationsAreRefused) {
  const v1::HoldTuning good = HoldTuningToProto(MustParse());
  v1::HoldTuning bad = good;
  bad.mutable_spec()->mutable_period_length()->set_nanos(-1);
  EXPECT_THAT(FromProtoError(bad),
              HasSubstr("hold tuning 'hold-usb3': spec.period_length: seconds 600 and nanos -1 "
                        "have different signs"));
  bad = good;
  bad.mutable_spec()->mutable_window_length()->set_nanos(1000000000);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.window_length: nanos 1000000000 is outside"));
  bad = good;
  bad.mutable_spec()->mutable_burn_in()->set_seconds(-60);
  EXPECT_THAT(FromProtoError(bad), HasSubstr("spec.burnIn"));
}

TEST(GuardrailProtoTest, RoundTrip) {
  experiments::Guardrail g;
  g.metric = experiments::Metric::kRttP99Seconds;
  g.op = experiments::GuardrailOp::kAtMost;
  g.threshold = 0.02;
  g.min_windows = 5;
  const v1::Guardrail p = experiments::GuardrailToProto(g);
  EXPECT_EQ(p.min_adapters(), 0u);
  absl::StatusOr<experiments::Guardrail> back =
      experiments::GuardrailFromProto(p, "spec.guardrails[3]");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, g);
}

}  // namespace
}  // namespace rxfleet::tuning
