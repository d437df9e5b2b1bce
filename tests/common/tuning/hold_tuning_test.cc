#include "common/tuning/hold_tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/text_edit.h"

namespace rxfleet::tuning {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Line numbers matter to the error tests below.
constexpr char kExample[] = R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: hold-usb3, labels: {team: edge}}
spec:
  selector: {chips: [rtl8922au]}
  segments: [usb_speed, board]
  candidates: [32us, 64us, 128us, 256us, 512us, 1024us]
  objective: {metric: rx_throughput_bps, direction: maximize}
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
  budget: {adapterShare: 0.2, maxWindows: 20000}
  minEffect: 0.02
  windowLength: 60s
  periodLength: 30m
  burnIn: 5m
  autoApply: false
  recheckShare: 0.05
)";

std::string Edit(const std::string& from, const std::string& to) {
  return rxfleet::testing::ReplacedOnce(kExample, from, to);
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<std::vector<HoldTuning>> t = ParseHoldTuningDocuments(text, "t.yaml");
  EXPECT_FALSE(t.ok()) << "parsed unexpectedly:\n" << text;
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(t.status().message());
}

TEST(ParseHoldTuningTest, Example) {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(kExample, "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "hold-usb3");
  EXPECT_EQ(t->labels.at("team"), "edge");
  EXPECT_THAT(t->selector.chips, ElementsAre("rtl8922au"));
  EXPECT_THAT(t->segment_keys, ElementsAre("usb_speed", "board"));
  EXPECT_THAT(t->candidates_us, ElementsAre(32u, 64u, 128u, 256u, 512u, 1024u));
  EXPECT_EQ(t->objective.metric, experiments::Metric::kRxThroughputBps);
  EXPECT_EQ(t->objective.direction, Direction::kMaximize);
  ASSERT_EQ(t->guardrails.size(), 1u);
  EXPECT_EQ(t->guardrails[0].op, experiments::GuardrailOp::kAtMost);
  EXPECT_DOUBLE_EQ(t->budget.adapter_share, 0.2);
  EXPECT_EQ(t->budget.max_windows, 20000u);
  EXPECT_DOUBLE_EQ(t->min_effect, 0.02);
  EXPECT_EQ(t->period_length, absl::Minutes(30));
  EXPECT_EQ(t->burn_in, absl::Minutes(5));
  EXPECT_EQ(t->WindowsPerPeriod(), 30u);
  EXPECT_FALSE(t->auto_apply);
  EXPECT_EQ(t->source, "t.yaml:1");
  // 6 candidates: 3 halving rounds + confirmation = 4 rounds; 4 * 6 * 3 * 30.
  EXPECT_EQ(ExplorationRounds(6), 4u);
  EXPECT_EQ(MinExplorationWindows(*t), 2160u);
  EXPECT_TRUE(ValidateHoldTuning(*t).ok());
}

TEST(HoldTuningToYamlTest, RoundTrips) {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(kExample, "t.yaml");
  ASSERT_TRUE(t.ok());
  t->guardrails[0].min_adapters = 4;
  t->resource_version = "7";
  const std::string yaml = HoldTuningToYaml(*t);
  absl::StatusOr<HoldTuning> back = ParseHoldTuning(yaml, "back.yaml");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
  back->source = t->source;
  EXPECT_EQ(*back, *t) << yaml;
}

TEST(ParseHoldTuningTest, Defaults) {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(R"({
    "apiVersion": "rxfleet/v1", "kind": "HoldTuning", "metadata": {"name": "d"},
    "spec": {"candidates": [1024, "128us"], "periodLength": "10m",
             "objective": {"metric": "rtt_p99_seconds", "direction": "minimize"},
             "budget": {"maxWindows": 5000}}})",
                                                 "d.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->candidates_us, ElementsAre(1024u, 128u));
  EXPECT_DOUBLE_EQ(t->budget.adapter_share, kDefaultAdapterShare);
  EXPECT_DOUBLE_EQ(t->recheck_share, kDefaultRecheckShare);
  EXPECT_DOUBLE_EQ(t->min_effect, kDefaultMinEffect);
  EXPECT_EQ(t->window_length, absl::Seconds(60));
  EXPECT_EQ(t->burn_in, absl::ZeroDuration());
  EXPECT_EQ(t->min_adapters_per_arm, 3u);
  EXPECT_EQ(t->min_windows_per_arm, 10u);
  EXPECT_TRUE(t->segment_keys.empty());
}

