#pragma once

// The systemd notification protocol of both daemons (Type=notify with WatchdogSec=, see
// sd_notify(3)): READY with a STATUS line, STATUS updates, RELOADING, STOPPING and watchdog
// pings at half the interval systemd asks for. Without $NOTIFY_SOCKET every call is a no-op.
// The daemon's own loop calls PingIfDue and wakes up by NextPing(), so a stuck loop stops the
// pings and systemd restarts the daemon.
//
// Thread-safety: none; use it from the one thread that runs the daemon's main loop.

#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace rxfleet::common {

class ServiceNotifier {
 public:
  /// Reads the watchdog interval ($WATCHDOG_USEC, sd_watchdog_enabled). `now` is the loop's
  /// clock (monotonic or wall, the same as later calls use); the first ping is due at `now`.
  explicit ServiceNotifier(absl::Time now);

  /// "READY=1" with "STATUS=<status>" (status may be empty: no STATUS line).
  void Ready(std::string_view status);
  /// "STATUS=<status>", sent only when it differs from the last status sent.
  void SetStatus(std::string_view status);
  /// "RELOADING=1" before a reload; ReloadDone sends "READY=1" after it.
  void Reloading();
  void ReloadDone();
  /// "STOPPING=1".
  void Stopping();

  /// True if systemd asked for watchdog pings.
  bool watchdog() const { return watchdog_; }
  /// Half of systemd's watchdog interval; InfiniteDuration without a watchdog.
  absl::Duration ping_interval() const { return ping_interval_; }
  /// Sends "WATCHDOG=1" if a ping is due at `now` and schedules the next one.
  void PingIfDue(absl::Time now);
  /// When the next ping is due (InfiniteFuture without a watchdog).
  absl::Time NextPing() const { return next_ping_; }

 private:
  bool watchdog_ = false;
  absl::Duration ping_interval_ = absl::InfiniteDuration();
  absl::Time next_ping_ = absl::InfiniteFuture();
  std::string status_;
};

}  // namespace rxfleet::common
