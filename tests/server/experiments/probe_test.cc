// Probe experiments: the slot plan (no two probes against one iperf3 server overlap, sticky
// numbers, rotation when the slots of a window do not suffice), the assignment's probe fields,
// probe metrics per window, and reports and guardrails from probe results alone.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"
#include "server/experiments/convert.h"
#include "server/experiments/guardrails.h"
#include "server/experiments/probe_schedule.h"
#include "server/experiments/report.h"

namespace rxfleet::experiments {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Keys(int n, const std::string& prefix = "h") {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(prefix, i, "/port-1"));
  return keys;
}

// Every (round, probe interval) pair of the plan's members: no two members of one round may
// overlap in time (with the margin), and every probe lies inside the window.
void ExpectNoOverlap(const ProbePlan& plan, const std::vector<std::string>& keys,
                     absl::Duration window, absl::Duration duration) {
  std::map<uint32_t, std::vector<std::pair<absl::Duration, std::string>>> by_round;
  for (const std::string& key : keys) {
    std::optional<ProbeTurn> turn = plan.TurnOf(key);
    ASSERT_TRUE(turn.has_value()) << key;
    EXPECT_GE(turn->offset, absl::ZeroDuration()) << key;
    EXPECT_LE(turn->offset + duration, window) << key;
    EXPECT_LT(turn->round, turn->rounds) << key;
    by_round[turn->round].emplace_back(turn->offset, key);
  }
  for (auto& [round, starts] : by_round) {
    std::sort(starts.begin(), starts.end());
    for (size_t i = 1; i < starts.size(); ++i) {
      EXPECT_GE(starts[i].first - starts[i - 1].first, duration + kProbeSlotMargin)
          << starts[i - 1].second << " and " << starts[i].second << " overlap in round " << round;
    }
  }
}

TEST(ProbePlanTest, SlotsPerWindow) {
  EXPECT_EQ(ProbeSlotsPerWindow(absl::Seconds(60), absl::Seconds(10)), 5u);
  EXPECT_EQ(ProbeSlotsPerWindow(absl::Seconds(12), absl::Seconds(10)), 1u);
  EXPECT_EQ(ProbeSlotsPerWindow(absl::Seconds(11), absl::Seconds(10)), 0u);
}

TEST(ProbePlanTest, AdaptersSharingAServerGetDistinctSlots) {
  ProbePlan plan(absl::Seconds(60), absl::Seconds(10));
  const std::vector<std::string> keys = Keys(5);
  EXPECT_TRUE(plan.Update(keys));
  EXPECT_EQ(plan.rounds(), 1u);
  ExpectNoOverlap(plan, keys, absl::Seconds(60), absl::Seconds(10));
  std::set<absl::Duration> offsets;
  for (const std::string& key : keys) offsets.insert(plan.TurnOf(key)->offset);
  EXPECT_EQ(offsets,
            (std::set<absl::Duration>{absl::Seconds(1), absl::Seconds(13), absl::Seconds(25),
                                      absl::Seconds(37), absl::Seconds(49)}));
  EXPECT_FALSE(plan.TurnOf("other/port-1").has_value());
}

TEST(ProbePlanTest, MoreAdaptersThanSlotsRotateOverWindows) {
  ProbePlan plan(absl::Seconds(60), absl::Seconds(10));
  const std::vector<std::string> keys = Keys(12);
  EXPECT_TRUE(plan.Update(keys));
  EXPECT_EQ(plan.slots_per_window(), 5u);
  EXPECT_EQ(plan.rounds(), 3u);
  ExpectNoOverlap(plan, keys, absl::Seconds(60), absl::Seconds(10));
  std::map<uint32_t, int> per_round;
  for (const std::string& key : keys) ++per_round[plan.TurnOf(key)->round];
  EXPECT_EQ(per_round, (std::map<uint32_t, int>{{0, 5}, {1, 5}, {2, 2}}));
}

TEST(ProbePlanTest, StableAcrossRebuildsJoinsAndLeaves) {
  ProbePlan plan(absl::Seconds(60), absl::Seconds(10));
  std::vector<std::string> keys = Keys(4);
  ASSERT_TRUE(plan.Update(keys));
  std::map<std::string, ProbeTurn> before;
  for (const std::string& key : keys) before[key] = *plan.TurnOf(key);
  // The same set again, in another order: nothing changes.
  std::vector<std::string> shuffled(keys.rbegin(), keys.rend());
  EXPECT_FALSE(plan.Update(shuffled));
  for (const std::string& key : keys) EXPECT_EQ(*plan.TurnOf(key), before[key]) << key;
  // One leaves, a new one joins: it takes the freed slot; the others keep theirs.
  const std::string gone = keys[1];
  keys.erase(keys.begin() + 1);
  keys.push_back("z9/port-1");
  EXPECT_TRUE(plan.Update(keys));
  for (const std::string& key : keys) {
    if (key == "z9/port-1") {
      EXPECT_EQ(plan.TurnOf(key)->offset, before[gone].offset);
    } else {
      EXPECT_EQ(*plan.TurnOf(key), before[key]) << key;
    }
  }
  EXPECT_FALSE(plan.TurnOf(gone).has_value());
  ExpectNoOverlap(plan, keys, absl::Seconds(60), absl::Seconds(10));
}