TEST(ParseHoldTuningTest, Errors) {
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {"kind: HoldTuning", "kind: Experiment",
       "t.yaml:2:7: kind: unsupported kind 'Experiment' (expected 'HoldTuning')"},
      {"  autoApply: false\n", "  autoApply: false\n  arms: []\n",
       "t.yaml:17:3: spec: unknown field 'arms'"},
      {"  candidates: [32us, 64us, 128us, 256us, 512us, 1024us]\n", "",
       "t.yaml:5:3: spec: missing required field 'candidates'"},
      {"[32us, 64us, 128us,", "[33us, 64us, 128us,",
       "t.yaml:7:16: spec.candidates[0]: hold 33us must be a multiple of 32"},
      {"[32us, 64us, 128us, 256us, 512us, 1024us]", "[32us]",
       "t.yaml:7:15: spec.candidates: needs 2..16 holds, found 1"},
      {"[32us, 64us, 128us,", "[32us, 32us, 128us,",
       "t.yaml:7:22: spec.candidates[1]: duplicate hold 32us (also spec.candidates[0])"},
      {"direction: maximize", "direction: up",
       "t.yaml:8:53: spec.objective.direction: unknown direction 'up'"},
      {"direction: maximize", "direction: minimize",
       "t.yaml:8:53: spec.objective.direction: rx_throughput_bps is better when higher"},
      {"metric: rx_throughput_bps", "metric: probe_rx_throughput_bps",
       "t.yaml:8:23: spec.objective.metric: probe_rx_throughput_bps is measured by an active "
       "probe"},
      {"threshold: 0.05", "threshold: 2",
       "t.yaml:10:52: spec.guardrails[0].threshold: value '2' of rx_drop_ratio is a ratio"},
      {"{metric: rx_drop_ratio, op: \"<=\", threshold: 0.05}",
       "{metric: rx_drop_ratio, op: \"<=\", threshold: 0.05}\n"
       "    - {metric: rx_drop_ratio, op: \"<=\", threshold: 0.1}",
       "t.yaml:11:7: spec.guardrails[1]: duplicate guardrail rx_drop_ratio <="},
      {"adapterShare: 0.2", "adapterShare: 0.6",
       "t.yaml:11:26: spec.budget.adapterShare: adapterShare 0.6 must lie in (0, 0.5]"},
      {"adapterShare: 0.2", "adapterShare: much",
       "t.yaml:11:26: spec.budget.adapterShare: must be a number such as 0.2, found 'much'"},
      {"{adapterShare: 0.2, maxWindows: 20000}", "{adapterShare: 0.2}",
       "t.yaml:11:11: spec.budget: missing required field 'maxWindows'"},
      {"maxWindows: 20000", "maxWindows: 2000",
       "t.yaml:11:43: spec.budget.maxWindows: maxWindows 2000 must lie in 2160..1000000000: 4 "
       "rounds x 6 candidates x 3 adapters (minAdaptersPerArm) x 30 windows per period"},
      {"minEffect: 0.02", "minEffect: 0",
       "t.yaml:12:14: spec.minEffect: minEffect 0 must lie in (0, 1)"},
      {"periodLength: 30m", "periodLength: 90s",
       "t.yaml:14:17: spec.periodLength: periodLength 1m30s must be a multiple of windowLength "
       "1m"},
      {"periodLength: 30m", "periodLength: 48h",
       "t.yaml:14:17: spec.periodLength: periodLength 48h exceeds the limit of 24h"},
      {"burnIn: 5m", "burnIn: 30m",
       "t.yaml:15:11: spec.burnIn: burnIn 30m leaves no full window of 1m in a period of 30m"},
      {"autoApply: false", "autoApply: maybe",
       "t.yaml:16:14: spec.autoApply: must be true or false, found 'maybe'"},
      {"recheckShare: 0.05", "recheckShare: 0.9",
       "t.yaml:17:17: spec.recheckShare: recheckShare 0.9 must lie in [0, 0.5]"},
      {"  objective: {metric: rx_throughput_bps, direction: maximize}\n", "",
       "spec: missing required field 'objective'"},
      {"{metric: rx_throughput_bps, direction: maximize}", "{metric: rx_throughput_bps}",
       "spec.objective: missing required field 'direction'"},
      {"{metric: rx_drop_ratio, op: \"<=\", threshold: 0.05}",
       "{metric: probe_udp_loss_ratio, op: \"<=\", threshold: 0.05}",
       "spec.guardrails[0].metric: probe_udp_loss_ratio is measured by an active probe"},
      {"windowLength: 60s", "windowLength: 1500ms",
       "spec.windowLength: windowLength 1.5s must be whole seconds in 1s..1h"},
      {"  recheckShare: 0.05\n", "  recheckShare: 0.05\n  minAdaptersPerArm: 1\n",
       "spec.minAdaptersPerArm: minAdaptersPerArm 1 is out of range 2..100000"},
      {"selector: {chips: [rtl8922au]}", "selector: {chips: [nosuchchip]}", "spec.selector.chips"},
      {"labels: {team: edge}", "labels: {team: \"bad value!\"}", "metadata.labels.team"},
      {"segments: [usb_speed, board]", "segments: [usb_speed, usb_speed]",
       "t.yaml:6:25: spec.segments[1]: duplicate segment key 'usb_speed'"},
      {"segments: [usb_speed, board]", "segments: [usb_speed, host]",
       "t.yaml:6:25: spec.segments[1]: `host` cannot be a tuning segment"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseError(Edit(c.from, c.to)), HasSubstr(c.message)) << c.from << " -> " << c.to;
  }
}

