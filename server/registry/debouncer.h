#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rxfleet::server {

/// Paces runs of an action that publishes changes: a change after a quiet spell is acted on at
/// once, and a burst of changes is folded so that runs start at least `delay` apart.
///
/// A Trigger() when no run is scheduled schedules one at max(now, start of the last run +
/// `delay`); every Trigger() before that run starts is folded into it. So the first change
/// after `delay` without a run starts a run immediately (no waiting for more changes to come),
/// a burst of changes within one `delay` costs at most two runs (the first change's, then one
/// `delay` later for the rest), changes spread over a time T cost at most 1 + T / `delay` runs,
/// and no change waits longer than `delay` (plus the running action) to be acted on.
/// A Trigger() while the action runs schedules one more run, `delay` after the running one
/// started (at once after it returns, if it took longer).
///
/// The action runs on the debouncer's own thread, never concurrently with itself. The
/// destructor stops the thread after a running action returns; a scheduled run that has not
/// started is dropped.
class Debouncer {
 public:
  /// `delay` is clamped to [0, 1 min]. `action` may call Trigger(); that schedules another run.
  Debouncer(absl::Duration delay, std::function<void()> action);
  ~Debouncer();
  Debouncer(const Debouncer&) = delete;
  Debouncer& operator=(const Debouncer&) = delete;

  /// Schedules a run, at once after a quiet spell (see the class comment). Thread-safe, never
  /// blocks on the action.
  void Trigger();

  /// Number of completed action runs.
  uint64_t runs() const;

 private:
  void Loop();

  const absl::Duration delay_;
  const std::function<void()> action_;
  mutable absl::Mutex mu_;
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time due_ ABSL_GUARDED_BY(mu_);
  absl::Time last_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace rxfleet::server
