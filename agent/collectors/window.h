#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/cpu_stat.h"
#include "agent/collectors/icmp_prober.h"
#include "agent/collectors/netdev_stats.h"

namespace rxfleet::agent {

/// One cumulative RTT histogram bucket.
struct RttBucket {
  /// Inclusive upper bound, seconds; the last bucket (+Inf) uses
  /// std::numeric_limits<double>::max(), as rxfleet.v1.HistogramBucket encodes it.
  double upper_bound_seconds = 0;
  /// Samples <= upper_bound_seconds.
  uint64_t cumulative_count = 0;
};

/// RTT summary of one window, seconds. All zero when count == 0.
struct RttSummary {
  uint64_t count = 0;
  double mean_seconds = 0;
  /// Nearest-rank percentiles of the window's samples.
  double p50_seconds = 0;
  double p90_seconds = 0;
  double p99_seconds = 0;
  /// Cumulative histogram over IcmpProber::RttBuckets() plus +Inf; empty when count == 0.
  std::vector<RttBucket> buckets;
};

/// Summarises raw RTT samples (seconds, any order) with nearest-rank percentiles and the
/// cumulative histogram.
RttSummary SummarizeRtt(std::vector<double> samples);

/// What one adapter did during one completed window; the unit of comparison for hold
/// experiments (throughput, RTT, busiest-core CPU).
struct AdapterWindow {
  std::string adapter_id;
  /// Wall-clock time (absl::Now()) when the window opened; for reports only, the duration is
  /// measured on the monotonic clock.
  absl::Time start_time;
  /// Window length actually measured (tick to tick), seconds.
  double duration_seconds = 0;
  /// True if the netdev statistics were readable at both window edges; the traffic fields are
  /// 0 otherwise (adapter without netdev, or it vanished during the window).
  bool has_traffic = false;
  /// Reset-corrected counter deltas over the window.
  NetdevCounters traffic;
  /// A kernel counter went backwards during the window (the deltas are corrected, but an
  /// experiment may prefer to drop the window: MetricWindow invalid_reason "counter_reset").
  bool counter_reset = false;
  /// The netdev was missing at some tick of the window (or the adapter has a netdev that was
  /// unreadable at an edge): invalid_reason "adapter_gone".
  bool netdev_missing = false;
  RttSummary rtt;
  uint64_t probes_sent = 0;
  uint64_t probes_lost = 0;
  /// Host CPU over the same window (same for every adapter); unset without two /proc/stat
  /// samples spanning the window.
  std::optional<CpuUsage> cpu;

  /// traffic.rx_bytes * 8 / duration_seconds (0 for a zero-length window).
  double RxBitsPerSecond() const;
  double TxBitsPerSecond() const;
  /// rx_dropped / (rx_packets + rx_dropped); 0 when both are 0.
  double RxDropRatio() const;
  /// probes_lost / probes_sent; 0 when nothing was sent.
  double ProbeLossRatio() const;
};

struct WindowOptions {
  /// Window length; windows close on the first sampler tick at or after start + length, so
  /// make it a multiple of the sampler interval. Default 10 s.
  absl::Duration length = absl::Seconds(10);
};

/// Collector "window": cuts the agent's measurements into consecutive windows. Register it in
/// the Sampler AFTER the netdev and cpu collectors so it sees the same tick's readings. At each
/// window close it takes the netdev totals delta, the /proc/stat delta and the prober's samples
/// (IcmpProber::TakeWindowStats) since the previous close. Exports no series of its own beyond
/// the sampler's wrapper metrics.
/// Any of the sources may be null (that part of the window stays empty). Sources must outlive
/// the tracker. Thread-safe: LastWindows() may be called from any thread.
class WindowTracker final : public Collector {
 public:
  WindowTracker(const NetdevCollector* netdev, const CpuCollector* cpu, IcmpProber* prober,
                WindowOptions options = {});

  std::string_view Name() const override { return "window"; }
  /// Opens the first window on the first call; closes (and opens the next) when due. Always OK.
  [[nodiscard]] absl::Status Collect(SteadyTime now) override;

  /// The last completed window of every adapter known at its close, keyed by adapter id;
  /// empty before the first window completes.
  std::map<std::string, AdapterWindow> LastWindows() const;
  /// The last completed window of one adapter.
  std::optional<AdapterWindow> LastWindow(std::string_view adapter_id) const;
  /// Number of completed windows; grows by one per close, so callers can tell a new window
  /// from one they already consumed.
  uint64_t completed_windows() const;

  /// Changes the window length (e.g. ServerConfig.metric_window_length). Takes effect for the
  /// window in progress: it closes at the first tick at or after its start + `length`.
  /// Non-positive lengths are ignored.
  void SetLength(absl::Duration length);

 private:
  const NetdevCollector* netdev_;
  const CpuCollector* cpu_;
  IcmpProber* prober_;
  mutable absl::Mutex mu_;
  WindowOptions options_ ABSL_GUARDED_BY(mu_);
  std::optional<SteadyTime> start_ ABSL_GUARDED_BY(mu_);
  absl::Time start_wall_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, NetdevTotals> start_totals_ ABSL_GUARDED_BY(mu_);
  std::optional<ProcStat> start_stat_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, AdapterWindow> last_ ABSL_GUARDED_BY(mu_);
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rxfleet::agent
