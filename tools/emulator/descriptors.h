#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/emulator/lab.h"

namespace rxfleet::emulator {

// USB descriptors of an emulated device, laid out as the kernel's sysfs `descriptors`
// attribute: the 18-byte device descriptor followed by the full configuration descriptor
// (configuration, IADs, interfaces, endpoints and, at SuperSpeed, endpoint companions).
// Formats: USB 2.0 spec 9.6.1-9.6.6, USB 3.2 spec 9.6.7, IAD ECN.

/// String descriptor indexes used by the emulated devices (0 = absent).
inline constexpr uint8_t kManufacturerIndex = 1;
inline constexpr uint8_t kProductIndex = 2;
inline constexpr uint8_t kSerialIndex = 3;

/// bMaxPacketSize0: 9 (512 bytes, as 2^9) at SuperSpeed, 64 at high/full speed, 8 at low speed.
uint8_t MaxPacketSize0(double speed_mbps);

/// The 18-byte device descriptor.
std::vector<uint8_t> DeviceDescriptor(const DeviceConfig& config);

/// The configuration descriptor with everything below it (bConfigurationValue 1).
/// Endpoints with max_packet 0 get 1024 (SuperSpeed bulk/interrupt), 512 (high-speed bulk),
/// 64 (high-speed interrupt, full speed) or 8 (low speed). MaxPower is in 8 mA units at
/// SuperSpeed and 2 mA units otherwise.
std::vector<uint8_t> ConfigurationDescriptor(const DeviceConfig& config);

/// The BOS descriptor (USB 3.2 spec 9.6.2), answered to GET_DESCRIPTOR(BOS) by devices with
/// bcdUSB >= 0x0201; empty for older devices (they STALL the request). It holds a USB 2.0
/// Extension capability (no LPM) and, when the device is SuperSpeed-capable (at any current
/// speed), a SuperSpeed USB Device Capability: wSpeedsSupported full+high+SuperSpeed (0x000e),
/// bFunctionalitySupport full speed, U1/U2 exit latencies 10 / 2047 µs (the largest U2 value
/// the field allows; the kernel only uses them when the host controller enables LPM).
std::vector<uint8_t> BosDescriptor(const DeviceConfig& config);

/// DeviceDescriptor + ConfigurationDescriptor: the sysfs `descriptors` attribute.
std::vector<uint8_t> SysfsDescriptors(const DeviceConfig& config);

/// String descriptor `index` (0 = language table with en-US 0x0409), UTF-16LE from the
/// Latin-1/ASCII string; empty if the device has no such string.
std::vector<uint8_t> StringDescriptor(const DeviceConfig& config, uint8_t index);

/// Descriptors of a Linux root hub (1d6b:0002 for USB 2, 1d6b:0003 for USB 3; bcdDevice
/// 6.01; one hub interface with its status-change interrupt endpoint 0x81).
std::vector<uint8_t> RootHubDescriptors(bool superspeed);

/// Descriptors of an external hub synthesised for deeper port paths: Genesys Logic
/// 05e3:0626 (USB 3) / 05e3:0610 (USB 2), one hub interface with interrupt endpoint 0x81.
std::vector<uint8_t> ExternalHubDescriptors(bool superspeed);

}  // namespace rxfleet::emulator
