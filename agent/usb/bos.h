#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace rxfleet::agent {

/// What a device's BOS descriptor (Binary device Object Store, USB 3.2 spec 9.6.2) says about
/// SuperSpeed. A USB 3 device that linked at high-speed reports bcdUSB 0x0210 in its device
/// descriptor (USB 3.2 spec 9.6.1; e.g. hydrausb3/hydrausb3_fw#23: "bcdUSB 0x210" while the
/// host reports "device is SuperSpeed capable"), so the BOS is the only place where its
/// SuperSpeed capability shows (tianocore/edk2#11828 checks exactly this).
struct BosSpeeds {
  /// A SuperSpeed USB Device Capability (bDevCapabilityType 0x03) whose wSpeedsSupported has
  /// bit 3 (5 Gbit/s) set.
  bool superspeed = false;
  /// A SuperSpeedPlus USB Device Capability (bDevCapabilityType 0x0A) is present.
  bool superspeed_plus = false;

  friend bool operator==(const BosSpeeds&, const BosSpeeds&) = default;
};

/// Parses a complete BOS descriptor as returned by GET_DESCRIPTOR(BOS, 0): a 5-byte header
/// (bLength 5, bDescriptorType 0x0F, wTotalLength little-endian, bNumDeviceCaps) followed by
/// device capability descriptors (bLength >= 3, bDescriptorType 0x10, bDevCapabilityType).
/// Capabilities of other types are skipped. Errors: InvalidArgument for a short buffer, a wrong
/// descriptor type, a wTotalLength larger than the buffer, or a capability that runs past
/// wTotalLength or has bLength < 3.
absl::StatusOr<BosSpeeds> ParseBosDescriptor(absl::Span<const uint8_t> bytes);

}  // namespace rxfleet::agent
