#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rxfleet::experiments {

/// The fixed catalogue of metrics an experiment can compare, test and guard. Every metric is
/// computed per metric window (one adapter, one window, see server/experiments/report.h):
///
/// | metric               | unit              | per-window definition                          |
/// |----------------------|-------------------|------------------------------------------------|
/// | rx_throughput_bps    | bit/s             | rx_bytes * 8 / window duration                 |
/// | tx_throughput_bps    | bit/s             | tx_bytes * 8 / window duration                 |
/// | rtt_mean_seconds     | s                 | mean probe RTT (no value without RTT samples)  |
/// | rtt_p99_seconds      | s                 | 99th percentile probe RTT (idem)               |
/// | rx_drop_ratio        | ratio, [0, 1]     | rx_dropped / (rx_packets + rx_dropped)         |
/// | probe_loss_ratio     | ratio, [0, 1]     | probes_lost / probes_sent                      |
/// | busiest_core_ratio   | ratio, [0, 1]     | busy share of the busiest CPU core             |
/// | host_cpu_ratio       | ratio, [0, 1]     | busy share of all CPUs                         |
///
/// A window whose denominator is zero (no packets, no probes, zero duration) has no value for
/// that metric; it still counts for the others.
enum class Metric : uint8_t {
  kRxThroughputBps,
  kTxThroughputBps,
  kRttMeanSeconds,
  kRttP99Seconds,
  kRxDropRatio,
  kProbeLossRatio,
  kBusiestCoreRatio,
  kHostCpuRatio,
};

/// Number of metrics in the catalogue; Metric values are 0..kMetricCount-1.
inline constexpr size_t kMetricCount = 8;

/// Every metric, in catalogue order.
inline constexpr std::array<Metric, kMetricCount> kAllMetrics = {
    Metric::kRxThroughputBps,  Metric::kTxThroughputBps, Metric::kRttMeanSeconds,
    Metric::kRttP99Seconds,    Metric::kRxDropRatio,     Metric::kProbeLossRatio,
    Metric::kBusiestCoreRatio, Metric::kHostCpuRatio};

/// The physical kind of a metric's values, which decides parsing and formatting.
enum class MetricUnit : uint8_t {
  kBitsPerSecond,  ///< throughput, bit/s, >= 0
  kSeconds,        ///< time, s, >= 0
  kRatio,          ///< share, [0, 1]
};

/// The snake_case name used in documents, reports and the API ("rx_throughput_bps").
std::string_view MetricName(Metric metric);

/// The unit of a metric's values.
MetricUnit UnitOf(Metric metric);

/// True for throughput, where larger values are better; false for RTT, drops, loss and CPU.
bool HigherIsBetter(Metric metric);

/// Parses a catalogue name (exact, case-sensitive). Returns InvalidArgument naming the input
/// and listing the catalogue otherwise.
absl::StatusOr<Metric> ParseMetric(std::string_view name);

/// Parses a value of `metric` as written in documents (e.g. a guardrail threshold):
///  - any metric: a plain non-negative decimal number in the base unit ("0.05", "2e8");
///  - seconds: also a number with a unit ns, us, µs, ms or s ("20ms", "1.5 ms");
///  - ratios: also a percentage ("5%");
///  - throughput: also a number with bit/s, kbit/s, Mbit/s or Gbit/s ("100Mbit/s", SI
///    factors of 1000).
/// Returns the value in the base unit (bit/s, s, ratio). Errors (InvalidArgument, naming the
/// input and the metric): malformed text, a unit that does not fit the metric, a negative
/// value, a ratio above 1, a non-finite value.
absl::StatusOr<double> ParseMetricValue(Metric metric, std::string_view text);

/// Formats a value for tables with 4 significant digits and a readable unit:
/// throughput in bit/s, kbit/s, Mbit/s or Gbit/s ("613.2 Mbit/s"); seconds in µs, ms or s
/// ("2.330 ms"); ratios as percent ("3.800 %"). Non-finite values print as "n/a".
std::string FormatMetricValue(Metric metric, double value);

/// Like FormatMetricValue with an explicit sign, for differences ("+389.0 Mbit/s",
/// "-1.040 ms"; ratios in percentage points: "+81.90 pp").
std::string FormatMetricDelta(Metric metric, double delta);

}  // namespace rxfleet::experiments
