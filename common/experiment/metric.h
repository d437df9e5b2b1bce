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
/// Probe metrics come from the window's active iperf3 probe (MetricWindow.probe, run when the
/// experiment has a probe, ExperimentSpec.probe) and have a value only when it ran to the end
/// (ok) and its spec fits the metric:
///
/// | metric                   | unit          | per-window definition                      |
/// |--------------------------|---------------|--------------------------------------------|
/// | probe_rx_throughput_bps  | bit/s         | throughput_bps of a REVERSE probe          |
/// | probe_tx_throughput_bps  | bit/s         | throughput_bps of a FORWARD probe          |
/// | probe_udp_loss_ratio     | ratio, [0, 1] | udp_loss_ratio of a UDP probe              |
/// | probe_udp_jitter_seconds | s             | udp_jitter_seconds of a UDP probe          |
/// | probe_tcp_retransmits    | count         | retransmits of a TCP probe (per probe)     |
///
/// A window whose denominator is zero (no packets, no probes, zero duration) has no value for
/// that metric, nor a window without a probe or with a failed one for the probe metrics; it
/// still counts for the others.
enum class Metric : uint8_t {
  kRxThroughputBps,
  kTxThroughputBps,
  kRttMeanSeconds,
  kRttP99Seconds,
  kRxDropRatio,
  kProbeLossRatio,
  kBusiestCoreRatio,
  kHostCpuRatio,
  kProbeRxThroughputBps,
  kProbeTxThroughputBps,
  kProbeUdpLossRatio,
  kProbeUdpJitterSeconds,
  kProbeTcpRetransmits,
};

/// Number of metrics in the catalogue; Metric values are 0..kMetricCount-1.
inline constexpr size_t kMetricCount = 13;

/// Every metric, in catalogue order.
inline constexpr std::array<Metric, kMetricCount> kAllMetrics = {
    Metric::kRxThroughputBps,      Metric::kTxThroughputBps,   Metric::kRttMeanSeconds,
    Metric::kRttP99Seconds,        Metric::kRxDropRatio,       Metric::kProbeLossRatio,
    Metric::kBusiestCoreRatio,     Metric::kHostCpuRatio,      Metric::kProbeRxThroughputBps,
    Metric::kProbeTxThroughputBps, Metric::kProbeUdpLossRatio, Metric::kProbeUdpJitterSeconds,
    Metric::kProbeTcpRetransmits};

/// The physical kind of a metric's values, which decides parsing and formatting.
enum class MetricUnit : uint8_t {
  kBitsPerSecond,  ///< throughput, bit/s, >= 0
  kSeconds,        ///< time, s, >= 0
  kRatio,          ///< share, [0, 1]
  kCount,          ///< events per probe (e.g. TCP retransmits), >= 0, no unit
};

/// True for the metrics of the active probe (probe_rx_throughput_bps ...
/// probe_tcp_retransmits); not probe_loss_ratio, which is the agent's passive RTT probes.
bool IsProbeMetric(Metric metric);

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
///    factors of 1000);
///  - counts: a plain number only ("50").
/// Returns the value in the base unit (bit/s, s, ratio). Errors (InvalidArgument, naming the
/// input and the metric): malformed text, a unit that does not fit the metric, a negative
/// value, a ratio above 1, a non-finite value.
absl::StatusOr<double> ParseMetricValue(Metric metric, std::string_view text);

/// Formats a value for tables with 4 significant digits and a readable unit:
/// throughput in bit/s, kbit/s, Mbit/s or Gbit/s ("613.2 Mbit/s"); seconds in µs, ms or s
/// ("2.330 ms"); ratios as percent ("3.800 %"); counts without a unit ("12.50").
/// Non-finite values print as "n/a".
std::string FormatMetricValue(Metric metric, double value);

/// Like FormatMetricValue with an explicit sign, for differences ("+389.0 Mbit/s",
/// "-1.040 ms"; ratios in percentage points: "+81.90 pp"; counts: "+3.000").
std::string FormatMetricDelta(Metric metric, double delta);

/// Formats a p-value for tables: "<0.0001" below 1e-4, else 4 decimals ("0.0213"); "n/a"
/// when not finite.
std::string FormatPValue(double p);

}  // namespace rxfleet::experiments
