#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

/// The eight netdev counters the agent reads, as found in the kernel's
/// <netdev>/statistics/{rx_bytes,...} sysfs attributes (Documentation/ABI/testing/
/// sysfs-class-net-statistics). Bytes and packets, unsigned, as the kernel reports them.
struct NetdevCounters {
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_dropped = 0;
  uint64_t rx_errors = 0;
  uint64_t tx_dropped = 0;
  uint64_t tx_errors = 0;

  friend bool operator==(const NetdevCounters&, const NetdevCounters&) = default;
};

/// The attribute file names, in NetdevCounters field order.
inline constexpr std::string_view kNetdevStatisticsFiles[] = {
    "rx_bytes",   "tx_bytes",  "rx_packets", "tx_packets",
    "rx_dropped", "rx_errors", "tx_dropped", "tx_errors"};

/// Parses one statistics attribute's contents: a decimal unsigned 64-bit integer with optional
/// surrounding whitespace (the kernel writes "1234\n"). InvalidArgument otherwise (empty,
/// negative, non-digits, overflow).
absl::StatusOr<uint64_t> ParseStatisticsValue(std::string_view text);

/// Sets the field of `counters` named by `file` (one of kNetdevStatisticsFiles) from the file's
/// contents. InvalidArgument for an unknown name or a malformed value.
absl::Status SetNetdevCounter(std::string_view file, std::string_view contents,
                              NetdevCounters& counters);

/// Reads the eight attributes from `statistics_dir`. Errors:
///  - NotFound: the directory is gone (the netdev disappeared: unplug, driver unbind, rename);
///  - InvalidArgument: an attribute is malformed (message names the file);
///  - Internal: another read error (message names the file and errno text).
absl::StatusOr<NetdevCounters> ReadNetdevStatistics(const std::string& statistics_dir);

/// Turns a raw kernel counter that may reset (driver reload, netdev re-created, 32-bit counter
/// wrap) into a monotonic total: a decrease is treated as a reset to 0, i.e. the new raw value
/// is what was counted since the reset. The total never goes backwards. Not thread-safe.
class MonotonicCounter {
 public:
  /// Feeds the next raw reading; returns how much the total grew (0 on the first reading, which
  /// only sets the baseline). `resets()` grows by one when `raw` < previous raw.
  uint64_t Update(uint64_t raw);
  /// Forgets the baseline (e.g. the netdev disappeared): the next reading is added in full,
  /// as a counter that restarted from 0.
  void Rebase();
  uint64_t total() const { return total_; }
  uint64_t resets() const { return resets_; }

 private:
  std::optional<uint64_t> last_;
  uint64_t total_ = 0;
  uint64_t resets_ = 0;
};

/// One adapter as the traffic collector sees it.
struct NetdevSource {
  /// Stable adapter id (UsbSysfs::StableAdapterId, e.g. "port-2-2"); the `adapter` label.
  std::string adapter_id;
  /// Interface name ("wlan0"); empty if the adapter has no netdev (no driver bound, storage
  /// mode, other vendor): the adapter then has no traffic series at all.
  std::string netdev;
  /// Directory holding rx_bytes etc. Empty: <sysfs_root>/class/net/<netdev>/statistics. Pass
  /// UsbSysfs::NetdevInfo::statistics_dir under the USB emulator, where the netdev lives at
  /// /sys/bus/usb/devices/<N>:1.0/net/<name>/statistics.
  std::string statistics_dir;

  friend bool operator==(const NetdevSource&, const NetdevSource&) = default;
};

/// Reset-corrected totals of one adapter since it was added to the collector.
struct NetdevTotals {
  NetdevCounters counters;
  /// True if the statistics directory was readable at the last sample.
  bool present = false;
  /// Tick time of the last successful read; unset before the first one.
  std::optional<SteadyTime> sampled_at;
  /// Kernel counter resets detected so far (sum over the eight counters).
  uint64_t resets = 0;
  /// Samples at which the adapter had a netdev configured but its statistics were unreadable
  /// (netdev gone). Lets window consumers see a gap between two readable edges.
  uint64_t missing_samples = 0;
};

/// Rates over the last sampling interval (between the last two successful reads).
struct TrafficRates {
  double interval_seconds = 0;
  double rx_bits_per_second = 0;
  double tx_bits_per_second = 0;
  /// rx_dropped / (rx_packets + rx_dropped) over the interval, 0 when both are 0.
  double rx_drop_ratio = 0;
  /// tx_dropped / (tx_packets + tx_dropped) over the interval, 0 when both are 0.
  double tx_drop_ratio = 0;
};

