#pragma once

// Admission control of new agent streams, for connection storms (a server restart makes every
// agent of the fleet reconnect at once): a token bucket limits how fast new streams are
// accepted, and a cap bounds the streams one replica holds (connected plus Hello-pending). A
// stream beyond either is refused before any per-stream state exists, with a retry hint the
// agent honours (common/retry_after.h), so a storm becomes an orderly queue instead of
// thousands of Hellos competing with the FleetService API for the server's threads.
//
// Retry hints. Rate limit: the time until the token for this client is earned, counting the
// tokens already promised to clients refused before it (so N refused clients are told to come
// back spread over N / rate seconds, not all at the next token), plus a random fraction of one
// token's time; promises reach at most max_retry_after ahead. Stream cap: cap_retry_after
// times a random factor in [1, 2].

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rxfleet::server {

struct AdmissionOptions {
  /// New agent streams accepted per second, on average (token bucket refill). > 0.
  double accept_rate = 1000;
  /// Streams accepted back to back after a quiet period (bucket size). >= 1.
  size_t accept_burst = 500;
  /// Agent streams open at once (said Hello or still pending one). >= 1.
  size_t max_streams = 50000;
  /// Base retry hint for streams refused by the cap (the hint is this times [1, 2]). > 0.
  absl::Duration cap_retry_after = absl::Seconds(30);
  /// Longest retry hint given. > 0.
  absl::Duration max_retry_after = absl::Minutes(5);
};

/// InvalidArgument naming the option when `options` break the ranges above.
absl::Status ValidateAdmissionOptions(const AdmissionOptions& options);

/// Why a stream was refused; also the `reason` label of rxfleet_server_streams_refused_total.
inline constexpr char kRefusedAcceptRate[] = "accept_rate";
inline constexpr char kRefusedMaxStreams[] = "max_agent_streams";

struct AdmissionDecision {
  bool admitted = false;
  /// When refused: kRefusedAcceptRate or kRefusedMaxStreams.
  std::string reason;
  /// When refused: for the client, naming the bound and its flag.
  std::string message;
  /// When refused: how long the client should wait (> 0, <= max_retry_after).
  absl::Duration retry_after;
};

/// Thread-safe. Every admitted stream holds one slot until Release().
class Admission {
 public:
  /// `options` must be valid (ValidateAdmissionOptions). The bucket starts full.
  explicit Admission(AdmissionOptions options, absl::Time now = absl::Now());

  /// Admits a new stream at `now` (one token and one stream slot) or refuses it (nothing
  /// taken). Time going backwards is treated as no time passing.
  AdmissionDecision TryAdmit(absl::Time now = absl::Now());

  /// Frees the slot of an admitted stream that ended. Extra calls are ignored.
  void Release();

  /// Streams holding a slot.
  size_t streams() const;

  const AdmissionOptions& options() const { return options_; }

 private:
  void RefillLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AdmissionOptions options_;
  const absl::Duration token_time_;  // 1 / accept_rate
  mutable absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refill_ ABSL_GUARDED_BY(mu_);
  // Token production promised to refused clients runs up to here.
  absl::Time promised_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  size_t streams_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::server
