#include "agent/usb/libusb_status.h"

#include <libusb.h>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {

absl::Status StatusFromLibusb(int code, std::string_view context) {
  if (code >= 0) return absl::OkStatus();
  const std::string message = absl::StrCat(
      common::ToAbslView(context), ": ", libusb_error_name(code), " (", libusb_strerror(code), ")");
  switch (code) {
    case LIBUSB_ERROR_NO_DEVICE:
    case LIBUSB_ERROR_NOT_FOUND:
      return absl::UnavailableError(message);
    case LIBUSB_ERROR_ACCESS:
      return absl::PermissionDeniedError(message);
    case LIBUSB_ERROR_TIMEOUT:
      return absl::DeadlineExceededError(message);
    case LIBUSB_ERROR_PIPE:
      return absl::FailedPreconditionError(message);
    case LIBUSB_ERROR_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    case LIBUSB_ERROR_NO_MEM:
      return absl::ResourceExhaustedError(message);
    case LIBUSB_ERROR_INVALID_PARAM:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace rxfleet::agent
