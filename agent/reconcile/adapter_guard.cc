#include "agent/reconcile/adapter_guard.h"

namespace rxfleet::agent {

bool ReenumerationLoopDetector::OnAppearance(absl::Time now) {
  times_.push_back(now);
  while (!times_.empty() && times_.front() <= now - policy_.window) times_.pop_front();
  if (quarantined_ || static_cast<int>(times_.size()) <= policy_.count) return false;
  quarantined_ = true;
  return true;
}

bool ReenumerationLoopDetector::MaybeRelease(absl::Time now) {
  if (!quarantined_ || now < release_at()) return false;
  quarantined_ = false;
  times_.clear();
  return true;
}

absl::Time ReenumerationLoopDetector::release_at() const {
  if (!quarantined_ || times_.empty()) return absl::InfiniteFuture();
  return times_.back() + policy_.window;
}

void IoBurstTracker::OnFailure(std::string_view reason) {
  if (!active()) reason_ = std::string(reason);
  ++count_;
}

void IoBurstTracker::OnFailedTransfers(std::string_view reason, uint64_t count) {
  if (count == 0) return;
  if (!active()) reason_ = std::string(reason);
  transfers_ += static_cast<int>(count);
}

std::optional<IoBurst> IoBurstTracker::OnSuccess(absl::Time wall_now) {
  if (!active()) return std::nullopt;
  IoBurst burst;
  burst.reason = reason_;
  const auto [name, value] = ErrnoForFailureReason(reason_);
  burst.errno_name = std::string(name);
  burst.errno_value = value;
  burst.count = transfers_ > 0 ? transfers_ : count_;
  burst.ended = wall_now;
  count_ = 0;
  transfers_ = 0;
  reason_.clear();
  return burst;
}

std::pair<std::string_view, int> ErrnoForFailureReason(std::string_view reason) {
  if (reason == "timeout") return {"ETIMEDOUT", -110};
  if (reason == "io") return {"EPROTO", -71};
  if (reason == "stall") return {"EPIPE", -32};
  if (reason == "no_device") return {"ENODEV", -19};
  if (reason == "permission_denied") return {"EACCES", -13};
  return {"", 0};
}

}  // namespace rxfleet::agent
