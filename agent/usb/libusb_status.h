#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::agent {

/// Translates a libusb return code (`enum libusb_error`, negative) into an absl::Status. This is
/// the only place libusb codes become statuses; `context` names the operation and device and is
/// prefixed to the message together with libusb's error name.
///
/// Mapping:
///  - 0 and positive values: OK.
///  - LIBUSB_ERROR_NO_DEVICE, LIBUSB_ERROR_NOT_FOUND: Unavailable (the device is gone).
///  - LIBUSB_ERROR_ACCESS: PermissionDenied.
///  - LIBUSB_ERROR_TIMEOUT: DeadlineExceeded.
///  - LIBUSB_ERROR_PIPE: FailedPrecondition (the device stalled the request).
///  - LIBUSB_ERROR_NOT_SUPPORTED: Unimplemented.
///  - LIBUSB_ERROR_NO_MEM: ResourceExhausted.
///  - LIBUSB_ERROR_INVALID_PARAM: InvalidArgument.
///  - anything else (IO, BUSY, OVERFLOW, INTERRUPTED, OTHER, unknown codes): Internal.
absl::Status StatusFromLibusb(int code, std::string_view context);

}  // namespace rxfleet::agent
