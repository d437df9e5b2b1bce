#pragma once

// Keeps one lease of a singleton job (Store::AcquireLease) for this server process: takes it
// when it is free or expired, renews it every ttl/3, and answers Fence() for the job's writes.
//
// A job runs only while Fence() returns a value, and passes it to its writes, which the store
// checks (LeaseFence). Fence() stops answering at once when a renewal fails or is refused, and
// in any case once ttl (less 10% for clock drift) has passed since the last granted request was
// sent, so a process that is paused or cut off from the database stops the job before another
// can take the lease over. Another replica takes over within ttl + ttl/3 of the last renewal.
// On SQLite the store always grants the lease (one process per file), so the job always runs.
//
// Thread-safety: all methods may be called from any thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace rxfleet::server {

struct LeaseKeeperOptions {
  std::string name;    ///< the job's lease, e.g. "experiments"
  std::string holder;  ///< this process's replica id
  /// [kMinLeaseTtl, kMaxLeaseTtl]; renewals every ttl/3.
  absl::Duration ttl = absl::Seconds(15);
};

class LeaseKeeper {
 public:
  /// Makes the first attempt before returning (so a lone server holds its lease from the
  /// start; a failed attempt is logged and retried), then keeps trying on its own thread.
  /// Errors: InvalidArgument for options out of range (as Store::AcquireLease).
  static absl::StatusOr<std::unique_ptr<LeaseKeeper>> Start(Store* store,
                                                            LeaseKeeperOptions options);
  /// Stop().
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// The fence of the held lease; nullopt when not held (see the file comment).
  std::optional<LeaseFence> Fence() const;
  /// The lease as last read (holder may be another replica); nullopt before the first answer.
  std::optional<Lease> last_seen() const;
  /// Stops renewing and releases the lease if held, so another replica may take it at once.
  /// Idempotent.
  void Stop();

 private:
  LeaseKeeper(Store* store, LeaseKeeperOptions options);
  void Attempt();
  void Loop();

  Store* const store_;
  const LeaseKeeperOptions options_;
  mutable absl::Mutex mu_;
  std::optional<LeaseFence> fence_ ABSL_GUARDED_BY(mu_);
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<Lease> last_seen_ ABSL_GUARDED_BY(mu_);
  bool failing_ ABSL_GUARDED_BY(mu_) = false;  // a failure was logged; nothing worked since
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex stop_mu_;
  std::thread thread_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace rxfleet::server
