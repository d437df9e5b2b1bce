#pragma once

// Reading a file that must be a small regular file (policy files, the agent's persisted
// bundle) without trusting what sits at the path: opened non-blocking (a FIFO never hangs the
// reader), refused unless regular, refused above a size cap before anything is read, and every
// failure named with the OS reason.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace rxfleet::common {

/// The contents of `path`, at most `max_bytes`. Errors, each naming the path:
///  - NotFound ("<path>: cannot open: No such file or directory") if it does not exist;
///  - PermissionDenied ("<path>: cannot open: Permission denied") for EACCES/EPERM;
///  - Internal ("<path>: cannot open: <strerror>") for other open errors;
///  - FailedPrecondition ("<path> is not a regular file") for FIFOs, directories, devices;
///  - OutOfRange ("<path> has N bytes, more than M") above `max_bytes`;
///  - DataLoss ("<path>: read error: <strerror>") when reading fails.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);

}  // namespace rxfleet::common
