#include "common/experiment/experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/text_edit.h"

namespace rxfleet::experiments {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The example of docs/EXPERIMENTS.md. Line numbers matter to the error tests below.
constexpr char kExample[] = R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: hold-usb3}
spec:
  selector: {usbSpeeds: [super, high], chips: [rtl8922au]}
  arms:
    - {name: control, settings: {hold: 1024us}, weight: 1}
    - {name: short, settings: {hold: 32us}, weight: 1}
  control: control
  design: switchback
  duration: 24h
  windowLength: 60s
  periodLength: 30m
  burnIn: 5m
  primaryMetric: rx_throughput_bps
  secondaryMetrics: [rtt_p99_seconds, busiest_core_ratio, rx_drop_ratio]
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
    - {metric: busiest_core_ratio, op: "<=", threshold: 0.9}
    - {metric: rtt_p99_seconds, op: "<=", threshold: 20ms}
  segments: [usb_speed, board]
  minAdaptersPerArm: 3
)";

// kExample with `from` replaced by `to` (which must occur exactly once).
std::string Edit(const std::string& from, const std::string& to) {
  return rxfleet::testing::ReplacedOnce(kExample, from, to);
}

Experiment MustParse(const std::string& text) {
  absl::StatusOr<Experiment> e = ParseExperiment(text, "t.yaml");
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : Experiment{};
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<std::vector<Experiment>> e = ParseExperimentDocuments(text, "t.yaml");
  EXPECT_FALSE(e.ok()) << "parsed unexpectedly:\n" << text;
  if (e.ok()) return "";
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(e.status().message());
}

TEST(ParseExperimentTest, Example) {
  const Experiment e = MustParse(kExample);
  EXPECT_EQ(e.name, "hold-usb3");
  EXPECT_THAT(e.selector.usb_speeds,
              ElementsAre(common::UsbSpeed::kSuper, common::UsbSpeed::kHigh));
  EXPECT_THAT(e.selector.chips, ElementsAre("rtl8922au"));
  ASSERT_EQ(e.arms.size(), 2u);
  EXPECT_EQ(e.arms[0].name, "control");
  EXPECT_EQ(e.arms[0].settings.hold_us, 1024u);
  EXPECT_EQ(e.arms[1].name, "short");
  EXPECT_EQ(e.arms[1].settings.hold_us, 32u);
  EXPECT_EQ(e.arms[1].weight, 1u);
  EXPECT_EQ(e.control_arm, "control");
  EXPECT_EQ(e.ControlIndex(), 0u);
  EXPECT_EQ(e.design, Design::kSwitchback);
  EXPECT_EQ(e.duration, absl::Hours(24));
  EXPECT_EQ(e.window_length, absl::Seconds(60));
  EXPECT_EQ(e.period_length, absl::Minutes(30));
  EXPECT_EQ(e.burn_in, absl::Minutes(5));
  EXPECT_EQ(e.primary_metric, Metric::kRxThroughputBps);
  EXPECT_THAT(e.secondary_metrics,
              ElementsAre(Metric::kRttP99Seconds, Metric::kBusiestCoreRatio, Metric::kRxDropRatio));
  ASSERT_EQ(e.guardrails.size(), 3u);
  EXPECT_EQ(e.guardrails[0].metric, Metric::kRxDropRatio);
  EXPECT_EQ(e.guardrails[0].op, GuardrailOp::kAtMost);
  EXPECT_DOUBLE_EQ(e.guardrails[0].threshold, 0.05);
  EXPECT_DOUBLE_EQ(e.guardrails[2].threshold, 0.020);  // 20ms in seconds
  EXPECT_EQ(e.guardrails[2].min_adapters, std::nullopt);
  EXPECT_EQ(e.MinAdapters(e.guardrails[2]), 3u);
  EXPECT_EQ(e.MinWindows(e.guardrails[2]), kDefaultMinWindowsPerArm);
  EXPECT_THAT(e.segment_keys, ElementsAre("usb_speed", "board"));
  EXPECT_EQ(e.min_adapters_per_arm, 3u);
  EXPECT_EQ(e.TotalWeight(), 2u);
  EXPECT_THAT(e.ReportedMetrics(), ElementsAre(Metric::kRxThroughputBps, Metric::kRttP99Seconds,
                                               Metric::kBusiestCoreRatio, Metric::kRxDropRatio));
  EXPECT_EQ(e.source, "t.yaml:1");
  EXPECT_TRUE(ValidateExperiment(e).ok());
}

