#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace rxfleet::agent {

/// When an adapter that re-enumerates too often is quarantined.
struct ReenumerationLoopPolicy {
  /// Quarantine when the adapter appears more than `count` times within `window` on one
  /// connector (id); released once it has stayed put (no new appearance) for `window`.
  /// Field case: a vendor driver in a USB 2 port re-plugging an adapter every ~2.8 s for ever
  /// ("Runtime PM usage count underflow!", device numbers 15 -> 16 -> 17, morrownr/USB-WiFi#458).
  int count = 5;
  absl::Duration window = absl::Seconds(30);
};

/// Counts the appearances (enumerations) of one adapter and decides its quarantine. Pure: the
/// caller passes monotonic times.
class ReenumerationLoopDetector {
 public:
  explicit ReenumerationLoopDetector(ReenumerationLoopPolicy policy) : policy_(policy) {}

  /// Records an appearance at `now`; returns true when this one starts a quarantine.
  bool OnAppearance(absl::Time now);
  /// Ends the quarantine if the adapter stayed put for the window; returns true when it ended.
  bool MaybeRelease(absl::Time now);
  bool quarantined() const { return quarantined_; }
  /// When MaybeRelease will release it (InfiniteFuture when not quarantined).
  absl::Time release_at() const;
  /// Appearances within the window up to the last one.
  int recent() const { return static_cast<int>(times_.size()); }

 private:
  ReenumerationLoopPolicy policy_;
  std::deque<absl::Time> times_;
  bool quarantined_ = false;
};

/// One burst of consecutive failed transfers that ended with a successful pass.
struct IoBurst {
  /// Failure reason word of the burst's first failure ("timeout", "io", "stall", ...).
  std::string reason;
  /// The kernel errno the reason stands for ("ETIMEDOUT" -110 for timeout, "EPROTO" -71 for
  /// io, "EPIPE" -32 for stall; "" when there is no one-to-one errno).
  std::string errno_name;
  int errno_value = 0;
  /// Failed transfers in the burst (attempts a retry recovered included), or failed passes when
  /// the register access cannot count transfers (>= 1).
  int count = 0;
  /// Wall-clock time the burst ended (the first successful pass).
  absl::Time ended = absl::UnixEpoch();

  friend bool operator==(const IoBurst&, const IoBurst&) = default;
};

/// Tracks consecutive failures of one adapter. A failure extends the burst; the next success
/// ends it and yields it once, so a burst is one event, never drift.
class IoBurstTracker {
 public:
  /// A pass failed with `reason`.
  void OnFailure(std::string_view reason);
  /// A pass saw `count` failed transfer attempts (the last with `reason`), failed or not.
  void OnFailedTransfers(std::string_view reason, uint64_t count);
  /// The burst that this success ends, if any.
  std::optional<IoBurst> OnSuccess(absl::Time wall_now);
  int failures() const { return count_; }
  bool active() const { return count_ > 0 || transfers_ > 0; }

 private:
  std::string reason_;
  int count_ = 0;      // failed passes
  int transfers_ = 0;  // failed transfer attempts
};

/// Errno name and (negative) value for a failure reason word, as the kernel's USB core logs it
/// (usb_control_msg: -110 ETIMEDOUT on a timeout, -71 EPROTO on a protocol error, which libusb
/// reports as LIBUSB_ERROR_IO, -32 EPIPE on a stall, -19 ENODEV when gone).
std::pair<std::string_view, int> ErrnoForFailureReason(std::string_view reason);

}  // namespace rxfleet::agent
