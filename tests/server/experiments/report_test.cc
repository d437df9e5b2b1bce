// Reports on synthetic fleets. The text rendering is compared with a golden file:
// tests/server/experiments/golden/report_switchback.txt. After an intended change of the
// layout, regenerate it with
//   RXFLEET_UPDATE_GOLDEN=1 ctest --test-dir build/<preset> -R server_experiments_test
// and review the diff.

#include "server/experiments/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/server/experiments/scenarios.h"

namespace rxfleet::experiments {
namespace {

using ::testing::Contains;
using ::testing::Field;
using ::testing::HasSubstr;
using testing::kStart;
using testing::MixedFleet;
using testing::MustAssigner;
using testing::MustParseExperiment;
using ::testing::Not;
using testing::SimAdapter;
using testing::SimOptions;
using testing::Simulate;

const SegmentResult& FindSegment(const Report& r, const std::vector<std::string>& values) {
  for (const SegmentResult& s : r.segments) {
    if (s.values == values) return s;
  }
  ADD_FAILURE() << "no segment " << values.size();
  static const SegmentResult kNone;
  return kNone;
}

const Comparison* FindComparison(const SegmentResult& s, Metric metric) {
  for (const Comparison& c : s.comparisons) {
    if (c.metric == metric) return &c;
  }
  return nullptr;
}

Report MustReport(const Experiment& e, const std::vector<Window>& windows,
                  const ReportOptions& options) {
  absl::StatusOr<Report> r = ComputeReport(e, windows, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Report{};
}

bool HasNote(const Report& r, std::string_view code, const std::string& text) {
  for (const ReportNote& note : r.notes) {
    if (note.code == code && note.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(SwitchbackReportTest, Usb3GainsThroughputPi1LosesAndPi5IsTooSmall) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  const std::vector<Window> windows = Simulate(assigner, MixedFleet());
  ASSERT_EQ(windows.size(), 11u * 480u);  // 11 adapters, 8 h of 60 s windows
  const Report r = MustReport(e, windows, {kStart, kStart + absl::Hours(8), {}});

  EXPECT_EQ(r.design, Design::kSwitchback);
  EXPECT_FALSE(r.interim);
  // 5 burn-in windows per 30 min period, 16 periods, 11 adapters; the agent marked them.
  EXPECT_EQ(r.windows_total, 5280u);
  EXPECT_EQ(r.excluded.at("invalid:burn_in"), 11u * 16u * 5u);
  EXPECT_EQ(r.windows_used, 5280u - 880u);
  ASSERT_EQ(r.segments.size(), 3u);
  EXPECT_EQ(r.segments[0].values, (std::vector<std::string>{"high", "pi1"}));
  EXPECT_EQ(r.segments[1].values, (std::vector<std::string>{"high", "pi5"}));
  EXPECT_EQ(r.segments[2].values, (std::vector<std::string>{"super", "x86"}));

  // USB 3 on x86: every adapter ran both arms 8 periods each (balanced blocks of 2).
  const SegmentResult& usb3 = FindSegment(r, {"super", "x86"});
  ASSERT_EQ(usb3.arms.size(), 2u);
  EXPECT_EQ(usb3.arms[0].arm, "control");
  EXPECT_EQ(usb3.arms[0].settings, "hold 1024µs");
  EXPECT_EQ(usb3.arms[0].adapters, 6u);
  EXPECT_EQ(usb3.arms[1].adapters, 6u);
  EXPECT_EQ(usb3.arms[0].windows, 6u * 8u * 25u);
  EXPECT_EQ(usb3.arms[1].windows, 6u * 8u * 25u);
  EXPECT_EQ(usb3.arms[0].excluded_windows, 6u * 8u * 5u);
  const MeanEstimate& control_rx = usb3.arms[0].metrics[0].estimate;
  EXPECT_EQ(control_rx.n, 6u);
  EXPECT_NEAR(control_rx.mean, 613e6 * 1.0, 613e6 * 0.02);  // levels 0.8..1.2 average 1.0
  ASSERT_TRUE(control_rx.ci.has_value());
  EXPECT_TRUE(control_rx.ci->Contains(613e6));

  const Comparison* rx = FindComparison(usb3, Metric::kRxThroughputBps);
  ASSERT_NE(rx, nullptr);
  EXPECT_EQ(rx->method, TestMethod::kPaired);
  EXPECT_EQ(rx->treatment_units, 6u);
  ASSERT_TRUE(rx->estimate.has_value()) << rx->not_enough_data;
  EXPECT_TRUE(rx->conclusive);
  EXPECT_GT(rx->estimate->ci.low, 0) << "the gain's interval must exclude zero";
  EXPECT_NEAR(rx->estimate->diff, 389e6, 389e6 * 0.03);
  ASSERT_TRUE(rx->estimate->relative.has_value());
  EXPECT_NEAR(rx->estimate->relative->value, 1002.0 / 613.0 - 1, 0.02);  // ~ +63 %
  EXPECT_GT(rx->estimate->relative->ci.low, 0.5);
  EXPECT_LT(rx->estimate->p_value, 1e-4);
  EXPECT_LT(rx->estimate->always_valid.p_value, 0.05);
  const Comparison* rtt = FindComparison(usb3, Metric::kRttP99Seconds);
  ASSERT_TRUE(rtt != nullptr && rtt->estimate.has_value());
  EXPECT_LT(rtt->estimate->ci.high, 0) << "the short hold cuts the round trip";
  const Comparison* cpu = FindComparison(usb3, Metric::kBusiestCoreRatio);
  ASSERT_TRUE(cpu != nullptr && cpu->estimate.has_value());
  EXPECT_GT(cpu->estimate->ci.low, 0) << "and costs CPU";

  // Pi 1 on USB 2 loses throughput and drops most frames.
  const SegmentResult& pi1 = FindSegment(r, {"high", "pi1"});
  const Comparison* pi1_rx = FindComparison(pi1, Metric::kRxThroughputBps);
  ASSERT_TRUE(pi1_rx != nullptr && pi1_rx->estimate.has_value());
  EXPECT_LT(pi1_rx->estimate->ci.high, 0);
  EXPECT_TRUE(pi1_rx->conclusive);
  const Comparison* pi1_drop = FindComparison(pi1, Metric::kRxDropRatio);
  ASSERT_TRUE(pi1_drop != nullptr && pi1_drop->estimate.has_value());
  EXPECT_NEAR(pi1_drop->estimate->diff, 0.857 - 0.038, 0.03);

  // One Pi 5: one pair, no interval, and the report says so.
  const SegmentResult& pi5 = FindSegment(r, {"high", "pi5"});
  EXPECT_EQ(pi5.arms[0].adapters, 1u);
  EXPECT_FALSE(pi5.arms[0].metrics[0].estimate.ci.has_value());
  const Comparison* pi5_rx = FindComparison(pi5, Metric::kRxThroughputBps);
  ASSERT_NE(pi5_rx, nullptr);
  EXPECT_FALSE(pi5_rx->estimate.has_value());
  EXPECT_FALSE(pi5_rx->conclusive);
  EXPECT_THAT(pi5_rx->not_enough_data, HasSubstr("needs at least 2 units measured under both"));
  EXPECT_TRUE(HasNote(r, kNoteNotEnoughData,
                      "Not enough data in usb_speed=high, board=pi5 for short vs control. "
                      "rx_throughput_bps, rtt_p99_seconds, busiest_core_ratio, rx_drop_ratio: "
                      "no interval or p-value"));
  EXPECT_FALSE(HasNote(r, kNotePeeking, ""));
  EXPECT_TRUE(HasNote(r, kNoteExcludedWindows,
                      "880 of 5280 windows were not used: "
                      "invalid:burn_in 880."));
}

TEST(SwitchbackReportTest, ReportDiscardsBurnInItself) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  SimOptions options;
  options.agent_marks_burn_in = false;  // an agent that does not know the burn-in
  const std::vector<Window> windows = Simulate(assigner, MixedFleet(), options);
  const Report r = MustReport(e, windows, {kStart, kStart + absl::Hours(8), {}});
  EXPECT_EQ(r.excluded.at("burn_in"), 880u);
  EXPECT_FALSE(r.excluded.contains("invalid:burn_in"));
  EXPECT_EQ(r.windows_used, 4400u);
}

TEST(SwitchbackReportTest, InterimReportWarnsAboutPeeking) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  SimOptions sim;
  sim.until = kStart + absl::Hours(2);
  const std::vector<Window> windows = Simulate(assigner, MixedFleet(), sim);
  const Report r = MustReport(e, windows, {kStart, kStart + absl::Hours(2), {}});
  EXPECT_TRUE(r.interim);
  EXPECT_TRUE(HasNote(r, kNotePeeking, "planned to run until 2026-01-01 08:00:00 UTC"));
  EXPECT_TRUE(HasNote(r, kNotePeeking, "decide only on the always-valid"));
  EXPECT_EQ(r.last_window_start, kStart + absl::Hours(2) - absl::Minutes(1));
  EXPECT_EQ(r.first_window_start, kStart + absl::Minutes(5));
}

TEST(SwitchbackReportTest, ExclusionRules) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  Window w;
  w.adapter = "h/1";
  w.segment = {"super", "x86"};
  w.arm = "control";
  w.duration = absl::Minutes(1);
  w.rx_bytes = 1000;
  std::vector<Window> windows;
  auto add = [&](absl::Duration offset, uint32_t period, std::string arm, bool valid) {
    Window x = w;
    x.start = kStart + offset;
    x.period_index = period;
    x.arm = std::move(arm);
    x.valid = valid;
    windows.push_back(x);
  };
  add(absl::Minutes(10), 0, "control", true);                      // used
  add(absl::Minutes(10), 0, "control", false);                     // invalid:unspecified
  add(absl::Minutes(10), 0, "long", true);                         // unknown_arm
  add(-absl::Minutes(2), 0, "control", true);                      // outside_experiment
  add(absl::Hours(8), 15, "control", true);                        // outside_experiment
  add(absl::Minutes(10), 1, "control", true);                      // period_mismatch (in period 0)
  add(absl::Minutes(29) + absl::Seconds(30), 0, "control", true);  // straddles the switch
  add(absl::Minutes(10), 99, "control", true);  // period_mismatch (no such period)
  add(absl::Minutes(34), 1, "short", true);     // burn_in of period 1
  add(absl::Minutes(35), 1, "short", true);     // used
  add(absl::Minutes(30) - absl::Milliseconds(400) + absl::Minutes(5), 1, "short", true);  // burn_in
  const Report r = MustReport(e, windows, {kStart, kStart + absl::Hours(1), {}});
  EXPECT_EQ(r.windows_used, 2u);
  EXPECT_EQ(r.excluded.at("invalid:unspecified"), 1u);
  EXPECT_EQ(r.excluded.at("unknown_arm"), 1u);
  EXPECT_EQ(r.excluded.at("outside_experiment"), 2u);
  EXPECT_EQ(r.excluded.at("period_mismatch"), 3u);
  EXPECT_EQ(r.excluded.at("burn_in"), 2u);
  ASSERT_EQ(r.segments.size(), 1u);
  EXPECT_EQ(r.segments[0].arms[0].windows, 1u);
  EXPECT_EQ(r.segments[0].arms[0].excluded_windows, 6u);  // unknown_arm is not an arm's

  // A window with the wrong number of segment values is a caller error.
  windows[0].segment = {"super"};
  EXPECT_THAT(ComputeReport(e, windows, {kStart, kStart, {}}).status().message(),
              HasSubstr("window 0 of adapter 'h/1' has 1 segment values"));
}

TEST(ParallelReportTest, WelchOnAdapterMeans) {
  const Experiment e = MustParseExperiment(R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: hold-parallel}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: parallel
  duration: 2h
  burnIn: 10m
  primaryMetric: rx_throughput_bps
  secondaryMetrics: [busiest_core_ratio]
  segments: [usb_speed]
)");
  const Assigner assigner = MustAssigner(e);
  std::vector<SimAdapter> fleet;
  for (int i = 0; i < 60; ++i) {
    // Hosts differ by +-30 %: far more than the window noise.
    fleet.push_back({AdapterKey(absl::StrCat("x86-", i), "port-1"),
                     {"super"},
                     testing::X86Usb3(),
                     0.7 + 0.01 * i});
  }
  const Report r = MustReport(e, Simulate(assigner, fleet), {kStart, kStart + absl::Hours(2), {}});
  ASSERT_EQ(r.segments.size(), 1u);
  const SegmentResult& s = r.segments[0];
  EXPECT_EQ(s.arms[0].adapters + s.arms[1].adapters, 60u);
  EXPECT_GE(s.arms[0].adapters, 3u);
  const Comparison* rx = FindComparison(s, Metric::kRxThroughputBps);
  ASSERT_TRUE(rx != nullptr && rx->estimate.has_value()) << rx->not_enough_data;
  EXPECT_EQ(rx->method, TestMethod::kWelch);
  EXPECT_EQ(rx->treatment_units, s.arms[1].adapters);
  EXPECT_EQ(rx->control_units, s.arms[0].adapters);
  EXPECT_TRUE(rx->conclusive);
  EXPECT_GT(rx->estimate->ci.low, 0);
  EXPECT_LT(rx->estimate->p_value, 1e-4);
  // Burn-in: the first 10 windows of every adapter.
  EXPECT_EQ(r.excluded.at("invalid:burn_in"), 600u);
  EXPECT_FALSE(HasNote(r, kNoteUnbalancedArms, ""));

