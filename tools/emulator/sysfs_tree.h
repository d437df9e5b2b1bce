#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tools/emulator/lab.h"
#include "tools/emulator/traffic_model.h"

typedef struct _UMockdevTestbed UMockdevTestbed;

namespace rxfleet::emulator {

// The sysfs (and /dev) tree of the emulated USB topology inside a umockdev testbed, laid out
// as Linux does (the layout the agent reads; docs/EMULATOR.md "sysfs layout"):
//   /sys/devices/pci0000:00/0000:00:14.0                      xHCI controller (pci)
//     usbB                                                    root hub, 1d6b:0002/0003
//       B-0:1.0/usbB-portX                                    root hub ports
//       B-P                                                   device (port -> its port dir)
//         B-P:1.N                                             interfaces (driver link)
//           net/<netdev>/statistics/...                       netdev of the Wi-Fi driver
//       B-H/B-H:1.0/B-H-portX                                 synthesised hub ports
// /sys/bus/usb/devices/<name> and /sys/class/net/<netdev> link to them (umockdev makes these
// links), device nodes are /dev/bus/usb/BBB/DDD. Port directories carry `peer` links both
// ways and a `device` link while a device is plugged.
class SysfsTree {
 public:
  /// `testbed` must outlive this object.
  explicit SysfsTree(UMockdevTestbed* testbed);

  /// Creates the controller, root hubs, hubs, port directories and peer links. `peers` lists
  /// ("B-P", "B-P") port pairs. Errors: Internal on filesystem/umockdev failure,
  /// InvalidArgument if a port would get two different peers.
  absl::Status Build(const Topology& topology,
                     const std::vector<std::pair<std::string, std::string>>& peers);

  /// Adds a device (interfaces, netdev, then the device itself, so that the device's "add"
  /// uevent comes last and everything below it already exists).
  absl::Status AddDevice(const DeviceConfig& config, int ifindex, const NetdevCounters& counters);

  /// Sends "remove" uevents (netdev, interfaces, device) and removes the device's tree.
  absl::Status RemoveDevice(const DeviceConfig& config);

  /// Rewrites net/<netdev>/statistics/* (each file replaced atomically).
  absl::Status WriteNetdevStatistics(const DeviceConfig& config, const NetdevCounters& counters);

  /// "/sys/devices/.../usbB/B-P" for a device at bus/port.
  static std::string DeviceSyspath(int bus, const std::string& port);
  /// The port directory (syspath) of port path `port` on `bus`.
  static std::string PortSyspath(int bus, const std::string& port);

  /// Absolute on-disk path of a syspath inside the testbed.
  std::string Disk(const std::string& syspath) const;

 private:
  absl::Status AddFromString(const std::string& text);
  absl::Status Symlink(const std::string& target, const std::string& link_syspath);
  absl::Status WriteFile(const std::string& syspath, const std::string& contents);
  absl::Status EnsureDriver(const std::string& driver);
  std::string InterfaceSyspath(const DeviceConfig& config, int number) const;

  UMockdevTestbed* testbed_;
  std::string root_;
};

}  // namespace rxfleet::emulator
