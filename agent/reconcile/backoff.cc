#include "agent/reconcile/backoff.h"

#include <algorithm>
#include <cmath>

namespace rxfleet::agent {
namespace {

// Token counts are fractions accumulated in floating point; a bucket refilled to exactly one
// token may hold 0.99999999. Anything this close to a whole token counts as one.
constexpr double kTokenEpsilon = 1e-6;

}  // namespace

Backoff::Backoff(BackoffPolicy policy) : policy_(policy) {
  if (policy_.initial <= absl::ZeroDuration()) policy_.initial = absl::Milliseconds(1);
  if (policy_.max < policy_.initial) policy_.max = policy_.initial;
  if (!(policy_.multiplier >= 1.0)) policy_.multiplier = 1.0;
}

absl::Duration Backoff::NextDelay() {
  const absl::Duration delay = PeekDelay();
  if (failures_ < UINT32_MAX) ++failures_;
  return delay;
}

absl::Duration Backoff::PeekDelay() const {
  // initial * multiplier^failures, computed in floating point and clamped before converting so
  // that large exponents cannot overflow.
  const double factor = std::pow(policy_.multiplier, static_cast<double>(failures_));
  const double max_factor = absl::FDivDuration(policy_.max, policy_.initial);
  if (!(factor < max_factor)) return policy_.max;
  return std::min(policy_.max, policy_.initial * factor);
}

RepairRateLimiter::RepairRateLimiter(RepairRatePolicy policy) : policy_(policy) {
  if (policy_.burst == 0) policy_.burst = 1;
  if (policy_.refill <= absl::ZeroDuration()) policy_.refill = absl::Seconds(1);
  tokens_ = policy_.burst;
}

void RepairRateLimiter::Refill(absl::Time now) {
  if (last_ == absl::InfinitePast()) {
    last_ = now;
    return;
  }
  if (now <= last_) return;
  tokens_ =
      std::min<double>(policy_.burst, tokens_ + absl::FDivDuration(now - last_, policy_.refill));
  last_ = now;
}

bool RepairRateLimiter::TryAcquire(absl::Time now) {
  Refill(now);
  if (tokens_ < 1.0 - kTokenEpsilon) return false;
  tokens_ = std::max(0.0, tokens_ - 1.0);
  return true;
}

absl::Time RepairRateLimiter::NextAvailable(absl::Time now) {
  Refill(now);
  if (tokens_ >= 1.0 - kTokenEpsilon) return now;
  return now + policy_.refill * (1.0 - tokens_);
}

}  // namespace rxfleet::agent
