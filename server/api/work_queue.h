#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace rxfleet::server {

/// A fixed pool of threads running submitted jobs in order of submission, with a bounded
/// backlog. FleetService runs its handlers here (they read the registry and write SQLite with
/// fsync), so gRPC's callback threads never block on disk.
class WorkQueue {
 public:
  /// `threads` >= 1; `max_backlog` >= 1 jobs waiting (beyond the running ones).
  WorkQueue(size_t threads, size_t max_backlog);
  /// Runs the jobs already queued, then joins the threads.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  /// Queues `job`; false (job dropped) if the backlog is full or the queue is stopping.
  bool Submit(std::function<void()> job);

 private:
  void Loop();

  const size_t max_backlog_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace rxfleet::server
