#include "server/registry/debouncer.h"

#include <algorithm>
#include <utility>

namespace rxfleet::server {

Debouncer::Debouncer(absl::Duration delay, std::function<void()> action)
    : delay_(std::clamp(delay, absl::ZeroDuration(), absl::Minutes(1))),
      action_(std::move(action)),
      thread_([this] { Loop(); }) {}

Debouncer::~Debouncer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void Debouncer::Trigger() {
  absl::MutexLock lock(&mu_);
  if (scheduled_) return;  // folded into the scheduled run
  scheduled_ = true;
  due_ = std::max(absl::Now(), last_start_ + delay_);
}

uint64_t Debouncer::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

void Debouncer::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](Debouncer* d)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) { return d->stopping_ || d->scheduled_; },
        this));
    if (stopping_) return;
    // Wait for the due time; only stopping ends the wait early.
    mu_.AwaitWithDeadline(absl::Condition(&stopping_), due_);
    if (stopping_) return;
    scheduled_ = false;  // triggers from now on schedule the next run
    last_start_ = absl::Now();
    mu_.Unlock();
    action_();
    mu_.Lock();
    ++runs_;
  }
}

}  // namespace rxfleet::server
