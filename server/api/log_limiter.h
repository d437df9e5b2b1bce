#pragma once

// Rate-limited log lines for events an outsider can trigger at will (refused agent streams,
// Hello timeouts, denied calls): without a limit, anyone who can reach the port could flood the
// log. Every event is still counted in a metric by its caller; the log keeps one line per key
// and interval, and the next line of that key says how many were suppressed.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"

namespace rxfleet::server {

class LogLimiter {
 public:
  /// At most one line per `interval` for each key, written to `sink` (default: common::Log).
  /// Keys are a small fixed set chosen by the callers (e.g. "hello_timeout"), never peer input.
  explicit LogLimiter(absl::Duration interval = absl::Seconds(10), common::LogSink sink = nullptr);

  /// Writes `message` unless a line with `key` was written less than the interval before `now`;
  /// then it only counts it. A line written after suppressed ones ends with
  /// " (N similar lines suppressed)". Returns whether a line was written. Thread-safe.
  bool Log(common::LogLevel level, std::string_view key, std::string_view message,
           absl::Time now = absl::Now());

 private:
  struct Slot {
    absl::Time last = absl::InfinitePast();
    uint64_t suppressed = 0;
  };
  const absl::Duration interval_;
  const common::LogSink sink_;
  absl::Mutex mu_;
  std::map<std::string, Slot, std::less<>> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::server
