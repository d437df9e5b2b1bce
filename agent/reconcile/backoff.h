#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace rxfleet::agent {

/// Parameters of per-adapter exponential backoff after transient failures (stalls, timeouts,
/// verify mismatches, permission errors).
struct BackoffPolicy {
  /// Delay after the first failure. > 0.
  absl::Duration initial = absl::Seconds(1);
  /// Upper bound of the delay. >= initial.
  absl::Duration max = absl::Minutes(5);
  /// Growth per consecutive failure. >= 1.
  double multiplier = 2.0;
};

/// Exponential backoff of one adapter: initial, initial*m, initial*m^2, ... capped at max.
/// Deterministic (no jitter): adapters fail independently, so their retries do not align in a
/// way that would overload a shared bus. Not thread-safe.
class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy = {});

  /// Records one more consecutive failure and returns the delay before the next attempt.
  absl::Duration NextDelay();

  /// The delay NextDelay() would return now, without recording a failure.
  absl::Duration PeekDelay() const;

  /// Forgets the failures (after a success).
  void Reset() { failures_ = 0; }

  /// Consecutive failures recorded since the last Reset.
  uint32_t failures() const { return failures_; }

  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  uint32_t failures_ = 0;
};

/// Limits how often one adapter's drift is repaired, so a driver (or another tool) that keeps
/// rewriting the register does not turn the agent into a write loop: a token bucket holding up
/// to `burst` repairs, refilled with one token every `refill`. Not thread-safe.
struct RepairRatePolicy {
  /// Repairs allowed back to back. >= 1.
  uint32_t burst = 5;
  /// Time to earn one more repair. > 0.
  absl::Duration refill = absl::Minutes(1);
};

class RepairRateLimiter {
 public:
  explicit RepairRateLimiter(RepairRatePolicy policy = {});

  /// Takes one token at `now` if available. Time going backwards is treated as no time passing.
  bool TryAcquire(absl::Time now);

  /// When the next token will be available (now if one is available at `now`).
  absl::Time NextAvailable(absl::Time now);

 private:
  void Refill(absl::Time now);

  RepairRatePolicy policy_;
  double tokens_;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace rxfleet::agent
