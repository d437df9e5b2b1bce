#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rxfleet::agent {

/// A parsed kernel USB port path ("3-3", "1-1.2"): bus number and port numbers from the root hub
/// down.
struct PortPath {
  uint8_t bus = 0;
  std::vector<uint8_t> ports;

  /// Orders by bus, then port numbers lexicographically.
  friend auto operator<=>(const PortPath&, const PortPath&) = default;
};

/// Parses "B-P[.P...]" (decimal bus 1..255, 1..7 ports each 1..255). nullopt otherwise.
std::optional<PortPath> ParsePortPath(std::string_view text);

/// Formats as the kernel does: "3-3", "1-1.2".
std::string FormatPortPath(const PortPath& path);

/// Maps a sysfs port directory name to the port path of a device plugged into that port:
/// root-hub port "usbB-portX" -> "B-X"; hub port "<hub path>-portX" (e.g. "1-1-port2") ->
/// "<hub path>.X" ("1-1.2"). nullopt for anything else.
std::optional<std::string> PortPathFromPortDirName(std::string_view name);

/// Read-only view of the kernel's USB sysfs (Documentation/ABI/testing/sysfs-bus-usb) under an
/// injectable root. Devices are addressed by port path, i.e. <root>/bus/usb/devices/<port path>.
/// Methods never fail loudly: a missing or unreadable file is "not present" (nullopt or the
/// fallback documented per method). Port paths and attribute names that are not plain names
/// (empty, containing "/", or "." / "..") are refused the same way. Thread-safe (no state).
class UsbSysfs {
 public:
  /// `sysfs_root` is the sysfs mount point ("/sys"; under umockdev the preload redirects "/sys"
  /// to the testbed, so the default works there too).
  explicit UsbSysfs(std::string sysfs_root = "/sys");

  /// Stable adapter id: "port-" + canonical port path. The canonical path is the smaller (by bus
  /// number, then port numbers) of the device's own port path and its port's peer (the companion
  /// USB 2 / USB 3 port of the same physical connector; kernel port links
  /// <dev>/port -> ../B-0:1.0/usbB-portX and <port dir>/peer). Example: usb3-port3 <-> usb2-port2,
  /// so a device seen as "3-3" at high-speed and as "2-2" at SuperSpeed is "port-2-2" both times.
  /// Without a readable peer link the device's own path is used. Limitation: on hosts whose
  /// firmware does not describe peer ports, a USB 2 -> USB 3 re-enumeration yields a new id.
  std::string StableAdapterId(std::string_view port_path) const;

  /// The port path a device would have on the peer port of `port_path`'s port (see above), or
  /// nullopt if the device has no `port` link or the port has no `peer` link.
  std::optional<std::string> PeerPortPath(std::string_view port_path) const;

  /// The Wi-Fi network interface bound to the device's first interface.
  struct NetdevInfo {
    /// Interface name, e.g. "wlp0s13f0u2" (directory under <N>:1.0/net/).
    std::string name;
    /// Bound driver, basename of the <N>:1.0/driver link (e.g. "rtw89_8922au"); empty if the
    /// link cannot be read.
    std::string driver;
    /// Directory holding the interface's counters (rx_bytes, rx_packets, ...):
    /// <root>/bus/usb/devices/<N>:1.0/net/<name>/statistics.
    std::string statistics_dir;
  };

  /// The netdev under <root>/bus/usb/devices/<port path>:1.0/net/ (the alphabetically first if
  /// several), or nullopt if there is none (no driver bound, storage mode, device gone).
  std::optional<NetdevInfo> Netdev(std::string_view port_path) const;

  /// Contents of <root>/bus/usb/devices/<port path>/<attr> with surrounding whitespace trimmed,
  /// or nullopt if it cannot be read. E.g. "speed" -> "5000", "manufacturer" -> "Realtek".
  std::optional<std::string> ReadAttribute(std::string_view port_path, std::string_view attr) const;

  const std::string& root() const { return sysfs_root_; }

 private:
  std::string DeviceDir(std::string_view name) const;

  std::string sysfs_root_;
};

}  // namespace rxfleet::agent
