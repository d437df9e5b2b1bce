#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/usb/bos.h"
#include "agent/usb/register_io.h"
#include "common/chips/family.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {

/// What the agent knows about one USB device without opening it.
struct UsbDeviceInfo {
  /// USB bus number (libusb_get_bus_number; sysfs `busnum`), 1..255.
  uint8_t bus = 0;
  /// Port numbers from the root hub down (libusb_get_port_numbers), e.g. {1, 2}; 1..7 entries.
  std::vector<uint8_t> port_numbers;
  /// Kernel port path, the device's sysfs name: bus + "-" + port numbers joined by ".", e.g.
  /// "3-3" or "1-1.2". Changes when the device moves between the USB 2 and USB 3 halves of a
  /// connector; use UsbSysfs::StableAdapterId for an identity that does not.
  std::string port_path;
  /// Device address on the bus (libusb_get_device_address; sysfs `devnum`), 1..127. Reused by
  /// the kernel after unplug, so (bus, devnum) identifies a device only while it is attached.
  uint8_t devnum = 0;
  uint16_t vid = 0;
  uint16_t pid = 0;
  /// bcdUSB of the device descriptor: the USB version the device supports (0x0320 for a USB 3.2
  /// adapter), NOT the negotiated speed.
  uint16_t bcd_usb = 0;
  /// bcdDevice of the device descriptor (device release number).
  uint16_t bcd_device = 0;
  /// Negotiated link speed (libusb_get_device_speed, falling back to sysfs `speed`).
  common::UsbSpeed speed = common::UsbSpeed::kUnknown;
  /// String descriptors as cached by the kernel in sysfs (`manufacturer`, `product`, `serial`),
  /// trimmed; empty when the device has none or sysfs does not show them.
  std::string manufacturer;
  std::string product;
  std::string serial;

  friend bool operator==(const UsbDeviceInfo&, const UsbDeviceInfo&) = default;
};

enum class HotplugEvent { kArrived, kLeft };

/// "arrived" / "left".
std::string_view HotplugEventName(HotplugEvent event);

/// Finds USB devices, reports their arrival and departure, and opens register access to them.
/// All methods may be called from any thread except where noted.
class DeviceSource {
 public:
  virtual ~DeviceSource();

  /// Lists the attached USB devices, hubs (bDeviceClass 9, including root hubs) excluded, in bus
  /// / port order. A device that vanishes while being listed is left out.
  /// Errors: Internal / ResourceExhausted if the OS listing itself fails.
  [[nodiscard]] virtual absl::StatusOr<std::vector<UsbDeviceInfo>> Enumerate() = 0;

  /// Opens a handle to the device described by `device` (located by bus and devnum, and checked
  /// to still have the same VID/PID and port path) and returns register access restricted to
  /// `allowed_addresses`. Destroying the RegisterIo closes the handle: keep it only while talking
  /// to the device. Never claims an interface nor detaches the kernel driver.
  /// Errors: Unavailable (device gone or replaced by another device at the same address),
  /// PermissionDenied (no access to the device node), InvalidArgument (bad allow-list, see
  /// LibusbRegisterIo::Create), Unimplemented, Internal.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<RegisterIo>> OpenRegisterIo(
      const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses) = 0;

  /// The same for an observe-only family's register protocol (rtw88, mt76; see
  /// common/chips/family.h). The returned RegisterIo refuses every write when the protocol is
  /// not writable. Default: Unimplemented.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<RegisterIo>> OpenFamilyRegisterIo(
      const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses,
      const common::RegisterProtocol& protocol);

  /// Reads the device's BOS descriptor (one standard GET_DESCRIPTOR(BOS) control transfer on a
  /// briefly opened handle; no vendor request, no interface claimed) and parses it
  /// (ParseBosDescriptor). The device is located and checked as for OpenRegisterIo.
  /// Errors: Unavailable (gone or replaced), NotFound (the device has no BOS: USB 2.0 devices
  /// with bcdUSB 0x0200 may STALL the request), InvalidArgument (malformed BOS),
  /// PermissionDenied, Unimplemented (this source cannot read descriptors; the default).
  [[nodiscard]] virtual absl::StatusOr<BosSpeeds> ReadBos(const UsbDeviceInfo& device);

  /// True if StartHotplug can work on this platform. When false, callers rescan with Enumerate
  /// periodically.
  virtual bool SupportsHotplug() const = 0;

  /// Starts delivering arrivals and departures of non-hub devices to `callback`, from an
  /// internal thread, one event at a time, in order. Devices already attached when StartHotplug
  /// is called are NOT reported: call StartHotplug first, then Enumerate, and treat kArrived as
  /// idempotent (a device arriving in between may be seen by both). For kLeft the info is the
  /// one recorded when the device was seen (string descriptors included).
  /// The callback must not block long and must not call Stop (it may call Enumerate and
  /// OpenRegisterIo).
  /// Errors: Unimplemented if !SupportsHotplug(); InvalidArgument for an empty callback;
  /// FailedPrecondition if already started;
  /// Internal if the OS refuses the registration.
  [[nodiscard]] virtual absl::Status StartHotplug(
      std::function<void(HotplugEvent, const UsbDeviceInfo&)> callback) = 0;

  /// Stops hotplug delivery and joins the internal thread; after it returns the callback is not
  /// running and will not be called again. Idempotent; a no-op if hotplug was never started.
  virtual void Stop() = 0;
};

/// Creates the libusb-backed DeviceSource. `sysfs_root` is where sysfs is mounted ("/sys";
/// under umockdev the preload redirects "/sys" to the testbed, so the default works there too);
/// it is used for string descriptors and the speed fallback.
/// Errors: Internal if libusb cannot be initialised.
[[nodiscard]] absl::StatusOr<std::unique_ptr<DeviceSource>> CreateLibusbDeviceSource(
    std::string sysfs_root = "/sys");

}  // namespace rxfleet::agent