constexpr char kProbeExperiment[] = R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: probe-hold}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: switchback
  duration: 4h
  windowLength: 60s
  periodLength: 10m
  primaryMetric: probe_rx_throughput_bps
  secondaryMetrics: [probe_tcp_retransmits]
  probe: {server: 10.0.0.1, duration: 10s}
  minAdaptersPerArm: 3
  minWindowsPerArm: 10
)";

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

Experiment MustParse(const std::string& text) {
  absl::StatusOr<Experiment> e = ParseExperiment(text, "t.yaml");
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : Experiment{};
}

// Windows of an idle fleet: no passive traffic at all (rx_bytes 0), only the probe, which
// measures `rate(arm)` with a little spread per adapter and window. Adapters probe every
// `rounds`-th window (their turn).
std::vector<Window> IdleFleetWindows(const Assigner& assigner, int adapters, uint32_t rounds,
                                     const std::function<double(const std::string&)>& rate) {
  const Experiment& e = assigner.experiment();
  std::vector<Window> out;
  const int64_t per_period = e.period_length / e.window_length;
  for (int a = 0; a < adapters; ++a) {
    const std::string key = absl::StrCat("h", a, "/port-1");
    for (uint32_t k = 0; k < assigner.PeriodCount(); ++k) {
      const size_t arm = assigner.ScheduledArm(key, k);
      for (int64_t i = 0; i < per_period; ++i) {
        Window w;
        w.adapter = key;
        w.arm = e.arms[arm].name;
        w.period_index = k;
        w.start = assigner.PeriodStart(k) + e.window_length * i;
        w.duration = e.window_length;
        const int64_t index = (k * per_period + i);
        if (index % rounds == static_cast<uint32_t>(a) % rounds) {
          w.probe_ok = true;
          w.probe_spec_known = true;
          // Each adapter gains a little differently, so the paired differences vary.
          w.probe_throughput_bps =
              rate(e.arms[arm].name) * (1.0 + 0.01 * ((a * 7 + index * 3) % 5 - 2)) +
              (arm == 1 ? a * 3e6 : 0);
          w.probe_retransmits = static_cast<uint64_t>(10 + (a + index) % 4);
        }
        out.push_back(w);
      }
    }
  }
  return out;
}

TEST(ProbeReportTest, ConclusiveFromProbesAloneOnAnIdleFleet) {
  const Experiment e = MustParse(kProbeExperiment);
  absl::StatusOr<Assigner> assigner = Assigner::Create(e, kStart);
  ASSERT_TRUE(assigner.ok()) << assigner.status();
  const std::vector<Window> windows = IdleFleetWindows(
      *assigner, 6, 2, [](const std::string& arm) { return arm == "short" ? 940e6 : 610e6; });
  absl::StatusOr<Report> r =
      ComputeReport(e, windows, {kStart, kStart + e.duration, /*stopped=*/{}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->segments.size(), 1u);
  const SegmentResult& s = r->segments[0];
  const Comparison* c = nullptr;
  for (const Comparison& candidate : s.comparisons) {
    if (candidate.metric == Metric::kProbeRxThroughputBps) c = &candidate;
  }
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->estimate.has_value()) << c->not_enough_data << "\n" << RenderReportText(*r);
  EXPECT_TRUE(c->conclusive) << c->not_enough_data;
  EXPECT_NEAR(c->estimate->diff, 330e6, 10e6);
  EXPECT_GT(c->estimate->ci.low, 0);
  EXPECT_LT(c->estimate->p_value, 0.001);
  const std::string text = RenderReportText(*r);
  EXPECT_THAT(text, HasSubstr("probe_rx_throughput_bps *"));
  EXPECT_THAT(text, HasSubstr("Mbit/s"));
  // Passive metrics have no traffic to measure: rx_throughput_bps is 0, not the probe's.
  absl::StatusOr<Aggregate> aggregate = AggregateWindows(e, kStart, windows);
  ASSERT_TRUE(aggregate.ok());
  // Half of the windows carry a probe (two rounds).
  EXPECT_EQ(
      aggregate->segments[0].metric_windows[0][static_cast<size_t>(Metric::kProbeRxThroughputBps)] *
          2,
      aggregate->segments[0].windows[0]);
}

