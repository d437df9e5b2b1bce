#pragma once

// Wake-ups of configuration changes committed by other processes on the same PostgreSQL
// database, so a server re-reads its configuration (Store::LoadConfig) moments after a commit
// elsewhere instead of trusting its memory.
//
// How it learns of a change (docs/SERVER.md, "Configuration changes on PostgreSQL"):
// - every configuration write bumps the store-wide revision and, in the same transaction,
//   sends NOTIFY on channel "rxfleet_revision" with the new revision as its only payload
//   (server/store/postgres_util.h); PostgreSQL delivers it at commit, to every session
//   listening then;
// - the feed keeps one connection of its own that LISTENs (TCP keepalives on, as every store
//   connection), and reads the revision row when a notification arrives;
// - it also reads the revision every `poll_interval` (jittered), so a lost wake-up costs at
//   most one interval;
// - notifications sent while it is disconnected are lost for good, so after every (re)connect
//   it reports a resync, and the listener reloads everything rather than trusting the number.
//
// High-rate data (registry, events, metric windows, ACKs) never moves the revision.
//
// Thread-safety: the callback runs on the feed's own thread, never concurrently with itself;
// the other methods may be called from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rxfleet::server {

struct ChangeFeedOptions {
  /// libpq connection string of the database (StoreOptions.path: a postgresql:// URI).
  std::string conninfo;
  /// Longest wait between two reads of the revision without a wake-up; each wait is drawn
  /// uniformly from 75%..125% of it, so replicas do not poll in step. (0, 1 min].
  absl::Duration poll_interval = absl::Seconds(2);
  /// Reconnect attempts start 100 ms apart and double up to this (each jittered by +/-25%).
  /// [100 ms, 1 min].
  absl::Duration max_reconnect_delay = absl::Seconds(5);
  /// libpq connect_timeout of each attempt (whole seconds, at least 1).
  absl::Duration connect_timeout = absl::Seconds(5);
};

class ChangeFeed {
 public:
  /// Called with the revision just read. `resync` is true for the first read after every
  /// (re)connect, including the first connect: the listener must reload everything, whatever
  /// the number says. Otherwise it is called only when the revision differs from the last one
  /// reported. A non-OK return means the listener could not act on it: the same call (same
  /// `resync`) is made again after the next poll interval or wake-up.
  using Callback = std::function<absl::Status(uint64_t revision, bool resync)>;

  /// Starts the feed's thread, which connects on its own (failures are logged once per
  /// streak and retried). Errors: InvalidArgument for options out of range; Internal if the
  /// wake-up pipe cannot be made.
  static absl::StatusOr<std::unique_ptr<ChangeFeed>> Start(const ChangeFeedOptions& options,
                                                           Callback callback);
  /// Stop().
  ~ChangeFeed();
  /// Stops the thread (after a running callback returns) and closes the connection; no
  /// callback runs afterwards. Idempotent.
  void Stop();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  /// True while the listening connection is up.
  bool connected() const { return connected_.load(); }
  /// Successful connects so far (the first one included).
  uint64_t connects() const { return connects_.load(); }
  /// Wake-ups received (notifications read off the connection).
  uint64_t notifications() const { return notifications_.load(); }

 private:
  ChangeFeed(const ChangeFeedOptions& options, Callback callback, int wake_read, int wake_write);
  void Loop();
  // Waits up to `timeout` for the database socket `fd` (-1: none) or Stop; returns false if
  // the feed is stopping.
  bool Wait(int fd, absl::Duration timeout);

  const ChangeFeedOptions options_;
  const Callback callback_;
  const int wake_read_;
  const int wake_write_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> notifications_{0};
  absl::Mutex stop_mu_;  // one joiner at a time
  std::thread thread_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace rxfleet::server
