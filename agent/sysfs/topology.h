#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/sysfs/usb_sysfs.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {

/// One hub between the root hub and a device, as sysfs shows it.
struct HubHop {
  /// The hub's port path, e.g. "1-1" (a hub on root port 1 of bus 1).
  std::string port_path;
  /// Its negotiated speed (sysfs `speed`); kUnknown when unreadable.
  common::UsbSpeed speed = common::UsbSpeed::kUnknown;
  /// Port path of the companion port of the port this hub is plugged into (its `port/peer`
  /// link); empty when that port has no USB 3 / USB 2 partner.
  std::string upstream_peer;

  friend bool operator==(const HubHop&, const HubHop&) = default;
};

/// Where a device sits in the USB tree: the facts behind "why is this adapter at USB 2".
struct UsbTopology {
  /// The device's own port path ("3-3", "1-1.2").
  std::string port_path;
  /// Bus number and the root hub's speed (sysfs usbB/speed: 480 on a USB 2 root hub, 5000 or
  /// more on a USB 3 one); kUnknown when unreadable.
  int bus = 0;
  common::UsbSpeed root_speed = common::UsbSpeed::kUnknown;
  /// Hubs from the root hub down (root hub excluded); empty for a device on a root port.
  std::vector<HubHop> hubs;
  /// Port path of the companion port of the device's own port (UsbSysfs::PeerPortPath), empty
  /// when the connector has no USB 3 partner (a USB 2-only controller such as dwc2, a USB 2
  /// hub, or firmware that does not describe peer ports).
  std::string peer_port_path;

  /// True when the device's connector can carry SuperSpeed: it is on a SuperSpeed root hub or
  /// its port has a peer.
  bool Usb3Partner() const;

  friend bool operator==(const UsbTopology&, const UsbTopology&) = default;
};

/// Reads the topology of the device at `port_path` from sysfs: every hub prefix of the path
/// ("1-1" for "1-1.2") with its speed and upstream peer, the root hub's speed and the device's
/// own peer. Missing files give kUnknown / empty fields, never an error.
UsbTopology ReadUsbTopology(const UsbSysfs& sysfs, std::string_view port_path);

/// Basename of the driver bound to the device's first interface (<port path>:1.0/driver, e.g.
/// "rtw89_8922au"), "" when no driver is bound or the link cannot be read.
std::string BoundDriver(const UsbSysfs& sysfs, std::string_view port_path);

/// "1-1 (high-speed) > 1-1.4 (SuperSpeed)"; "" without hubs.
std::string FormatHubChain(const std::vector<HubHop>& hubs);

}  // namespace rxfleet::agent