struct NetdevCollectorOptions {
  /// sysfs mount point used for the default statistics dir.
  std::string sysfs_root = "/sys";
  LogFn log = LogToStderr;
};

/// Collector "netdev": per-adapter traffic counters from netdev sysfs statistics.
///
/// Series (label `adapter` only; see docs/METRICS.md):
///   rxfleet_adapter_{receive,transmit}_{bytes,packets,drops,errors}_total  counters
///   rxfleet_adapter_netdev_present   gauge 1/0 (0 also for adapters without a netdev)
///   rxfleet_adapter_netdev_resets_total  counter of detected kernel counter resets
/// Counters are reset-corrected with MonotonicCounter and never go backwards.
///
/// A netdev that disappears (statistics dir NotFound): its counters keep their last values,
/// netdev_present drops to 0, one log line is written, and Collect() still returns OK (an
/// unplugged adapter is not a collector failure). When it comes back, <netdev>/ifindex decides:
/// a different ifindex is a new netdev whose counters are added in full (they started at 0);
/// the same ifindex (or none readable) continues from the last reading, a decrease counting as
/// a reset. Other read errors make Collect() return the first error (after updating every other
/// adapter).
///
/// Thread-safe: SetAdapters/UpsertAdapter/RemoveAdapter may be called from any thread while the
/// sampler runs Collect().
class NetdevCollector final : public Collector {
 public:
  explicit NetdevCollector(prometheus::Registry& registry, NetdevCollectorOptions options = {});

  std::string_view Name() const override { return "netdev"; }
  [[nodiscard]] absl::Status Collect(SteadyTime now) override;

  /// Replaces the whole adapter set: adapters not in `sources` are removed (their series are
  /// deleted), new ones added, changed ones updated as by UpsertAdapter.
  void SetAdapters(const std::vector<NetdevSource>& sources);
  /// Adds an adapter or updates its netdev/statistics dir. Totals continue across an update;
  /// a changed statistics dir is read as a new counter source (no negative delta).
  void UpsertAdapter(const NetdevSource& source);
  /// Removes the adapter and deletes its series. Unknown ids are ignored.
  void RemoveAdapter(std::string_view adapter_id);

  /// Totals of every known adapter, keyed by adapter id.
  std::map<std::string, NetdevTotals> Totals() const;
  /// Rates between the last two successful reads of `adapter_id`; nullopt before two reads,
  /// for unknown adapters and adapters without a netdev.
  std::optional<TrafficRates> LastRates(std::string_view adapter_id) const;

 private:
  struct Series {
    prometheus::Counter* rx_bytes = nullptr;
    prometheus::Counter* tx_bytes = nullptr;
    prometheus::Counter* rx_packets = nullptr;
    prometheus::Counter* tx_packets = nullptr;
    prometheus::Counter* rx_dropped = nullptr;
    prometheus::Counter* rx_errors = nullptr;
    prometheus::Counter* tx_dropped = nullptr;
    prometheus::Counter* tx_errors = nullptr;
    prometheus::Counter* resets = nullptr;
  };
  struct Adapter {
    NetdevSource source;
    std::string dir;  // resolved statistics dir; empty without netdev
    MonotonicCounter counters[8];
    NetdevTotals totals;
    std::optional<TrafficRates> rates;
    bool reported_missing = false;
    std::optional<uint64_t> ifindex;  // of the netdev last read, if <netdev>/ifindex exists
    prometheus::Gauge* present = nullptr;
    std::optional<Series> series;  // created on the first successful read
  };

  std::string ResolveDir(const NetdevSource& source) const;
  void AddSeries(Adapter& adapter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveSeries(Adapter& adapter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpsertLocked(const NetdevSource& source) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  NetdevCollectorOptions options_;
  prometheus::Family<prometheus::Counter>& rx_bytes_;
  prometheus::Family<prometheus::Counter>& tx_bytes_;
  prometheus::Family<prometheus::Counter>& rx_packets_;
  prometheus::Family<prometheus::Counter>& tx_packets_;
  prometheus::Family<prometheus::Counter>& rx_dropped_;
  prometheus::Family<prometheus::Counter>& rx_errors_;
  prometheus::Family<prometheus::Counter>& tx_dropped_;
  prometheus::Family<prometheus::Counter>& tx_errors_;
  prometheus::Family<prometheus::Counter>& resets_;
  prometheus::Family<prometheus::Gauge>& present_;

  mutable absl::Mutex mu_;
  std::map<std::string, Adapter, std::less<>> adapters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::agent
