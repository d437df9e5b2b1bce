#include "cli/exit_code.h"

#include "cli/commands/command.h"

namespace rxfleet::cli {

int ExitCodeForStatus(const absl::Status& status) {
  if (!status.ok() && IsUsageError(status)) return kExitUsage;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kAlreadyExists:
      return kExitConflict;
    case absl::StatusCode::kCancelled:
      return kExitInterrupted;
    default:
      return kExitError;
  }
}

}  // namespace rxfleet::cli
