// Experiment windows: cutting aligned to the period start, tagging, and every validity reason,
// driven tick by tick with an injected clock and hand-made samples.
#include "agent/experiments/experiment_windows.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "agent/experiments/metric_window_proto.h"
#include "common/proto/time.h"

namespace rxfleet::agent {
namespace {

constexpr char kAdapter[] = "port-1-1";
constexpr uint32_t kHoldA = 32;
constexpr uint32_t kHoldB = 1024;

common::RxAggFields Fields(uint32_t hold_us) {
  return common::RxAggFields{true, 255, hold_us, 20, 0};
}

ExperimentAssignment Assignment(std::string arm, uint32_t hold_us, absl::Time period_start,
                                absl::Duration window, absl::Duration burn_in = {}) {
  ExperimentAssignment a;
  a.adapter_id = kAdapter;
  a.experiment = "hold-ab";
  a.arm = std::move(arm);
  a.settings.hold_us = hold_us;
  a.priority = 100;
  a.period_index = 3;
  a.experiment_generation = 2;
  a.period_start = period_start;
  a.window_length = window;
  a.burn_in = burn_in;
  return a;
}

// A simulated host: one adapter receiving `rate` bytes per second, its register verified at
// `hold_us`, ticks of one second on both clocks unless told otherwise.
class Host {
 public:
  Host()
      : steady_(SteadyTime{} + std::chrono::hours(1)),
        wall_(absl::FromUnixSeconds(1'800'000'000)) {}

  absl::Time wall() const { return wall_; }
  SteadyTime steady() const { return steady_; }

  ExperimentTick Tick() const {
    ExperimentTick tick;
    tick.now = steady_;
    tick.wall = wall_;
    if (netdev_present) {
      NetdevTotals totals;
      totals.present = true;
      totals.counters.rx_bytes = rx_bytes_;
      totals.counters.rx_packets = rx_bytes_ / 1000;
      totals.counters.rx_dropped = dropped_;
      totals.resets = resets;
      totals.missing_samples = missing;
      tick.totals[kAdapter] = totals;
    }
    if (adapter_present) {
      AdapterRegisterState state;
      state.present = true;
      state.verified = verified;
      state.fields = Fields(hold_us);
      tick.adapters[kAdapter] = state;
    }
    tick.probes = probes;
    return tick;
  }

  // Advances both clocks (the wall clock by `wall_step` if given) and the counters.
  void Advance(absl::Duration step = absl::Seconds(1),
               std::optional<absl::Duration> wall_step = std::nullopt) {
    steady_ += absl::ToChronoNanoseconds(step);
    wall_ += wall_step.value_or(step);
    rx_bytes_ += static_cast<uint64_t>(rate * absl::ToDoubleSeconds(step));
    dropped_ += drops_per_second;
  }

  uint64_t rate = 1'000'000;
  uint64_t drops_per_second = 0;
  uint32_t hold_us = kHoldA;
  bool verified = true;
  bool adapter_present = true;
  bool netdev_present = true;
  uint64_t resets = 0;
  uint64_t missing = 0;
  std::map<std::string, ProbeWindowStats> probes;

 private:
  SteadyTime steady_;
  absl::Time wall_;
  uint64_t rx_bytes_ = 5'000'000;
  uint64_t dropped_ = 0;
};

// Ticks once per second for `seconds`, collecting closed windows.
std::vector<ExperimentWindow> TickFor(ExperimentWindowCutter& cutter, Host& host, int seconds) {
  std::vector<ExperimentWindow> out;
  for (int i = 0; i < seconds; ++i) {
    host.Advance();
    for (ExperimentWindow& w : cutter.Tick(host.Tick())) out.push_back(std::move(w));
  }
  return out;
}

TEST(ExperimentWindowsTest, WindowsAlignToThePeriodStartAndAreTagged) {
  Host host;
  ExperimentWindowCutter cutter;
  // The period started 3 s ago; windows of 10 s: the first one is cut short at +10 s.
  const absl::Time period_start = host.wall() - absl::Seconds(3);
  cutter.SetAssignments(7, {Assignment("short", kHoldA, period_start, absl::Seconds(10))},
                        host.steady());
  EXPECT_TRUE(cutter.Tick(host.Tick()).empty());
  ASSERT_EQ(cutter.OpenWindows().size(), 1u);

  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 17);
  ASSERT_EQ(windows.size(), 2u);
  const ExperimentWindow& first = windows[0];
  EXPECT_EQ(first.window.adapter_id, kAdapter);
  EXPECT_EQ(first.experiment, "hold-ab");
  EXPECT_EQ(first.arm, "short");
  EXPECT_EQ(first.period_index, 3u);
  EXPECT_EQ(first.experiment_generation, 2);
  EXPECT_EQ(first.bundle_version, 7u);
  EXPECT_TRUE(first.valid) << first.invalid_reason;
  EXPECT_EQ(first.window.start_time, period_start + absl::Seconds(3));
  EXPECT_DOUBLE_EQ(first.window.duration_seconds, 7.0);
  ASSERT_TRUE(first.window.has_traffic);
  EXPECT_EQ(first.window.traffic.rx_bytes, 7'000'000u);
  ASSERT_TRUE(first.observed_settings.has_value());
  EXPECT_EQ(first.observed_settings->hold_us, kHoldA);
  EXPECT_EQ(first.observed_settings->buffer_kib, 20u);

  const ExperimentWindow& second = windows[1];
  EXPECT_EQ(second.window.start_time, period_start + absl::Seconds(10));
  EXPECT_DOUBLE_EQ(second.window.duration_seconds, 10.0);
  EXPECT_EQ(second.window.traffic.rx_bytes, 10'000'000u);
  EXPECT_TRUE(second.valid);
}

TEST(ExperimentWindowsTest, TickingAtTheNextEdgeClosesTheWindowOnIt) {
  Host host;
  ExperimentWindowCutter cutter;
  EXPECT_FALSE(cutter.NextEdge().has_value());
  const absl::Time period_start = host.wall() - absl::Milliseconds(2500);
  ExperimentAssignment a = Assignment("short", kHoldA, period_start, absl::Seconds(2));
  a.period_end = period_start + absl::Seconds(5);
  cutter.SetAssignments(1, {a}, host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  ASSERT_EQ(cutter.NextEdge(), period_start + absl::Seconds(4));
  host.Advance(absl::Milliseconds(1500));  // exactly on the edge
  std::vector<ExperimentWindow> windows = cutter.Tick(host.Tick());
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_DOUBLE_EQ(windows[0].window.duration_seconds, 1.5);
  EXPECT_EQ(cutter.NextEdge(), period_start + absl::Seconds(5));  // the period ends first
  host.Advance(absl::Seconds(1));
  windows = cutter.Tick(host.Tick());
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].window.start_time, period_start + absl::Seconds(4));
  EXPECT_FALSE(cutter.NextEdge().has_value());
}

TEST(ExperimentWindowsTest, WindowsBeforeTheEndOfBurnInAreInvalid) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(
      1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(5), absl::Seconds(7))},
      host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 15);
  ASSERT_EQ(windows.size(), 3u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidBurnIn);  // starts at +0
  EXPECT_FALSE(windows[0].valid);
  EXPECT_EQ(windows[1].invalid_reason, kInvalidBurnIn);  // starts at +5 < +7
  EXPECT_TRUE(windows[2].valid);                         // starts at +10
  EXPECT_EQ(windows[2].invalid_reason, "");
}

