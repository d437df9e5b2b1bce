#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rxfleet::server {

/// Folds bursts of changes into one action run. The first Trigger() after the action last
/// started schedules a run `delay` later; every Trigger() before that run starts is folded into
/// it. A Trigger() while the action runs schedules one more run, `delay` after that trigger.
/// So a change is acted on at most `delay` (plus the running action) after it happened, and a
/// burst of N changes within `delay` costs one run.
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

  /// Schedules a run (see the class comment). Thread-safe, never blocks on the action.
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
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace rxfleet::server
