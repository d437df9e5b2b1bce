#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

/// One "cpu" / "cpuN" line of /proc/stat, in USER_HZ ticks ("jiffies", 100 per second on the
/// kernels the agent supports; see proc(5)). Fields after `idle` are absent on very old kernels
/// and read as 0.
struct CpuTimes {
  uint64_t user = 0;
  uint64_t nice = 0;
  uint64_t system = 0;
  uint64_t idle = 0;
  uint64_t iowait = 0;
  uint64_t irq = 0;
  uint64_t softirq = 0;
  uint64_t steal = 0;
  /// guest and guest_nice are already included in user and nice; they are parsed but never
  /// added to the sums below.
  uint64_t guest = 0;
  uint64_t guest_nice = 0;

  /// Idle time: idle + iowait. iowait counts as idle because a core waiting for I/O is free to
  /// run other work (the kernel's own iowait accounting says so, and it can go backwards).
  uint64_t Idle() const { return idle + iowait; }
  /// Busy time: user + nice + system + irq + softirq + steal (steal is time the core was not
  /// available to this host, so it counts as not idle).
  uint64_t Busy() const { return user + nice + system + irq + softirq + steal; }
  uint64_t Total() const { return Idle() + Busy(); }

  friend bool operator==(const CpuTimes&, const CpuTimes&) = default;
};

/// The CPU lines of one /proc/stat sample.
struct ProcStat {
  /// The aggregate "cpu" line (sum over online cores).
  CpuTimes total;
  /// "cpuN" lines keyed by N. Offline cores are missing, so keys may have gaps.
  std::map<int, CpuTimes> cores;
};

/// Parses /proc/stat text. Non-CPU lines (intr, ctxt, btime, ...) are ignored.
/// InvalidArgument if there is no "cpu" line, a CPU line has fewer than 4 numbers, or a number
/// is malformed.
absl::StatusOr<ProcStat> ParseProcStat(std::string_view text);

/// Utilisation between two /proc/stat samples, ratios in [0, 1].
struct CpuUsage {
  /// Busy share of all online cores (the aggregate line): Δbusy / Δtotal.
  double host_ratio = 0;
  /// The highest per-core Δbusy / Δtotal among cores present in both samples.
  double busiest_core_ratio = 0;
  /// N of the busiest core ("cpuN"); the lowest N wins ties.
  int busiest_core = 0;
};

/// Computes CpuUsage from `before` to `after`. Per-field decreases (iowait on NO_HZ kernels,
/// a core going offline and back) count as 0 rather than negative. Cores that had no elapsed
/// ticks are skipped. FailedPrecondition if no time elapsed on the aggregate line (same sample
/// twice, or samples less than one tick apart).
absl::StatusOr<CpuUsage> ComputeCpuUsage(const ProcStat& before, const ProcStat& after);

/// CPU time of a process from /proc/<pid>/stat, in clock ticks (sysconf(_SC_CLK_TCK)).
struct ProcessCpuTicks {
  uint64_t utime = 0;  // field 14
  uint64_t stime = 0;  // field 15
};

/// Parses /proc/<pid>/stat text. The command name (field 2) may contain spaces and ')', so
/// fields are counted after the last ')'. InvalidArgument if malformed.
absl::StatusOr<ProcessCpuTicks> ParseProcPidStat(std::string_view text);

/// Parses /proc/<pid>/statm text and returns the resident set size in pages (field 2).
/// InvalidArgument if malformed.
absl::StatusOr<uint64_t> ParseStatmResidentPages(std::string_view text);

struct CpuCollectorOptions {
  /// procfs mount point; the collector reads <root>/stat, <root>/self/stat, <root>/self/statm.
  std::string procfs_root = "/proc";
  /// Clock ticks per second for /proc/self/stat (default: sysconf(_SC_CLK_TCK)).
  std::optional<long> clock_ticks_per_second;
  /// Page size for statm (default: sysconf(_SC_PAGESIZE)).
  std::optional<long> page_size_bytes;
  LogFn log = LogToStderr;
};

/// Collector "cpu": host CPU utilisation and the agent's own resource use.
///
/// Series (no labels):
///   rxfleet_host_cpu_ratio            gauge 0..1, whole host, over the last sampling interval
///   rxfleet_host_busiest_core_ratio   gauge 0..1, busiest single core over that interval
///   process_cpu_seconds_total         counter, user+system CPU seconds of this process
///   process_resident_memory_bytes     gauge, resident set size of this process
/// The two ratios appear after the second sample. Resolution is one tick per core (1% of a core
/// per second at 100 Hz), so use intervals of a second or more.
/// Collect() returns the first read/parse error; the other sources are still updated.
class CpuCollector final : public Collector {
 public:
  explicit CpuCollector(prometheus::Registry& registry, CpuCollectorOptions options = {});

  std::string_view Name() const override { return "cpu"; }
  [[nodiscard]] absl::Status Collect(SteadyTime now) override;

  /// The last /proc/stat sample, if any (used by WindowTracker for window-long utilisation).
  std::optional<ProcStat> LastProcStat() const;
  /// Utilisation over the last sampling interval, if two samples exist.
  std::optional<CpuUsage> LastUsage() const;

 private:
  CpuCollectorOptions options_;
  prometheus::Family<prometheus::Gauge>& host_ratio_family_;
  prometheus::Family<prometheus::Gauge>& busiest_core_ratio_family_;
  prometheus::Counter& process_cpu_seconds_;
  prometheus::Gauge& process_rss_bytes_;
  long ticks_per_second_;
  long page_size_;

  mutable absl::Mutex mu_;
  std::optional<ProcStat> last_stat_ ABSL_GUARDED_BY(mu_);
  std::optional<CpuUsage> last_usage_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> last_process_ticks_ ABSL_GUARDED_BY(mu_);
  // Created with the first utilisation value, so no series shows a made-up 0 before that.
  prometheus::Gauge* host_ratio_ ABSL_GUARDED_BY(mu_) = nullptr;
  prometheus::Gauge* busiest_core_ratio_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace rxfleet::agent