TEST(ParseExperimentTest, JsonWithDefaults) {
  const Experiment e = MustParse(R"({
    "apiVersion": "rxfleet/v1", "kind": "Experiment", "metadata": {"name": "p"},
    "spec": {
      "arms": [{"name": "long", "settings": {"holdUs": 1024}},
               {"name": "short", "settings": {"hold": "32us"}, "weight": 3}],
      "design": "parallel", "duration": "168h", "primaryMetric": "rtt_mean_seconds"
    }})");
  EXPECT_EQ(e.control_arm, "long");  // the first arm
  EXPECT_EQ(e.design, Design::kParallel);
  EXPECT_EQ(e.window_length, kDefaultWindowLength);
  EXPECT_EQ(e.period_length, absl::ZeroDuration());
  EXPECT_EQ(e.burn_in, absl::ZeroDuration());
  EXPECT_EQ(e.arms[1].weight, 3u);
  EXPECT_EQ(e.min_adapters_per_arm, kDefaultMinAdaptersPerArm);
  EXPECT_EQ(e.min_windows_per_arm, kDefaultMinWindowsPerArm);
  EXPECT_TRUE(e.segment_keys.empty());
  EXPECT_TRUE(e.selector.Empty());
}

TEST(ParseExperimentTest, YamlRoundTrip) {
  Experiment e = MustParse(Edit("  minAdaptersPerArm: 3\n",
                                "  minAdaptersPerArm: 4\n  minWindowsPerArm: 30\n  priority: 7\n"
                                "  seed: 18446744073709551615\n"));
  e.labels = {{"team", "edge"}};
  e.guardrails[0].min_adapters = 5;
  e.guardrails[0].min_windows = 20;
  e.guardrails[1].op = GuardrailOp::kAtLeast;
  e.guardrails[1].threshold = 1.0 / 3.0;
  e.arms[1].settings.count_threshold = 255;
  e.arms[1].settings.buffer_kib = 20;
  e.arms[1].settings.enable = true;
  ASSERT_TRUE(ValidateExperiment(e).ok());
  const std::string yaml = ExperimentToYaml(e);
  absl::StatusOr<Experiment> again = ParseExperiment(yaml, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  again->source = e.source;
  EXPECT_EQ(*again, e) << yaml;
  EXPECT_EQ(again->seed, 18446744073709551615ULL);
}

TEST(ParseExperimentTest, MultipleDocumentsAndDuplicates) {
  const std::string two = std::string(kExample) + "---\n" + Edit("name: hold-usb3", "name: b");
  absl::StatusOr<std::vector<Experiment>> all = ParseExperimentDocuments(two, "t.yaml");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].source, "t.yaml:24");
  EXPECT_THAT(ParseExperiment(two, "t.yaml").status().message(),
              HasSubstr("expected exactly one Experiment document, found 2"));
  EXPECT_EQ(ParseError(std::string(kExample) + "---\n" + kExample),
            "t.yaml:26:18: metadata.name: duplicate experiment name 'hold-usb3' (first defined "
            "at t.yaml:1)");
  absl::StatusOr<std::vector<Experiment>> none = ParseExperimentDocuments("", "t.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Every error names the file, the line and column of the offending value, and the field.
TEST(ParseExperimentErrorTest, NamedWithLine) {
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {"kind: Experiment", "kind: RxAggPolicy",
       "t.yaml:2:7: kind: unsupported kind 'RxAggPolicy' (expected 'Experiment')"},
      {"apiVersion: rxfleet/v1", "apiVersion: rxfleet/v2",
       "t.yaml:1:13: apiVersion: unsupported apiVersion 'rxfleet/v2'"},
      {"  burnIn: 5m\n", "  burnIn: 5m\n  color: blue\n",
       "t.yaml:15:3: spec: unknown field 'color'"},
      {"short, settings: {hold: 32us}, weight: 1", "short, settings: {hold: 32us}, weight: 0",
       "t.yaml:8:53: spec.arms[1].weight: weight 0 is out of range 1..100"},
      {"short, settings: {hold: 32us}, weight: 1", "short, settings: {hold: 32us}, weight: x",
       "t.yaml:8:53: spec.arms[1].weight: must be an integer, found 'x'"},
      {"{name: short,", "{name: control,",
       "t.yaml:8:14: spec.arms[1].name: duplicate arm name 'control' (also spec.arms[0])"},
      {"{name: short,", "{name: Short,",
       "t.yaml:8:14: spec.arms[1].name: arm name 'Short' may contain only lower-case"},
      {"    - {name: short, settings: {hold: 32us}, weight: 1}\n", "",
       "t.yaml:7:5: spec.arms: needs at least 2 arms (a control and a treatment), found 1"},
      {"control: control", "control: baseline",
       "t.yaml:9:12: spec.control: control arm 'baseline' is not one of the arms (control, "
       "short)"},
      {"hold: 32us", "hold: 33us",
       "t.yaml:8:38: spec.arms[1].settings.hold: hold 33us must be a multiple of 32"},
      {"{hold: 32us}", "{hold: 32us, forceEnable: true, enable: true}",
       "t.yaml:8:31: spec.arms[1].settings: forceEnable is not allowed in experiment arms"},
      {"{hold: 32us}", "{}", "t.yaml:8:31: spec.arms[1].settings: must set at least one of hold"},
      {"design: switchback", "design: crossover",
       "t.yaml:10:11: spec.design: unknown design 'crossover' (expected parallel or switchback)"},
      {"duration: 24h", "duration: forever",
       "t.yaml:11:13: spec.duration: must be a duration such as 90s"},
      {"duration: 24h", "duration: -1h", "t.yaml:11:13: spec.duration: duration -1h must not be"},
      {"duration: 24h", "duration: 7d", "t.yaml:11:13: spec.duration: must be a duration"},
      {"duration: 24h", "duration: 45m",
       "t.yaml:11:13: spec.duration: duration 45m is shorter than one balanced block (2 periods "
       "of 30m"},
      {"windowLength: 60s", "windowLength: 45m",
       "t.yaml:13:17: spec.periodLength: periodLength 30m must be at least windowLength 45m"},
      {"windowLength: 60s", "windowLength: 7s",
       "t.yaml:13:17: spec.periodLength: periodLength 30m must be a multiple of windowLength 7s"},
      {"windowLength: 60s", "windowLength: 1.5s",
       "t.yaml:12:17: spec.windowLength: windowLength 1.5s must be whole seconds in 1s..1h"},
      {"burnIn: 5m", "burnIn: 30m",
       "t.yaml:14:11: spec.burnIn: burnIn 30m leaves no full window of 1m in a period of 30m"},
      {"  periodLength: 30m\n", "",
       "t.yaml:5:3: spec.periodLength: is required for the switchback design"},
      {"design: switchback", "design: parallel",
       "t.yaml:13:17: spec.periodLength: applies to the switchback design only"},
      {"primaryMetric: rx_throughput_bps", "primaryMetric: goodput",
       "t.yaml:15:18: spec.primaryMetric: unknown metric 'goodput' (known metrics: "
       "rx_throughput_bps, tx_throughput_bps"},
      {"[rtt_p99_seconds, busiest_core_ratio,", "[rtt_p99_seconds, rx_throughput_bps,",
       "t.yaml:16:39: spec.secondaryMetrics[1]: 'rx_throughput_bps' is the primary metric"},
      {"op: \"<=\", threshold: 0.05", "op: \"<\", threshold: 0.05",
       "t.yaml:18:35: spec.guardrails[0].op: unsupported op '<' (expected \"<=\" or \">=\""},
      {"threshold: 0.05", "threshold: 150%",
       "t.yaml:18:52: spec.guardrails[0].threshold: value '150%' of rx_drop_ratio is a ratio"},
      {"threshold: 20ms", "threshold: 20Mbit/s",
       "t.yaml:20:54: spec.guardrails[2].threshold: value '20Mbit/s' of rtt_p99_seconds must be "
       "a number of seconds"},
      {"{metric: busiest_core_ratio, op: \"<=\", threshold: 0.9}",
       "{metric: rx_drop_ratio, op: \"<=\", threshold: 0.1}",
       "t.yaml:19:7: spec.guardrails[1]: duplicate guardrail rx_drop_ratio <= (also "
       "spec.guardrails[0])"},
      {"segments: [usb_speed, board]", "segments: [usb_speed, usb_speed]",
       "t.yaml:21:25: spec.segments[1]: duplicate segment key 'usb_speed'"},
      {"segments: [usb_speed, board]", "segments: [usb_speed, \"bad key\"]",
       "t.yaml:21:25: spec.segments[1]: "},
      {"minAdaptersPerArm: 3", "minAdaptersPerArm: 1",
       "t.yaml:22:22: spec.minAdaptersPerArm: minAdaptersPerArm 1 is out of range 2..100000"},
      {"chips: [rtl8922au]", "chips: [rtl9999xu]",
       "t.yaml:5:48: spec.selector.chips[0]: unknown "
       "chip 'rtl9999xu'"},
      {"usbSpeeds: [super, high]", "usbSpeeds: [super, warp]",
       "t.yaml:5:33: spec.selector.usbSpeeds[1]: unknown USB speed 'warp'"},
      {"metadata: {name: hold-usb3}", "metadata: {name: Hold}",
       "t.yaml:3:18: metadata.name: name 'Hold' may contain only lower-case letters"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseError(Edit(c.from, c.to)), StartsWith(c.expected)) << c.from << " -> " << c.to;
  }
}