// A guardrail stop sends the adapter to control in the middle of a period (same period index
// and start, another arm): the window opened at the switch still sees the old hold at its first
// tick, so it and every window opening before burn_in has passed since the switch are burn-in
// (not settings_not_applied, which is left for settings that really did not stand); the
// windows after that count.
TEST(ExperimentWindowsTest, ASwitchInsideThePeriodRestartsBurnIn) {
  Host host;
  ExperimentWindowCutter cutter;
  const absl::Time start = host.wall();
  cutter.SetAssignments(1, {Assignment("short", kHoldA, start, absl::Seconds(1), absl::Seconds(2))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 4);
  ASSERT_EQ(windows.size(), 4u);
  EXPECT_EQ(windows[1].invalid_reason, kInvalidBurnIn);  // [1, 2)
  EXPECT_TRUE(windows[2].valid) << windows[2].invalid_reason;

  // The stop, 4.2 s into the period; the bundle is cut before the register changes.
  host.Advance(absl::Milliseconds(200));
  cutter.SetAssignments(2, {Assignment("long", kHoldB, start, absl::Seconds(1), absl::Seconds(2))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());  // [4, 4.2): too short, discarded
  host.hold_us = kHoldB;  // the reconcile loop writes and verifies the control hold
  host.Advance(absl::Milliseconds(800));
  windows = cutter.Tick(host.Tick());  // closes [4.2, 5)
  for (ExperimentWindow& w : TickFor(cutter, host, 3)) windows.push_back(std::move(w));
  ASSERT_EQ(windows.size(), 4u);
  for (const ExperimentWindow& w : windows) EXPECT_EQ(w.arm, "long");
  EXPECT_EQ(windows[0].invalid_reason, kInvalidBurnIn);        // opened at the switch, +4.2
  EXPECT_EQ(windows[1].invalid_reason, kInvalidBurnIn);        // +5 < +4.2 + 2
  EXPECT_EQ(windows[2].invalid_reason, kInvalidBurnIn);        // +6 < +6.2
  EXPECT_TRUE(windows[3].valid) << windows[3].invalid_reason;  // +7

  // The next period starts its own burn-in from its start, as always.
  host.Advance(absl::Milliseconds(10));
  ExperimentAssignment next =
      Assignment("short", kHoldA, host.wall(), absl::Seconds(1), absl::Seconds(1));
  next.period_index = 4;
  cutter.SetAssignments(3, {next}, host.steady());
  ASSERT_EQ(cutter.Tick(host.Tick()).size(), 0u);  // [8, 8.01) discarded
  host.hold_us = kHoldA;
  windows = TickFor(cutter, host, 2);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidBurnIn);
  EXPECT_TRUE(windows[1].valid) << windows[1].invalid_reason;
}

TEST(ExperimentWindowsTest, ARegisterNotAtTheArmsSettingsAtAnyTickInvalidatesTheWindow) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(5))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 2);
  host.verified = false;  // e.g. drift detected, repair pending
  windows = TickFor(cutter, host, 1);
  host.verified = true;
  windows = TickFor(cutter, host, 2);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidSettingsNotApplied);

  // Verified, but the register holds another hold than the arm's (a stronger policy wins).
  host.hold_us = kHoldB;
  windows = TickFor(cutter, host, 5);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidSettingsNotApplied);
  ASSERT_TRUE(windows[0].observed_settings.has_value());
  EXPECT_EQ(windows[0].observed_settings->hold_us, kHoldB);

  // Back at the arm's hold: the window opened at the tick that still saw kHoldB is invalid, the
  // next one is clean.
  host.hold_us = kHoldA;
  windows = TickFor(cutter, host, 10);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidSettingsNotApplied);
  EXPECT_TRUE(windows[1].valid);
}

