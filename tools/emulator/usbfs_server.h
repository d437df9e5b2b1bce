#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/emulator/device_model.h"

typedef struct _UMockdevTestbed UMockdevTestbed;
typedef struct _UMockdevIoctlBase UMockdevIoctlBase;
typedef struct _UMockdevIoctlClient UMockdevIoctlClient;

namespace rxfleet::emulator {

/// What the usbfs server needs from the emulator core. Called on umockdev's ioctl worker
/// thread; implementations must be thread-safe.
class DeviceRouter {
 public:
  virtual ~DeviceRouter() = default;

  /// The device currently enumerated at `devnode` ("/dev/bus/usb/BBB/DDD"): its index and
  /// incarnation. False if none is plugged there.
  virtual bool Resolve(const std::string& devnode, int* device, uint64_t* incarnation) = 0;

  /// True while the device is plugged in the same incarnation.
  virtual bool Alive(int device, uint64_t incarnation) = 0;

  /// Serves a control transfer (see EmulatedDevice::HandleControl).
  virtual ControlOutcome Control(int device, uint64_t incarnation, const ControlSetup& setup,
                                 const std::vector<uint8_t>& out_data) = 0;

  /// Kernel driver bound to interface `number` (empty = none).
  virtual std::string InterfaceDriver(int device, uint64_t incarnation, int number) = 0;

  /// Negotiated speed in Mbit/s (for USBDEVFS_GET_SPEED and CONNECTINFO).
  virtual double Speed(int device, uint64_t incarnation) = 0;
};

/// Serves the usbfs ioctls libusb issues on /dev/bus/usb/BBB/DDD (linux/usbdevice_fs.h):
/// GET_CAPABILITIES, SUBMITURB / REAPURB(NDELAY) / DISCARDURB for control, bulk and interrupt
/// URBs, CLAIM/RELEASEINTERFACE, GETDRIVER, IOCTL(DISCONNECT/CONNECT), DISCONNECT_CLAIM,
/// SETINTERFACE, SETCONFIGURATION, CLEAR_HALT, RESET, RESETEP, CONNECTINFO, GET_SPEED; others
/// fail with ENOTTY. Each open file is bound to the device incarnation it opened: after an
/// unplug its pending URBs are reaped with -ESHUTDOWN and every later call fails with ENODEV
/// (libusb: LIBUSB_ERROR_NO_DEVICE), even if the device re-enumerates at the same node.
/// Bulk/interrupt IN URBs never complete (no data flows over the emulated endpoints); OUT URBs
/// complete at once. A claimed interface with a bound kernel driver fails with EBUSY until
/// the driver is detached through the handle (detaching is local to that open file).
class UsbfsServer {
 public:
  /// `testbed` and `router` must outlive the server.
  UsbfsServer(UMockdevTestbed* testbed, DeviceRouter* router);
  ~UsbfsServer();
  UsbfsServer(const UsbfsServer&) = delete;
  UsbfsServer& operator=(const UsbfsServer&) = delete;

  /// Starts serving `devnode` (idempotent). Must precede the device's "add" uevent.
  absl::Status Attach(const std::string& devnode);

 private:
  static int OnIoctl(UMockdevIoctlBase* handler, UMockdevIoctlClient* client, void* self);
  bool HandleIoctl(UMockdevIoctlClient* client);

  UMockdevTestbed* testbed_;
  DeviceRouter* router_;
  UMockdevIoctlBase* handler_;
  std::set<std::string> attached_;
};

}  // namespace rxfleet::emulator
