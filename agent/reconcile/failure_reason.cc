#include "agent/reconcile/failure_reason.h"

namespace rxfleet::agent {

std::string_view FailureReasonFromStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kPermissionDenied:
      return "permission_denied";
    case absl::StatusCode::kUnavailable:
      return "no_device";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    case absl::StatusCode::kFailedPrecondition:
      return "stall";
    case absl::StatusCode::kUnimplemented:
      return "unsupported";
    case absl::StatusCode::kInvalidArgument:
      return "invalid_policy";
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      return "io";
    default:
      return "other";
  }
}

}  // namespace rxfleet::agent