TEST(ExperimentWindowsTest, ABundleChangeClosesTheWindowEarlyAndOpensOneForTheNewArm) {
  Host host;
  ExperimentWindowCutter cutter;
  const absl::Time start = host.wall();
  cutter.SetAssignments(1, {Assignment("short", kHoldA, start, absl::Seconds(10))}, host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  ASSERT_TRUE(TickFor(cutter, host, 4).empty());

  // The next period: the agent cuts right away, before the new hold reaches the register.
  host.Advance(absl::Milliseconds(300));
  ExperimentAssignment next = Assignment("long", kHoldB, host.wall(), absl::Seconds(10));
  next.period_index = 4;
  cutter.SetAssignments(2, {next}, host.steady());
  std::vector<ExperimentWindow> windows = cutter.Tick(host.Tick());
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].arm, "short");
  EXPECT_EQ(windows[0].bundle_version, 1u);
  EXPECT_TRUE(windows[0].valid) << windows[0].invalid_reason;
  EXPECT_NEAR(windows[0].window.duration_seconds, 4.3, 1e-9);

  // The new arm's first window saw the old hold at its first tick.
  host.hold_us = kHoldB;
  windows = TickFor(cutter, host, 10);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].arm, "long");
  EXPECT_EQ(windows[0].period_index, 4u);
  EXPECT_EQ(windows[0].bundle_version, 2u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidSettingsNotApplied);
  windows = TickFor(cutter, host, 10);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_TRUE(windows[0].valid);
  EXPECT_EQ(windows[0].observed_settings->hold_us, kHoldB);
}