  // The same data under a stricter window minimum: shown, but not conclusive.
  Experiment strict = e;
  strict.min_windows_per_arm = 100000;
  const Report s2 =
      MustReport(strict, Simulate(assigner, fleet), {kStart, kStart + absl::Hours(2), {}});
  const Comparison* rx2 = FindComparison(s2.segments[0], Metric::kRxThroughputBps);
  ASSERT_TRUE(rx2 != nullptr && rx2->estimate.has_value());
  EXPECT_FALSE(rx2->conclusive);
  EXPECT_THAT(rx2->not_enough_data, HasSubstr("< minWindowsPerArm 100000"));
  EXPECT_THAT(RenderReportText(s2), HasSubstr(" !"));
}

TEST(ParallelReportTest, NotEnoughDataAndUnbalancedArms) {
  const Experiment e = MustParseExperiment(R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: hold-small}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: parallel
  duration: 1h
  primaryMetric: rx_throughput_bps
)");
  const Assigner assigner = MustAssigner(e);
  // Pick two adapters per arm.
  std::vector<SimAdapter> fleet;
  int per_arm[2] = {0, 0};
  for (int i = 0; per_arm[0] < 2 || per_arm[1] < 2; ++i) {
    const std::string key = AdapterKey(absl::StrCat("h", i), "p");
    const size_t arm = assigner.ScheduledArm(key, 0);
    if (per_arm[arm] == 2) continue;
    ++per_arm[arm];
    fleet.push_back({key, {}, testing::X86Usb3(), 1.0 + 0.1 * i});
  }
  Report r = MustReport(e, Simulate(assigner, fleet), {kStart, kStart + absl::Hours(1), {}});
  ASSERT_EQ(r.segments.size(), 1u);
  const Comparison* rx = FindComparison(r.segments[0], Metric::kRxThroughputBps);
  ASSERT_TRUE(rx != nullptr && rx->estimate.has_value());
  EXPECT_FALSE(rx->conclusive);
  EXPECT_EQ(rx->not_enough_data, "adapters per arm 2 < minAdaptersPerArm 3");
  EXPECT_TRUE(HasNote(r, kNoteNotEnoughData,
                      "Not enough data in all adapters for short vs control. rx_throughput_bps: "
                      "not conclusive: adapters per arm 2 < minAdaptersPerArm 3."));