TEST(ProbeMetricValueTest, OnlyFromSuccessfulProbesThatMeasureTheMetric) {
  Window w;
  w.duration = absl::Seconds(60);
  w.rx_bytes = 0;
  EXPECT_FALSE(MetricValue(w, Metric::kProbeRxThroughputBps).has_value());  // no probe
  EXPECT_EQ(MetricValue(w, Metric::kRxThroughputBps), 0.0);  // the passive metric still counts
  v1::MetricWindow proto;
  proto.mutable_probe()->set_ok(false);
  proto.mutable_probe()->set_failure_reason("busy");
  proto.mutable_probe()->set_throughput_bps(5e8);
  w = WindowFromProto(proto, "h", {});
  EXPECT_FALSE(MetricValue(w, Metric::kProbeRxThroughputBps).has_value());  // failed probe
  proto.mutable_probe()->set_ok(true);
  proto.mutable_probe()->mutable_spec()->set_protocol(v1::PROBE_PROTOCOL_UDP);
  proto.mutable_probe()->mutable_spec()->set_direction(v1::PROBE_DIRECTION_FORWARD);
  proto.mutable_probe()->set_udp_loss_ratio(0.25);
  proto.mutable_probe()->set_udp_jitter_seconds(0.002);
  *proto.mutable_window_duration() = common::DurationToProto(absl::Seconds(60));
  w = WindowFromProto(proto, "h", {});
  EXPECT_EQ(MetricValue(w, Metric::kProbeTxThroughputBps), 5e8);
  EXPECT_FALSE(MetricValue(w, Metric::kProbeRxThroughputBps).has_value());  // forward probe
  EXPECT_EQ(MetricValue(w, Metric::kProbeUdpLossRatio), 0.25);
  EXPECT_EQ(MetricValue(w, Metric::kProbeUdpJitterSeconds), 0.002);
  EXPECT_FALSE(MetricValue(w, Metric::kProbeTcpRetransmits).has_value());  // UDP probe
}

TEST(ProbeGuardrailTest, UdpLossGuardrailTripsOnProbeResults) {
  const Experiment e = MustParse(R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: probe-loss}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: switchback
  duration: 4h
  windowLength: 30s
  periodLength: 10m
  primaryMetric: probe_udp_loss_ratio
  guardrails:
    - {metric: probe_udp_loss_ratio, op: "<=", threshold: 5%}
  probe: {server: 10.0.0.1, protocol: udp, udpRate: 50Mbit/s, duration: 5s}
)");
  absl::StatusOr<Assigner> assigner = Assigner::Create(e, kStart);
  ASSERT_TRUE(assigner.ok()) << assigner.status();
  std::vector<Window> windows =
      IdleFleetWindows(*assigner, 4, 1, [](const std::string&) { return 50e6; });
  for (Window& w : windows) {
    w.probe_udp = true;
    w.probe_udp_loss_ratio = w.arm == "short" ? 0.86 : 0.04;
  }
  absl::StatusOr<std::vector<GuardrailDecision>> decisions =
      EvaluateGuardrails(e, kStart, windows, {});
  ASSERT_TRUE(decisions.ok()) << decisions.status();
  ASSERT_EQ(decisions->size(), 1u);
  EXPECT_EQ((*decisions)[0].arm, "short");
  EXPECT_EQ((*decisions)[0].metric, Metric::kProbeUdpLossRatio);
  EXPECT_NEAR((*decisions)[0].observed, 0.86, 1e-9);
}

TEST(ProbeAssignmentTest, AssignmentCarriesProbeOffsetAndRotation) {
  const Experiment e = MustParse(kProbeExperiment);
  Assignment a;
  a.arm = "control";
  a.probe = ProbeTurn{.offset = absl::Seconds(13), .rounds = 3, .round = 2};
  const v1::ExperimentAssignment proto = AssignmentToProto(e, 1, "port-1", a);
  ASSERT_TRUE(proto.has_probe());
  EXPECT_EQ(proto.probe().server(), "10.0.0.1:5201");
  EXPECT_EQ(proto.probe().duration().seconds(), 10);
  EXPECT_FALSE(proto.probe().has_interval());
  EXPECT_EQ(proto.probe_offset().seconds(), 13);
  EXPECT_EQ(proto.probe_rounds(), 3u);
  EXPECT_EQ(proto.probe_round(), 2u);
  a.probe.reset();  // not in the plan yet: no probe
  EXPECT_FALSE(AssignmentToProto(e, 1, "port-1", a).has_probe());
}

}  // namespace
}  // namespace rxfleet::experiments
