#pragma once

// The lock file of an SQLite database, `<database>.lock`: the one process that may write the
// file as a server takes it (rxfleet-server, and `rxfleet-server migrate-store` while it
// copies the file), with flock(LOCK_EX), released when the process exits or closes it.
// (PostgreSQL databases use the store's advisory lock instead, StoreOptions::server_lock.)

#include <string>

#include "absl/status/statusor.h"

namespace rxfleet::server {

/// An acquired lock file; closing it (destruction) releases the lock.
class DatabaseFileLock {
 public:
  /// Takes the lock of SQLite database `db_path` without waiting (creating the lock file,
  /// mode 0600, if needed). Errors: FailedPrecondition "database P is in use by another
  /// rxfleet-server (it holds P.lock)" if another process holds it; FailedPrecondition with
  /// the system's reason if the lock file cannot be opened or locked.
  static absl::StatusOr<DatabaseFileLock> Acquire(const std::string& db_path);

  DatabaseFileLock(DatabaseFileLock&& other) noexcept;
  DatabaseFileLock& operator=(DatabaseFileLock&& other) noexcept;
  DatabaseFileLock(const DatabaseFileLock&) = delete;
  DatabaseFileLock& operator=(const DatabaseFileLock&) = delete;
  ~DatabaseFileLock();

 private:
  explicit DatabaseFileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace rxfleet::server