  // 200 adapters, but most short-arm adapters never report (e.g. they fail to apply the arm).
  fleet.clear();
  for (int i = 0; i < 200; ++i) {
    const std::string key = AdapterKey(absl::StrCat("h", i), "p");
    if (assigner.ScheduledArm(key, 0) == 1 && i % 3 != 0) continue;
    fleet.push_back({key, {}, testing::X86Usb3(), 1.0});
  }
  SimOptions sim;
  sim.until = kStart + absl::Minutes(10);
  r = MustReport(e, Simulate(assigner, fleet, sim), {kStart, kStart + absl::Minutes(10), {}});
  EXPECT_TRUE(HasNote(r, kNoteUnbalancedArms, "adapters per arm (control "));
  EXPECT_LT(r.sample_ratio_p_value, kSampleRatioAlarm);
  EXPECT_TRUE(HasNote(r, kNotePeeking, ""));
}

TEST(ReportTest, NoWindowsYet) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Report r = MustReport(e, {}, {kStart, kStart, {}});
  EXPECT_TRUE(r.segments.empty());
  EXPECT_TRUE(HasNote(r, kNoteNotEnoughData, "No metric windows have been received yet."));
  EXPECT_THAT(RenderReportText(r), HasSubstr("No segment has valid windows yet."));
}

