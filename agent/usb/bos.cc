#include "agent/usb/bos.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::agent {
namespace {

constexpr uint8_t kBosType = 0x0F;
constexpr uint8_t kDeviceCapabilityType = 0x10;
constexpr uint8_t kSuperSpeedCapability = 0x03;
constexpr uint8_t kSuperSpeedPlusCapability = 0x0A;
// wSpeedsSupported bit 3: the device supports 5 Gbit/s (USB 3.2 spec table 9-15).
constexpr uint16_t kSpeed5Gbps = 1u << 3;

}  // namespace

absl::StatusOr<BosSpeeds> ParseBosDescriptor(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < 5 || bytes[0] < 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("BOS descriptor too short: ", bytes.size(), " bytes"));
  }
  if (bytes[1] != kBosType) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a BOS descriptor: bDescriptorType ", bytes[1]));
  }
  const size_t total = static_cast<size_t>(bytes[2]) | (static_cast<size_t>(bytes[3]) << 8);
  if (total > bytes.size() || total < bytes[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("BOS wTotalLength ", total, " but ", bytes.size(), " bytes were read"));
  }
  BosSpeeds speeds;
  const int count = bytes[4];
  size_t offset = bytes[0];
  for (int i = 0; i < count && offset < total; ++i) {
    const size_t length = bytes[offset];
    if (length < 3 || offset + length > total) {
      return absl::InvalidArgumentError(
          absl::StrCat("BOS capability ", i, " at offset ", offset, " has bLength ", length));
    }
    if (bytes[offset + 1] == kDeviceCapabilityType) {
      const uint8_t type = bytes[offset + 2];
      if (type == kSuperSpeedCapability && length >= 6) {
        const uint16_t supported =
            static_cast<uint16_t>(bytes[offset + 4] | (bytes[offset + 5] << 8));
        speeds.superspeed = speeds.superspeed || (supported & kSpeed5Gbps) != 0;
      } else if (type == kSuperSpeedPlusCapability) {
        speeds.superspeed_plus = true;
      }
    }
    offset += length;
  }
  return speeds;
}

}  // namespace rxfleet::agent
