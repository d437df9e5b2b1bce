#include "server/store/lease_keeper.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/log.h"
#include "server/store/records.h"

namespace rxfleet::server {

absl::StatusOr<std::unique_ptr<LeaseKeeper>> LeaseKeeper::Start(Store* store,
                                                                LeaseKeeperOptions options) {
  if (absl::Status s =
          store_records::ValidateLeaseRequest(options.name, options.holder, options.ttl);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<LeaseKeeper> keeper(new LeaseKeeper(store, std::move(options)));
  keeper->Attempt();
  absl::MutexLock lock(&keeper->stop_mu_);
  keeper->thread_ = std::thread([k = keeper.get()] { k->Loop(); });
  return keeper;
}

LeaseKeeper::LeaseKeeper(Store* store, LeaseKeeperOptions options)
    : store_(store), options_(std::move(options)) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

std::optional<LeaseFence> LeaseKeeper::Fence() const {
  absl::MutexLock lock(&mu_);
  if (!fence_.has_value() || absl::Now() >= deadline_) return std::nullopt;
  return fence_;
}

std::optional<Lease> LeaseKeeper::last_seen() const {
  absl::MutexLock lock(&mu_);
  return last_seen_;
}

void LeaseKeeper::Attempt() {
  const absl::Time sent = absl::Now();
  absl::StatusOr<Lease> lease = store_->AcquireLease(options_.name, options_.holder, options_.ttl);
  absl::MutexLock lock(&mu_);
  const bool was_held = fence_.has_value() && sent < deadline_;
  if (!lease.ok()) {
    fence_.reset();  // the job stops at once: the lease may be gone by now
    if (was_held || !failing_) {
      Log(LogLevel::kWarning,
          absl::StrCat("lease ", options_.name, ": ", lease.status().message(),
                       was_held ? "; its job stops until it is renewed" : "; retrying"));
    }
    failing_ = true;
    return;
  }
  failing_ = false;
  last_seen_ = *lease;
  if (lease->holder != options_.holder) {
    if (was_held) {
      Log(LogLevel::kWarning, absl::StrCat("lost lease ", options_.name, " to ", lease->holder,
                                           " (epoch ", lease->epoch, "); its job stops here"));
    }
    fence_.reset();
    return;
  }
  if (!was_held || fence_->epoch != lease->epoch) {
    Log(LogLevel::kInfo,
        absl::StrCat("took lease ", options_.name, " (epoch ", lease->epoch, "); running its job"));
  }
  fence_ = LeaseFence{options_.name, options_.holder, lease->epoch};
  // Measured from when the request left, less 10% for the two clocks' rates.
  deadline_ = sent + options_.ttl * 0.9;
}

void LeaseKeeper::Loop() {
  const absl::Duration interval = options_.ttl / 3;
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval);
    if (stopping_) break;
    mu_.Unlock();
    Attempt();
    mu_.Lock();
  }
}

void LeaseKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  {
    absl::MutexLock lock(&stop_mu_);
    if (thread_.joinable()) thread_.join();
  }
  std::optional<LeaseFence> fence;
  {
    absl::MutexLock lock(&mu_);
    fence.swap(fence_);
  }
  if (fence.has_value()) {
    if (absl::Status s = store_->ReleaseLease(*fence); !s.ok()) {
      Log(LogLevel::kWarning,
          absl::StrCat("lease ", options_.name, ": ", s.message(), "; it expires by itself"));
    }
  }
}

}  // namespace rxfleet::server
