#pragma once

// The failure reasons of a reconcile pass: a bounded set of machine words, shared by the
// adapter snapshots (last_failure_reason), the observers' events and the metrics
// (rxfleet_adapter_failures_total{reason}, agent/metrics/adapter_metrics.h).

#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::agent {

/// Bounded set of failure reasons, the values of rxfleet_adapter_failures_total{reason}.
/// Anything else passed to CountFailure is counted as "other".
inline constexpr std::string_view kFailureReasons[] = {
    "permission_denied",  // PermissionDenied: no access to the USB device node
    "no_device",          // Unavailable: device vanished mid-operation
    "timeout",            // DeadlineExceeded: control transfer timed out
    "stall",              // FailedPrecondition: control transfer stalled (PIPE)
    "unsupported",        // Unimplemented: operation not supported by device/backend
    "invalid_policy",     // InvalidArgument: desired settings rejected
    "verify_mismatch",    // read-back differs from what was written
    "io",                 // any other USB I/O error
    "other",
};

/// Maps a Status from the device layer to a failure reason, following the translation in
/// agent/usb/libusb_status.h: PermissionDenied -> permission_denied, Unavailable -> no_device,
/// DeadlineExceeded -> timeout, FailedPrecondition -> stall, Unimplemented -> unsupported,
/// InvalidArgument -> invalid_policy, DataLoss/Internal/Unknown -> io, anything else -> other.
/// (verify_mismatch is the caller's to choose.) OK maps to "other".
std::string_view FailureReasonFromStatus(const absl::Status& status);

}  // namespace rxfleet::agent
