#include "server/api/work_queue.h"

#include <algorithm>
#include <utility>

namespace rxfleet::server {

WorkQueue::WorkQueue(size_t threads, size_t max_backlog)
    : max_backlog_(std::max<size_t>(1, max_backlog)) {
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) {
    threads_.emplace_back([this] { Loop(); });
  }
}

WorkQueue::~WorkQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

bool WorkQueue::Submit(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || jobs_.size() >= max_backlog_) return false;
  jobs_.push_back(std::move(job));
  return true;
}

void WorkQueue::Loop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkQueue* q)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) { return q->stopping_ || !q->jobs_.empty(); },
          this));
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace rxfleet::server