TEST(ParseHoldTuningTest, AnInvalidSegmentKeyListsOnlyTheKeysATuningAccepts) {
  // `host` is refused as a tuning segment, so the hint after an invalid key must not offer it.
  const std::string error =
      ParseError(Edit("segments: [usb_speed, board]", "segments: [usb_speed, \"bad key!\"]"));
  EXPECT_THAT(error, HasSubstr("t.yaml:6:25: spec.segments[1]: "));
  EXPECT_THAT(error, HasSubstr("(segments are usb_speed, chip or a host label key)"));
  EXPECT_THAT(error, Not(HasSubstr("host or")));
}

TEST(ParseHoldTuningTest, HoldsAreCheckedLikePolicyHolds) {
  // Holds pass the settings rules for every layout the selector can match (CheckSettingsFor
  // Selector, as experiment arms): 8192 µs does not fit the 8-bit field of 32 µs units.
  EXPECT_THAT(ParseError(Edit("1024us]", "8192us]")), HasSubstr("spec.candidates[5]: hold"));
}

TEST(ParseHoldTuningTest, DuplicateNames) {
  const std::string two = std::string(kExample) + "---\n" + kExample;
  EXPECT_THAT(ParseError(two), HasSubstr("duplicate hold tuning name 'hold-usb3'"));
}

TEST(ValidateHoldTuningTest, NamesTheDocument) {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(kExample, "t.yaml");
  ASSERT_TRUE(t.ok());
  t->budget.max_windows = 10;
  EXPECT_THAT(ValidateHoldTuning(*t).message(),
              HasSubstr("hold tuning 'hold-usb3': spec.budget.maxWindows: maxWindows 10"));
}

}  // namespace
}  // namespace rxfleet::tuning