TEST(ExperimentWindowsTest, AWindowCutRightAfterItOpenedIsDiscarded) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(2))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  ASSERT_EQ(TickFor(cutter, host, 2).size(), 1u);  // closes [0, 2) and opens [2, 4)
  host.Advance(absl::Milliseconds(5));
  cutter.SetAssignments(2, {Assignment("long", kHoldB, host.wall(), absl::Seconds(2))},
                        host.steady());
  EXPECT_TRUE(cutter.Tick(host.Tick()).empty());  // [2, 2.005) says nothing: not reported
  EXPECT_EQ(cutter.OpenWindows().size(), 1u);
}

TEST(ExperimentWindowsTest, AnArmChangeSeenLateMarksTheClosedWindowArmChanged) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(10))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  ASSERT_TRUE(TickFor(cutter, host, 2).empty());
  // The change happened right after this tick, but the next tick comes a second later.
  cutter.SetAssignments(2, {Assignment("long", kHoldB, host.wall(), absl::Seconds(10))},
                        host.steady());
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 1);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].arm, "short");
  EXPECT_EQ(windows[0].invalid_reason, kInvalidArmChanged);
}

TEST(ExperimentWindowsTest, TheAssignmentIsDroppedAtPeriodEnd) {
  Host host;
  ExperimentWindowCutter cutter;
  ExperimentAssignment a = Assignment("short", kHoldA, host.wall(), absl::Seconds(10));
  a.period_end = host.wall() + absl::Seconds(15);
  cutter.SetAssignments(1, {a}, host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 20);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_DOUBLE_EQ(windows[1].window.duration_seconds, 5.0);  // closed early at the period end
  EXPECT_TRUE(windows[1].valid);
  EXPECT_TRUE(cutter.OpenWindows().empty());
}

TEST(ExperimentWindowsTest, RemovingTheAssignmentClosesTheWindow) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(10))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  ASSERT_TRUE(TickFor(cutter, host, 3).empty());
  cutter.SetAssignments(2, {}, host.steady());
  std::vector<ExperimentWindow> windows = cutter.Tick(host.Tick());
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_TRUE(windows[0].valid);
  EXPECT_TRUE(cutter.OpenWindows().empty());
}

TEST(ExperimentWindowsTest, CounterResetAdapterGoneAndClockJumpInvalidate) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(5))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());

  host.resets = 1;
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 5);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidCounterReset);
  EXPECT_TRUE(windows[0].window.counter_reset);

  windows = TickFor(cutter, host, 2);
  host.adapter_present = false;
  host.netdev_present = false;
  windows = TickFor(cutter, host, 1);
  host.adapter_present = true;
  host.netdev_present = true;
  ++host.missing;
  windows = TickFor(cutter, host, 2);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].invalid_reason, kInvalidAdapterGone);

  windows = TickFor(cutter, host, 5);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_TRUE(windows[0].valid);

  // NTP steps the wall clock 3 s ahead within one monotonic second.
  host.Advance(absl::Seconds(1), absl::Seconds(4));
  windows = cutter.Tick(host.Tick());
  windows = TickFor(cutter, host, 10);
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows[0].invalid_reason, kInvalidClockJump);
  EXPECT_TRUE(windows.back().valid);
}

