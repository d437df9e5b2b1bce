#include "server/store/database_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::server {

absl::StatusOr<DatabaseFileLock> DatabaseFileLock::Acquire(const std::string& db_path) {
  const std::string lock_path = db_path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the database lock ", lock_path, ": ", std::strerror(errno)));
  }
  DatabaseFileLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    return error == EWOULDBLOCK
               ? absl::FailedPreconditionError(absl::StrCat(
                     "database ", db_path, " is in use by another rxfleet-server (it holds ",
                     lock_path, ")"))
               : absl::FailedPreconditionError(
                     absl::StrCat("cannot lock ", lock_path, ": ", std::strerror(error)));
  }
  return lock;
}

DatabaseFileLock::DatabaseFileLock(DatabaseFileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

DatabaseFileLock& DatabaseFileLock::operator=(DatabaseFileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DatabaseFileLock::~DatabaseFileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace rxfleet::server
