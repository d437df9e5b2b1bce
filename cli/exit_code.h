#pragma once

#include "absl/status/status.h"

namespace rxfleet::cli {

/// Exit codes of rxfleetctl (docs/CLI.md, "Exit codes").
enum ExitCode : int {
  kExitOk = 0,            ///< success (including empty results and an interrupted watch)
  kExitError = 1,         ///< server error, unreachable server or invalid input
  kExitUsage = 2,         ///< command-line usage error (unknown flag, missing argument, ...)
  kExitNotFound = 3,      ///< the named object does not exist (NOT_FOUND)
  kExitConflict = 4,      ///< stale resource version or name taken (ABORTED, ALREADY_EXISTS)
  kExitInterrupted = 130  ///< a call other than watch was cancelled by SIGINT/SIGTERM
};

/// The one place where a command's result becomes an exit code:
/// OK -> 0; NOT_FOUND -> 3; ABORTED and ALREADY_EXISTS -> 4; CANCELLED -> 130; anything else
/// (INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ...) -> 1.
/// A status made by UsageError (cli/commands/command.h) -> 2: usage errors found after
/// parsing; the command-line parser reports the others itself (exit 2).
int ExitCodeForStatus(const absl::Status& status);

}  // namespace rxfleet::cli