TEST(ParseExperimentErrorTest, LayoutRuleFollowsTheSelector) {
  // Layout v1 chips (RTL8852BU) count the buffer in 4 KiB units.
  const std::string text = Edit("chips: [rtl8922au]", "chips: [rtl8852bu]");
  const std::string bad = text.substr(0, text.find("{hold: 32us}")) + "{hold: 32us, bufferKiB: 6}" +
                          text.substr(text.find("{hold: 32us}") + 12);
  EXPECT_THAT(ParseError(bad), AllOf(StartsWith("t.yaml:8:31: spec.arms[1].settings: "),
                                     HasSubstr("the selector can match v1 chips")));
}

TEST(ParseExperimentErrorTest, MissingFieldsAndShapes) {
  EXPECT_THAT(ParseError(Edit("  primaryMetric: rx_throughput_bps\n", "")),
              StartsWith("t.yaml:5:3: spec: missing required field 'primaryMetric'"));
  EXPECT_THAT(ParseError(Edit("selector: {usbSpeeds: [super, high], chips: [rtl8922au]}",
                              "selector: [super]")),
              StartsWith("t.yaml:5:13: spec.selector: must be a map, found a list"));
  EXPECT_THAT(ParseError("apiVersion: rxfleet/v1\nkind: Experiment\nmetadata: {name: x}\n"),
              StartsWith("t.yaml:1:1: document: missing required field 'spec'"));
  EXPECT_THAT(ParseError("spec: [unclosed\n"), StartsWith("t.yaml:2:1: malformed YAML"));
  EXPECT_THAT(ParseError(Edit("  control: control\n", "  control: control\n  control: short\n")),
              StartsWith("t.yaml:10:3: spec: duplicate field 'control'"));
}

