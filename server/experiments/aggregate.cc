#include "server/experiments/aggregate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sums of one (segment, adapter, period, arm).
struct PeriodAcc {
  uint32_t unit = 0;
  uint32_t arm = 0;
  std::array<double, kMetricCount> sum{};
  std::array<uint32_t, kMetricCount> count{};
};

// Sums of period means of one (segment, adapter), per arm and metric.
struct UnitAcc {
  uint32_t segment = 0;
  uint32_t adapter = 0;                                   // global adapter index
  std::vector<std::array<double, kMetricCount>> sum;      // [arm][metric]
  std::vector<std::array<uint32_t, kMetricCount>> count;  // [arm][metric]
  std::vector<uint32_t> windows;                          // [arm]
};

std::string SegmentKey(const std::vector<std::string>& values) {
  return absl::StrJoin(values, absl::string_view("\x1f", 1));
}

// The value of a metric given the window's length in seconds (computed once per window).
std::optional<double> ValueOf(const Window& w, Metric metric, double seconds) {
  switch (metric) {
    case Metric::kRxThroughputBps:
    case Metric::kTxThroughputBps: {
      if (!(seconds > 0)) return std::nullopt;
      const uint64_t bytes = metric == Metric::kRxThroughputBps ? w.rx_bytes : w.tx_bytes;
      return static_cast<double>(bytes) * 8.0 / seconds;
    }
    case Metric::kRttMeanSeconds:
      if (w.rtt_count == 0) return std::nullopt;
      return w.rtt_mean_seconds;
    case Metric::kRttP99Seconds:
      if (w.rtt_count == 0) return std::nullopt;
      return w.rtt_p99_seconds;
    case Metric::kRxDropRatio: {
      const uint64_t offered = w.rx_packets + w.rx_dropped;
      if (offered == 0) return std::nullopt;
      return static_cast<double>(w.rx_dropped) / static_cast<double>(offered);
    }
    case Metric::kProbeLossRatio:
      if (w.probes_sent == 0) return std::nullopt;
      return static_cast<double>(std::min(w.probes_lost, w.probes_sent)) /
             static_cast<double>(w.probes_sent);
    case Metric::kBusiestCoreRatio:
      return w.busiest_core_ratio;
    case Metric::kHostCpuRatio:
      return w.host_cpu_ratio;
    case Metric::kProbeRxThroughputBps:
      if (!w.probe_ok || (w.probe_spec_known && w.probe_forward)) return std::nullopt;
      return w.probe_throughput_bps;
    case Metric::kProbeTxThroughputBps:
      if (!w.probe_ok || (w.probe_spec_known && !w.probe_forward)) return std::nullopt;
      return w.probe_throughput_bps;
    case Metric::kProbeUdpLossRatio:
      if (!w.probe_ok || (w.probe_spec_known && !w.probe_udp)) return std::nullopt;
      return w.probe_udp_loss_ratio;
    case Metric::kProbeUdpJitterSeconds:
      if (!w.probe_ok || (w.probe_spec_known && !w.probe_udp)) return std::nullopt;
      return w.probe_udp_jitter_seconds;
    case Metric::kProbeTcpRetransmits:
      if (!w.probe_ok || (w.probe_spec_known && w.probe_udp)) return std::nullopt;
      return static_cast<double>(w.probe_retransmits);
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> MetricValue(const Window& w, Metric metric) {
  return ValueOf(w, metric, absl::ToDoubleSeconds(w.duration));
}

std::vector<double> SegmentData::Values(size_t arm, Metric metric) const {
  std::vector<double> out;
  for (double v : means[arm][static_cast<size_t>(metric)]) {
    if (!std::isnan(v)) out.push_back(v);
  }
  return out;
}

size_t SegmentData::AdaptersOn(size_t arm) const {
  // An adapter is on an arm when any metric has a value there; busiest_core_ratio always has
  // one, but check all metrics so the rule does not depend on that.
  size_t n = 0;
  for (size_t a = 0; a < adapters.size(); ++a) {
    for (size_t m = 0; m < kMetricCount; ++m) {
      if (!std::isnan(means[arm][m][a])) {
        ++n;
        break;
      }
    }
  }
  return n;
}

void SegmentData::Pairs(size_t arm, size_t control, Metric metric, std::vector<double>* treatment,
                        std::vector<double>* control_values) const {
  treatment->clear();
  control_values->clear();
  const auto& t = means[arm][static_cast<size_t>(metric)];
  const auto& c = means[control][static_cast<size_t>(metric)];
  for (size_t a = 0; a < adapters.size(); ++a) {
    if (std::isnan(t[a]) || std::isnan(c[a])) continue;
    treatment->push_back(t[a]);
    control_values->push_back(c[a]);
  }
}

absl::StatusOr<Aggregate> AggregateWindows(const Experiment& e, absl::Time start,
                                           std::span<const Window> windows) {
  if (absl::Status s = ValidateExperiment(e); !s.ok()) return s;
  const size_t arm_count = e.arms.size();
  const bool switchback = e.design == Design::kSwitchback;
  const absl::Time end = start + e.duration;
  const uint32_t period_count = e.PeriodCount();
  // Edges precomputed once (absl::Time arithmetic is out of line in shared Abseil builds).
  const absl::Time earliest_start = start - kEdgeTolerance;
  const absl::Time latest_end = end + kEdgeTolerance;
  const bool has_burn_in = e.burn_in > absl::ZeroDuration();
  // Per period (parallel: one spanning the experiment): earliest start and latest end of a
  // window, and the end of the burn-in.
  std::vector<absl::Time> period_lo, period_hi, burn_in_end;
  for (uint32_t k = 0; k < period_count; ++k) {
    const absl::Time period_start =
        switchback ? start + e.period_length * static_cast<int64_t>(k) : start;
    const absl::Time period_end = switchback ? std::min(end, period_start + e.period_length) : end;
    period_lo.push_back(period_start - kEdgeTolerance);
    period_hi.push_back(period_end + kEdgeTolerance);
    burn_in_end.push_back(period_start + e.burn_in);
  }

  Aggregate out;
  out.windows_total = windows.size();

  // Segments in order of first appearance (sorted at the end).
  std::vector<SegmentData> segments;
  absl::flat_hash_map<std::string, uint32_t> segment_index;
  // Adapters: global index by key (views into `windows`, which outlive this function).
  std::vector<std::string_view> adapter_keys;
  absl::flat_hash_map<std::string_view, uint32_t> adapter_index;
  // (segment, adapter) units and (unit, period, arm) accumulators.
  std::vector<UnitAcc> units;
  absl::flat_hash_map<uint64_t, uint32_t> unit_index;
  std::vector<PeriodAcc> periods;
  absl::flat_hash_map<uint64_t, uint32_t> period_index;

  absl::flat_hash_map<std::string_view, uint64_t> invalid_reasons;
  absl::flat_hash_map<std::string_view, uint64_t> other_reasons;

  // Consecutive windows usually share adapter, segment and period: remember the last lookups.
  const Window* last = nullptr;
  uint32_t seg = 0, adapter = 0, unit = 0;
  size_t arm = 0;
  bool arm_known = false;
  uint64_t last_period_key = std::numeric_limits<uint64_t>::max();
  uint32_t acc = 0;

  for (size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    if (w.segment.size() != e.segment_keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window ", i, " of adapter '", w.adapter, "' has ", w.segment.size(),
          " segment values; the experiment has ", e.segment_keys.size(), " segment keys"));
    }
    if (w.duration <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("window ", i, " of adapter '", w.adapter, "' has a non-positive duration"));
    }
    const bool same_segment = last != nullptr && w.segment == last->segment;
    const bool same_adapter = last != nullptr && w.adapter == last->adapter;
    if (!same_segment) {
      auto [it, inserted] =
          segment_index.try_emplace(SegmentKey(w.segment), static_cast<uint32_t>(segments.size()));
      if (inserted) {
        SegmentData data;
        data.values = w.segment;
        data.windows.assign(arm_count, 0);
        data.metric_windows.assign(arm_count, {});
        data.excluded_windows.assign(arm_count, 0);
        data.periods.assign(arm_count, 0);
        segments.push_back(std::move(data));
      }
      seg = it->second;
    }
    if (!same_adapter) {
      auto [it, inserted] = adapter_index.try_emplace(std::string_view(w.adapter),
                                                      static_cast<uint32_t>(adapter_keys.size()));
      if (inserted) adapter_keys.push_back(w.adapter);
      adapter = it->second;
    }
    if (!same_segment || !same_adapter) {
      const uint64_t key = (static_cast<uint64_t>(seg) << 32) | adapter;
      auto [it, inserted] = unit_index.try_emplace(key, static_cast<uint32_t>(units.size()));
      if (inserted) {
        UnitAcc u;
        u.segment = seg;
        u.adapter = adapter;
        u.sum.assign(arm_count, {});
        u.count.assign(arm_count, {});
        u.windows.assign(arm_count, 0);
        units.push_back(std::move(u));
      }
      unit = it->second;
    }
    if (last == nullptr || w.arm != last->arm) {
      const std::optional<size_t> index = e.ArmIndex(w.arm);
      arm_known = index.has_value();
      arm = index.value_or(0);
    }
    last = &w;

    // Exclusions, in the documented order. Invalid windows are counted by the agent's reason
    // (a view into the window) and named "invalid:<reason>" at the end.
    if (!w.valid) {
      ++invalid_reasons[w.invalid_reason];
      if (arm_known) ++segments[seg].excluded_windows[arm];
      continue;
    }
    const absl::Time window_end = w.start + w.duration;
    const uint32_t k = w.period_index;
    std::string_view reason;
    if (!arm_known) {
      reason = kExcludedUnknownArm;
    } else if (w.start < earliest_start || window_end > latest_end) {
      reason = kExcludedOutsideExperiment;
    } else if (k >= period_count || w.start < period_lo[k] || window_end > period_hi[k]) {
      reason = kExcludedBadPeriod;
    } else if (has_burn_in && w.start < burn_in_end[k]) {
      reason = kExcludedBurnIn;
    }
    if (!reason.empty()) {
      ++other_reasons[reason];
      if (arm_known) ++segments[seg].excluded_windows[arm];
      continue;
    }

    // A valid window: add it to its (unit, period, arm) accumulator.
    const uint64_t period_key =
        (static_cast<uint64_t>(unit) << 32) | (static_cast<uint64_t>(w.period_index) << 4) | arm;
    if (period_key != last_period_key) {
      auto [it, inserted] =
          period_index.try_emplace(period_key, static_cast<uint32_t>(periods.size()));
      if (inserted) {
        PeriodAcc p;
        p.unit = unit;
        p.arm = static_cast<uint32_t>(arm);
        periods.push_back(p);
      }
      acc = it->second;
      last_period_key = period_key;
    }
    PeriodAcc& p = periods[acc];
    SegmentData& sd = segments[seg];
    ++sd.windows[arm];
    ++units[unit].windows[arm];
    const double seconds = absl::ToDoubleSeconds(w.duration);
    for (Metric metric : kAllMetrics) {
      const size_t m = static_cast<size_t>(metric);
      const std::optional<double> value = ValueOf(w, metric, seconds);
      if (!value || !std::isfinite(*value)) continue;
      p.sum[m] += *value;
      ++p.count[m];
      ++sd.metric_windows[arm][m];
    }
    ++out.windows_used;
    out.first_window_start = std::min(out.first_window_start, w.start);
    out.last_window_start = std::max(out.last_window_start, w.start);
  }

  for (const auto& [reason, count] : invalid_reasons) {
    out.excluded[absl::StrCat(ToAbslView(kExcludedInvalid), ":",
                              reason.empty() ? "unspecified" : ToAbslView(reason))] += count;
  }
  for (const auto& [reason, count] : other_reasons) out.excluded[std::string(reason)] += count;

  // Period means -> per (unit, arm) sums of period means.
  for (const PeriodAcc& p : periods) {
    UnitAcc& u = units[p.unit];
    bool any = false;
    for (size_t m = 0; m < kMetricCount; ++m) {
      if (p.count[m] == 0) continue;
      u.sum[p.arm][m] += p.sum[m] / p.count[m];
      ++u.count[p.arm][m];
      any = true;
    }
    if (any) ++segments[u.segment].periods[p.arm];
  }

  // Adapters of each segment, sorted by key, and their adapter-level values.
  std::vector<std::vector<uint32_t>> segment_units(segments.size());
  for (uint32_t u = 0; u < units.size(); ++u) segment_units[units[u].segment].push_back(u);
  for (size_t s = 0; s < segments.size(); ++s) {
    std::vector<uint32_t>& list = segment_units[s];
    std::sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return adapter_keys[units[a].adapter] < adapter_keys[units[b].adapter];
    });
    SegmentData& sd = segments[s];
    sd.means.assign(arm_count, {});
    for (size_t a = 0; a < arm_count; ++a) {
      for (size_t m = 0; m < kMetricCount; ++m) sd.means[a][m].assign(list.size(), kNaN);
    }
    for (size_t k = 0; k < list.size(); ++k) {
      const UnitAcc& u = units[list[k]];
      sd.adapters.emplace_back(adapter_keys[u.adapter]);
      for (size_t a = 0; a < arm_count; ++a) {
        for (size_t m = 0; m < kMetricCount; ++m) {
          if (u.count[a][m] > 0) sd.means[a][m][k] = u.sum[a][m] / u.count[a][m];
        }
      }
    }
  }
  std::sort(segments.begin(), segments.end(),
            [](const SegmentData& a, const SegmentData& b) { return a.values < b.values; });
  out.segments = std::move(segments);
  return out;
}

}  // namespace rxfleet::experiments
