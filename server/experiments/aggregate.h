#pragma once

// From metric windows to adapter-level values: the step shared by reports and guardrails.
//
// The unit of analysis is the adapter, not the window: windows of one adapter are strongly
// correlated, so treating them as independent samples would make every interval far too
// narrow. Per segment, arm and metric each adapter contributes one value:
//  - parallel: the mean of its valid windows' values;
//  - switchback: the mean over its valid periods on that arm of the period means (the mean of
//    the period's valid windows), so long and short periods weigh the same.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/experiment/metric.h"

namespace rxfleet::experiments {

/// One finished metric window of one adapter (the content of rxfleet.v1.MetricWindow plus
/// what the server knows about the adapter). A plain value; see WindowFromProto.
struct Window {
  std::string adapter;               ///< fleet-unique key, AdapterKey(host_id, adapter_id)
  std::vector<std::string> segment;  ///< values aligned with Experiment::segment_keys
  std::string arm;                   ///< arm in effect during the window
  uint32_t period_index = 0;         ///< switchback period (0 for parallel)
  absl::Time start;                  ///< window start
  absl::Duration duration;           ///< measured window length, > 0
  bool valid = true;                 ///< false: the agent flagged the window
  std::string invalid_reason;        ///< agent's reason when !valid (`burn_in`, ...)
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_dropped = 0;
  uint64_t rtt_count = 0;  ///< RTT samples; RTT metrics have no value when 0
  double rtt_mean_seconds = 0;
  double rtt_p99_seconds = 0;
  uint64_t probes_sent = 0;  ///< probe_loss_ratio has no value when 0
  uint64_t probes_lost = 0;
  double busiest_core_ratio = 0;  ///< [0, 1]
  double host_cpu_ratio = 0;      ///< [0, 1]
  /// The window's active probe (MetricWindow.probe): the probe metrics have a value only when
  /// probe_ok; when the result names the spec that ran (probe_spec_known), only those its
  /// protocol and direction measure (else the experiment's probe is assumed, which
  /// ValidateExperiment fits to the metrics).
  bool probe_ok = false;
  bool probe_spec_known = false;
  bool probe_udp = false;      ///< protocol UDP (else TCP)
  bool probe_forward = false;  ///< direction FORWARD (else REVERSE)
  double probe_throughput_bps = 0;
  double probe_udp_loss_ratio = 0;      ///< [0, 1]
  double probe_udp_jitter_seconds = 0;  ///< >= 0
  uint64_t probe_retransmits = 0;
};

/// The value of `metric` in one window (definitions in common/experiment/metric.h), or
/// nullopt when the window has none (zero duration, no packets, no RTT samples, no probes;
/// for probe metrics: no probe, a failed one, or one whose protocol or direction does not
/// measure the metric).
std::optional<double> MetricValue(const Window& window, Metric metric);

/// Why a window was not used. Windows are checked in this order; the first reason counts.
inline constexpr std::string_view kExcludedInvalid = "invalid";  ///< prefix: "invalid:<reason>"
inline constexpr std::string_view kExcludedUnknownArm = "unknown_arm";
inline constexpr std::string_view kExcludedOutsideExperiment = "outside_experiment";
inline constexpr std::string_view kExcludedBadPeriod = "period_mismatch";
inline constexpr std::string_view kExcludedBurnIn = "burn_in";

/// Adapter-level values of one segment.
struct SegmentData {
  std::vector<std::string> values;    ///< segment values (aligned with segment keys)
  std::vector<std::string> adapters;  ///< adapter keys seen in the segment, sorted
  /// means[arm][metric][adapter]: the adapter-level value; NaN when the adapter has no valid
  /// window with a value of that metric on that arm. arm indexes Experiment::arms, metric is
  /// static_cast<size_t>(Metric), adapter indexes `adapters`.
  std::vector<std::array<std::vector<double>, kMetricCount>> means;
  /// Valid windows per arm, and per arm and metric those with a value.
  std::vector<uint64_t> windows;
  std::vector<std::array<uint64_t, kMetricCount>> metric_windows;
  /// Excluded windows per arm (windows naming an unknown arm are counted in Aggregate only).
  std::vector<uint64_t> excluded_windows;
  /// Valid periods per arm (parallel: adapters with valid windows).
  std::vector<uint64_t> periods;

  /// Adapter-level values of one arm and metric, NaNs dropped.
  std::vector<double> Values(size_t arm, Metric metric) const;
  /// Adapters with at least one valid window on `arm`.
  size_t AdaptersOn(size_t arm) const;
  /// Pairs (treatment, control) of adapters with a value on both arms, in adapter order.
  void Pairs(size_t arm, size_t control, Metric metric, std::vector<double>* treatment,
             std::vector<double>* control_values) const;
};

/// Everything the analysis needs from the windows.
struct Aggregate {
  std::vector<SegmentData> segments;  ///< sorted by segment values
  uint64_t windows_total = 0;
  uint64_t windows_used = 0;
  std::map<std::string, uint64_t> excluded;                ///< reason -> windows
  absl::Time first_window_start = absl::InfiniteFuture();  ///< of used windows
  absl::Time last_window_start = absl::InfinitePast();     ///< of used windows
};

/// Tolerance for the agents' clocks at the edges of the experiment and of periods.
inline constexpr absl::Duration kEdgeTolerance = absl::Seconds(1);

/// Groups windows by segment, adapter, arm and period, drops the ones that must not be used
/// and reduces the rest to adapter-level values. A window is excluded when (first match):
///  1. the agent marked it invalid: "invalid:<reason>" (`unspecified` when empty);
///  2. its arm is not an arm of the experiment: unknown_arm;
///  3. it does not lie inside [start, start + duration), give or take kEdgeTolerance at
///     either edge: outside_experiment;
///  4. switchback: period_index is not a period of the experiment or the window does not lie
///     inside that period (same tolerance); parallel: period_index != 0: period_mismatch;
///  5. it starts before the period's (parallel: the experiment's) start + burnIn: burn_in.
/// The agent already marks burn-in windows invalid; rule 5 makes the report independent of
/// that.
/// Errors: InvalidArgument when the experiment is invalid, a window's segment has the wrong
/// number of values or its duration is not positive (naming the window's index and adapter).
absl::StatusOr<Aggregate> AggregateWindows(const Experiment& experiment, absl::Time start,
                                           std::span<const Window> windows);

}  // namespace rxfleet::experiments
