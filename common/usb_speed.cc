#include "common/usb_speed.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {

std::string_view UsbSpeedName(UsbSpeed speed) {
  switch (speed) {
    case UsbSpeed::kUnknown:
      return "unknown";
    case UsbSpeed::kLow:
      return "low";
    case UsbSpeed::kFull:
      return "full";
    case UsbSpeed::kHigh:
      return "high";
    case UsbSpeed::kSuper:
      return "super";
    case UsbSpeed::kSuperPlus:
      return "super_plus";
  }
  return "unknown";
}

std::string_view UsbSpeedDisplayName(UsbSpeed speed) {
  switch (speed) {
    case UsbSpeed::kUnknown:
      return "unknown speed";
    case UsbSpeed::kLow:
      return "low-speed";
    case UsbSpeed::kFull:
      return "full-speed";
    case UsbSpeed::kHigh:
      return "high-speed";
    case UsbSpeed::kSuper:
      return "SuperSpeed";
    case UsbSpeed::kSuperPlus:
      return "SuperSpeed+";
  }
  return "unknown speed";
}

absl::StatusOr<UsbSpeed> ParseUsbSpeed(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(ToAbslView(name)));
  if (lower == "unknown") return UsbSpeed::kUnknown;
  if (lower == "low") return UsbSpeed::kLow;
  if (lower == "full") return UsbSpeed::kFull;
  if (lower == "high") return UsbSpeed::kHigh;
  if (lower == "super") return UsbSpeed::kSuper;
  if (lower == "super_plus" || lower == "superplus" || lower == "super-plus") {
    return UsbSpeed::kSuperPlus;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown USB speed '", ToAbslView(name),
                   "' (expected one of: low, full, high, super, super_plus)"));
}

UsbSpeed UsbSpeedFromSysfs(std::string_view mbps) {
  const absl::string_view value = absl::StripAsciiWhitespace(ToAbslView(mbps));
  if (value == "1.5") return UsbSpeed::kLow;
  if (value == "12") return UsbSpeed::kFull;
  if (value == "480") return UsbSpeed::kHigh;
  if (value == "5000") return UsbSpeed::kSuper;
  if (value == "10000" || value == "20000") return UsbSpeed::kSuperPlus;
  return UsbSpeed::kUnknown;
}

bool IsUsb3(UsbSpeed speed) { return speed == UsbSpeed::kSuper || speed == UsbSpeed::kSuperPlus; }

}  // namespace rxfleet::common