TEST(ExperimentWindowsTest, ProbeResultsOfTheWindowAreSummarised) {
  Host host;
  ExperimentWindowCutter cutter;
  cutter.SetAssignments(1, {Assignment("short", kHoldA, host.wall(), absl::Seconds(2))},
                        host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  host.probes[kAdapter] = ProbeWindowStats{{0.001, 0.003}, 3, 1};
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 2);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].window.probes_sent, 6u);
  EXPECT_EQ(windows[0].window.probes_lost, 2u);
  EXPECT_EQ(windows[0].window.rtt.count, 4u);
  EXPECT_DOUBLE_EQ(windows[0].window.rtt.mean_seconds, 0.002);
}

TEST(ExperimentWindowsTest, WithoutAPeriodStartWindowsAlignToTheFirstSightAndUseTheDefault) {
  Host host;
  ExperimentWindowOptions options;
  options.default_length = absl::Seconds(4);
  ExperimentWindowCutter cutter(options);
  ExperimentAssignment a = Assignment("short", kHoldA, host.wall(), absl::ZeroDuration());
  a.period_start.reset();
  cutter.SetAssignments(1, {a}, host.steady());
  ASSERT_TRUE(cutter.Tick(host.Tick()).empty());
  std::vector<ExperimentWindow> windows = TickFor(cutter, host, 8);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_DOUBLE_EQ(windows[0].window.duration_seconds, 4.0);
  EXPECT_EQ(windows[1].window.start_time - windows[0].window.start_time, absl::Seconds(4));
}

TEST(MetricWindowProtoTest, CarriesTagsTrafficRttCpuAndValidity) {
  ExperimentWindow w;
  w.window.adapter_id = kAdapter;
  w.window.start_time = absl::FromUnixSeconds(1'800'000'000);
  w.window.duration_seconds = 2.5;
  w.window.has_traffic = true;
  w.window.traffic.rx_bytes = 1000;
  w.window.traffic.rx_packets = 10;
  w.window.traffic.rx_dropped = 3;
  w.window.traffic.tx_bytes = 50;
  w.window.rtt = SummarizeRtt({0.001, 0.002});
  w.window.probes_sent = 3;
  w.window.probes_lost = 1;
  w.window.cpu = CpuUsage{0.25, 0.9, 2};
  w.experiment = "hold-ab";
  w.arm = "long";
  w.period_index = 5;
  w.bundle_version = 42;
  w.observed_settings = common::RxAggSettings{kHoldB, 255, 20, true};
  w.valid = false;
  w.invalid_reason = std::string(kInvalidBurnIn);

  const v1::MetricWindow m = MetricWindowToProto(w);
  EXPECT_EQ(m.adapter_id(), kAdapter);
  EXPECT_EQ(m.experiment(), "hold-ab");
  EXPECT_EQ(m.arm(), "long");
  EXPECT_EQ(m.period_index(), 5u);
  EXPECT_EQ(m.bundle_version(), 42u);
  EXPECT_EQ(common::TimeFromProto(m.window_start_time()), w.window.start_time);
  EXPECT_EQ(common::DurationFromProto(m.window_duration()), absl::Milliseconds(2500));
  EXPECT_EQ(m.rx_bytes(), 1000u);
  EXPECT_EQ(m.rx_packets(), 10u);
  EXPECT_EQ(m.rx_dropped(), 3u);
  EXPECT_EQ(m.tx_bytes(), 50u);
  EXPECT_EQ(m.rtt().count(), 2u);
  EXPECT_DOUBLE_EQ(m.rtt().p99_seconds(), 0.002);
  ASSERT_GT(m.rtt().buckets_size(), 0);
  EXPECT_EQ(m.rtt().buckets(m.rtt().buckets_size() - 1).upper_bound_seconds(),
            std::numeric_limits<double>::max());
  EXPECT_EQ(m.probes_sent(), 3u);
  EXPECT_EQ(m.probes_lost(), 1u);
  EXPECT_DOUBLE_EQ(m.host_cpu_ratio(), 0.25);
  EXPECT_DOUBLE_EQ(m.busiest_core_ratio(), 0.9);
  EXPECT_FALSE(m.valid());
  EXPECT_EQ(m.invalid_reason(), "burn_in");
  EXPECT_EQ(m.observed_settings().hold_us(), kHoldB);
}

}  // namespace
}  // namespace rxfleet::agent
