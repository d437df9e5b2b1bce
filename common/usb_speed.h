#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace rxfleet::common {

/// Negotiated USB link speed of an adapter, in the order of the USB specifications.
/// Values mirror libusb's `enum libusb_speed` (LIBUSB_SPEED_UNKNOWN..LIBUSB_SPEED_SUPER_PLUS)
/// and the kernel's sysfs `speed` attribute (Mbit/s: 1.5, 12, 480, 5000, 10000, 20000).
enum class UsbSpeed : uint8_t {
  kUnknown = 0,
  kLow,        ///< 1.5 Mbit/s (USB 1.x low-speed)
  kFull,       ///< 12 Mbit/s (USB 1.x full-speed)
  kHigh,       ///< 480 Mbit/s (USB 2 high-speed)
  kSuper,      ///< 5 Gbit/s (USB 3 SuperSpeed)
  kSuperPlus,  ///< 10 or 20 Gbit/s (USB 3.1+/3.2 SuperSpeed+)
};

/// Machine name used in policies, metrics labels and selectors:
/// "unknown", "low", "full", "high", "super", "super_plus".
std::string_view UsbSpeedName(UsbSpeed speed);

/// Human name for tables and messages: "unknown speed", "low-speed", "full-speed",
/// "high-speed", "SuperSpeed", "SuperSpeed+".
std::string_view UsbSpeedDisplayName(UsbSpeed speed);

/// Parses a machine name as returned by UsbSpeedName (case-insensitive; "superplus" and
/// "super-plus" are accepted as spellings of "super_plus"). "unknown" is accepted and yields
/// kUnknown. Returns InvalidArgument naming the input and the accepted names otherwise.
absl::StatusOr<UsbSpeed> ParseUsbSpeed(std::string_view name);

/// Maps the Linux sysfs `speed` attribute (/sys/bus/usb/devices/*/speed, Mbit/s as text:
/// "1.5", "12", "480", "5000", "10000", "20000"; surrounding whitespace ignored) to a UsbSpeed.
/// Anything else yields kUnknown.
UsbSpeed UsbSpeedFromSysfs(std::string_view mbps);

/// True for USB 3 links: SuperSpeed and SuperSpeed+.
bool IsUsb3(UsbSpeed speed);

}  // namespace rxfleet::common
