#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/sysfs/usb_sysfs.h"
#include "agent/usb/device_source.h"

struct libusb_context;
struct libusb_device;
struct libusb_device_handle;

namespace rxfleet::agent {

struct LibusbHotplugBridge;

/// DeviceSource over libusb 1.0 (Linux usbfs backend).
///
/// Enumeration uses libusb_get_device_list and the cached device descriptor; nothing is opened.
/// String descriptors come from sysfs attributes through UsbSysfs, the speed from
/// libusb_get_device_speed (sysfs `speed` when libusb reports unknown, e.g. 20000 Mbit/s on
/// libusb 1.0.26), the port path from libusb_get_bus_number + libusb_get_port_numbers.
///
/// Hotplug uses libusb_hotplug_register_callback and one event thread running
/// libusb_handle_events_timeout_completed with a short timeout until Stop. libusb may run the
/// hotplug callback on whichever thread handles events (also inside a synchronous control
/// transfer), so the callback only records the event; the event thread delivers it to the user
/// callback outside libusb's locks. Departures are described from a cache keyed by bus/devnum,
/// filled at registration (LIBUSB_HOTPLUG_ENUMERATE, not delivered) and on each arrival, since
/// the device's sysfs directory is gone by then.
///
/// Handles returned by OpenRegisterIo keep the libusb context alive, so they may outlive this
/// object, though they should be short-lived (under umockdev an open handle makes libusb poll).
class LibusbDeviceSource : public DeviceSource {
 public:
  /// How long one libusb_handle_events_timeout_completed call of the event thread waits; bounds
  /// how long Stop takes.
  static constexpr int kEventTimeoutMs = 100;

  /// Errors: Internal if libusb_init fails.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LibusbDeviceSource>> Create(
      std::string sysfs_root = "/sys");

  ~LibusbDeviceSource() override;
  LibusbDeviceSource(const LibusbDeviceSource&) = delete;
  LibusbDeviceSource& operator=(const LibusbDeviceSource&) = delete;

  [[nodiscard]] absl::StatusOr<std::vector<UsbDeviceInfo>> Enumerate() override;
  [[nodiscard]] absl::StatusOr<BosSpeeds> ReadBos(const UsbDeviceInfo& device) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<RegisterIo>> OpenRegisterIo(
      const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<RegisterIo>> OpenFamilyRegisterIo(
      const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses,
      const common::RegisterProtocol& protocol) override;
  bool SupportsHotplug() const override;
  [[nodiscard]] absl::Status StartHotplug(
      std::function<void(HotplugEvent, const UsbDeviceInfo&)> callback) override;
  void Stop() override;

 private:
  friend struct LibusbHotplugBridge;
  using DeviceKey = std::pair<uint8_t, uint8_t>;  // bus, devnum
  using Callback = std::function<void(HotplugEvent, const UsbDeviceInfo&)>;

  LibusbDeviceSource(std::shared_ptr<libusb_context> context, std::string sysfs_root);

  // The libusb device at device.bus/devnum that still is `device` (ids and port path), from
  // `list` (count entries); Unavailable if it is gone or was replaced.
  absl::StatusOr<libusb_device*> Locate(libusb_device** list, ssize_t count,
                                        const UsbDeviceInfo& device) const;
  // Locates `device` (as Locate) and opens a handle to it; the caller closes it.
  absl::StatusOr<libusb_device_handle*> OpenLocated(const UsbDeviceInfo& device) const;
  // Describes a non-hub device; nullopt for hubs and devices whose descriptor is unreadable.
  std::optional<UsbDeviceInfo> Describe(libusb_device* device) const;
  // Called by libusb (any event-handling thread) for each arrival/departure.
  void OnLibusbHotplug(libusb_device* device, bool arrived);
  void EventLoop();

  const std::shared_ptr<libusb_context> context_;
  const UsbSysfs sysfs_;

  // Serialises StartHotplug/Stop.
  absl::Mutex lifecycle_mutex_;
  bool hotplug_registered_ ABSL_GUARDED_BY(lifecycle_mutex_) = false;
  int hotplug_handle_ ABSL_GUARDED_BY(lifecycle_mutex_) = 0;
  std::thread event_thread_ ABSL_GUARDED_BY(lifecycle_mutex_);
  std::atomic<bool> stop_requested_{false};
  Callback callback_;  // set before the event thread starts, cleared after it is joined

  // Hotplug bookkeeping shared between libusb's callback and the event thread.
  absl::Mutex events_mutex_;
  bool registering_ ABSL_GUARDED_BY(events_mutex_) = false;
  std::map<DeviceKey, UsbDeviceInfo> known_ ABSL_GUARDED_BY(events_mutex_);
  std::vector<std::pair<HotplugEvent, UsbDeviceInfo>> pending_ ABSL_GUARDED_BY(events_mutex_);
};

}  // namespace rxfleet::agent