TEST(ReportTest, FormatPValue) {
  EXPECT_EQ(FormatPValue(0.0213), "0.0213");
  EXPECT_EQ(FormatPValue(0.00001), "<0.0001");
  EXPECT_EQ(FormatPValue(1), "1.0000");
}

// The simulated fleet is deterministic on every platform: compare the rendering with the
// golden file.
TEST(RenderReportTextTest, Golden) {
  const Experiment e = MustParseExperiment(testing::kSwitchbackFleet);
  const Assigner assigner = MustAssigner(e);
  SimOptions sim;
  sim.until = kStart + absl::Hours(4);
  std::vector<StoppedArm> stopped = {{"short",
                                      {"high", "pi1"},
                                      "GuardrailTripped",
                                      "rx_drop_ratio 85.70 % (95 % lower bound 85.70 %) breaks "
                                      "<= 5.000 % over 4 adapters, 500 windows",
                                      kStart + absl::Hours(3)}};
  const Report r = MustReport(e, Simulate(assigner, MixedFleet(), sim),
                              {kStart, kStart + absl::Hours(4), stopped});
  const std::string text = RenderReportText(r);
  const std::string path =
      std::string(std::getenv("RXFLEET_SOURCE_DIR") != nullptr ? std::getenv("RXFLEET_SOURCE_DIR")
                                                               : ".") +
      "/tests/server/experiments/golden/report_switchback.txt";
  if (std::getenv("RXFLEET_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(text, golden.str()) << "golden file " << path << "; see the top of this file";
  EXPECT_THAT(text, HasSubstr("| rx_throughput_bps *"));
  EXPECT_THAT(text, HasSubstr("Segment usb_speed=super, board=x86"));
  EXPECT_THAT(text, HasSubstr("short 4 adapters"));
  EXPECT_THAT(text, HasSubstr("(STOPPED)"));
  EXPECT_THAT(text, HasSubstr("[guardrail_tripped] Arm short stopped in usb_speed=high, "
                              "board=pi1 (GuardrailTripped)"));

  // Worded for a sequential procedure: only the always-valid interval and p per arm.
  const std::string sequential = RenderReportText(r, {.sequential = true});
  EXPECT_THAT(sequential, Not(HasSubstr("Planned:")));
  EXPECT_THAT(sequential, Not(HasSubstr("Experiment ")));
  EXPECT_THAT(sequential, HasSubstr("| rx_throughput_bps *"));
  EXPECT_THAT(sequential, HasSubstr("95 % CI (always valid)"));
  EXPECT_THAT(sequential, HasSubstr("p (always valid)"));
  EXPECT_THAT(sequential, Not(::testing::ContainsRegex("\\| p +\\|")));  // no fixed-horizon p
  EXPECT_THAT(sequential, HasSubstr("(STOPPED)"));
}

}  // namespace
}  // namespace rxfleet::experiments
