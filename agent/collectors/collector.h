#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::agent {

/// Monotonic time used by every collector: sampling ticks, windows and probe timing are measured
/// on std::chrono::steady_clock so wall-clock steps (NTP, RTC-less Raspberry Pi boots) never
/// produce negative or inflated intervals.
using SteadyTime = std::chrono::steady_clock::time_point;

/// Receives one human-readable log line (no trailing newline). Collectors log a line when
/// something changes (a netdev disappears, a probe target becomes unreachable, a collector
/// starts or stops failing), never once per sample. Must be thread-safe: collectors call it from
/// the sampler and prober threads.
using LogFn = std::function<void(std::string_view line)>;

/// The default LogFn: writes "rxfleet-agent: <line>\n" to stderr (journald picks it up under
/// systemd) with a single write(2), so concurrent lines never interleave.
void LogToStderr(std::string_view line);

/// A source of metrics sampled on the sampler's schedule (node_exporter's collector pattern).
/// A collector registers its metric families in the prometheus::Registry given to its
/// constructor and updates them only from Collect(); a scrape therefore only serialises what is
/// already in the registry and never does I/O. Collectors are wrapped by Sampler, which times
/// each Collect() and reports `rxfleet_collector_success{collector=Name()}` and
/// `rxfleet_collector_duration_seconds{collector=Name()}`.
class Collector {
 public:
  virtual ~Collector() = default;

  /// Stable machine name, used as the `collector` label value ("netdev", "cpu", "window").
  /// [a-z_]+, unique among the collectors of one Sampler.
  virtual std::string_view Name() const = 0;

  /// Reads the collector's source once and updates its series. `now` is the sampler's tick time;
  /// all collectors of one tick get the same value, so deltas between collectors line up.
  /// Returns OK when the data was read, and also when the source simply is not present on this
  /// host ("not present" is no data, not an error). Returns a non-OK status only for real read
  /// or parse failures; series that could be updated are updated even then.
  /// Called from one thread at a time.
  [[nodiscard]] virtual absl::Status Collect(SteadyTime now) = 0;
};

}  // namespace rxfleet::agent