TEST(ValidateExperimentTest, NamesTheExperimentAndField) {
  Experiment e = MustParse(kExample);
  e.arms[0].weight = 0;
  EXPECT_EQ(ValidateExperiment(e).message(),
            "experiment 'hold-usb3': spec.arms[0].weight: weight 0 is out of range 1..100");
  e = MustParse(kExample);
  e.control_arm = "nope";
  EXPECT_THAT(ValidateExperiment(e).message(), HasSubstr("spec.control: control arm 'nope'"));
  e = MustParse(kExample);
  e.guardrails[0].threshold = 2;
  EXPECT_THAT(ValidateExperiment(e).message(),
              HasSubstr("spec.guardrails[0].threshold: threshold 2 of rx_drop_ratio must lie in"));
  e = MustParse(kExample);
  e.window_length = absl::Minutes(40);
  EXPECT_THAT(ValidateExperiment(e).message(), HasSubstr("spec.periodLength"));
}

TEST(SegmentTest, ValuesFromAdapterAttributes) {
  const Experiment e =
      MustParse(Edit("segments: [usb_speed, board]", "segments: [usb_speed, chip, host, board]"));
  common::AdapterAttributes adapter;
  adapter.adapter_id = "port-1";
  adapter.host = "pi-7";
  adapter.chip = "rtl8922au";
  adapter.usb_speed = common::UsbSpeed::kHigh;
  adapter.host_labels = {{"board", "pi1"}};
  const std::vector<std::string> values = SegmentValuesFor(e, adapter);
  EXPECT_THAT(values, ElementsAre("high", "rtl8922au", "pi-7", "pi1"));
  EXPECT_EQ(FormatSegment(e.segment_keys, values),
            "usb_speed=high, chip=rtl8922au, host=pi-7, board=pi1");
  adapter.host_labels.clear();
  EXPECT_THAT(SegmentValuesFor(e, adapter), ElementsAre("high", "rtl8922au", "pi-7", ""));
  EXPECT_EQ(FormatSegment(e.segment_keys, SegmentValuesFor(e, adapter)),
            "usb_speed=high, chip=rtl8922au, host=pi-7, board=(none)");
  EXPECT_EQ(SegmentMap(e.segment_keys, values).at("board"), "pi1");
  EXPECT_EQ(FormatSegment({}, {}), "all adapters");
}

}  // namespace
}  // namespace rxfleet::experiments
