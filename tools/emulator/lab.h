#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rxfleet::emulator {

// Lab and timeline files of rxfleet-emulate: the value types they are validated into, and the
// loaders. The YAML format is documented in docs/EMULATOR.md. Every loader error is an
// InvalidArgument whose message starts with "FILE:LINE: " and names the offending field, e.g.
// "labs/x.yaml:7: devices[0].speed: expected one of 1.5, 12, 480, 5000, 10000, 20000; got 300".

/// Host class of the traffic model (calibration in docs/EMULATOR.md, traffic_model.h).
enum class HostClass { kX86, kPi5, kPi1 };

/// "x86", "pi5", "pi1".
std::string HostClassName(HostClass host_class);

/// USB endpoint transfer types, valued as bmAttributes bits 1:0 of an endpoint descriptor.
enum class EndpointType : uint8_t { kIsochronous = 1, kBulk = 2, kInterrupt = 3 };

/// One endpoint descriptor (USB 2.0 spec 9.6.6) plus, at SuperSpeed, its companion (USB 3.2
/// spec 9.6.7).
struct EndpointSpec {
  uint8_t address = 0;  ///< bEndpointAddress: bit 7 = IN, bits 3:0 = number (1..15)
  EndpointType type = EndpointType::kBulk;
  uint16_t max_packet = 0;  ///< wMaxPacketSize; 0 = default for the type and the link speed
  uint8_t interval = 0;     ///< bInterval
  uint8_t max_burst = 0;    ///< SuperSpeed companion bMaxBurst (0..15)
};

/// An interface association (IAD, USB ECN "Interface Association Descriptor") placed before
/// the interface that carries it.
struct FunctionSpec {
  uint8_t interface_count = 1;
  uint8_t function_class = 0;
  uint8_t function_subclass = 0;
  uint8_t function_protocol = 0;
};

/// One interface descriptor (alternate setting) and its endpoints.
struct InterfaceSpec {
  uint8_t number = 0;
  uint8_t alternate = 0;
  uint8_t interface_class = 0xff;
  uint8_t interface_subclass = 0xff;
  uint8_t interface_protocol = 0xff;
  std::optional<FunctionSpec> function;
  std::vector<EndpointSpec> endpoints;
  /// Kernel driver bound to this interface (sysfs `driver` link basename); empty = none.
  std::string driver;
};

/// A real network interface whose capacity follows the traffic model (docs/EMULATOR.md,
/// "Shaped netdevs"): the emulator keeps a tbf qdisc on `device` inside the network namespace
/// `netns` (/run/netns/<netns>, as `ip netns add` creates it) at
/// RxCapacityMbps(host class, speed, hold) x `scale` (the synthetic curve's capacity instead
/// when the device's TrafficSpec has one). The device is the far end of a veth pair
/// whose near end carries the netdev's name, so the qdisc limits what that interface receives
/// (a download, iperf3 -R). Needs CAP_NET_ADMIN and CAP_SYS_ADMIN (setns).
struct ShapeSpec {
  std::string netns;   ///< namespace name in /run/netns, 1..255 characters, no '/'
  std::string device;  ///< interface inside it, 1..15 characters (a netdev name)
  double scale = 1;    ///< (0, 10]: applied rate = model capacity x scale
};

/// The network interface the Wi-Fi driver registers for the adapter, and its initial
/// /sys/class/net/<name>/statistics counters.
struct NetdevSpec {
  std::string name;       ///< e.g. "wlx00e04c000001"; 1..15 characters, no '/', unique in a lab
  std::string driver;     ///< driver bound to the interface, e.g. "rtw89_8922au"
  uint8_t interface = 0;  ///< bInterfaceNumber the netdev hangs below (sysfs N:1.<interface>)
  std::string address;    ///< MAC "aa:bb:cc:dd:ee:ff"
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_dropped = 0;
  uint64_t rx_errors = 0;
  uint64_t tx_errors = 0;
  uint64_t tx_dropped = 0;
  /// A real interface shaped by the traffic model; nullopt = only the emulated sysfs netdev.
  std::optional<ShapeSpec> shape;
};

/// One point of a synthetic RX curve (TrafficSpec::synthetic_curve).
struct SyntheticCurvePoint {
  uint32_t hold_us = 0;  ///< RX aggregation hold, µs: a multiple of 32 in 0..8160
  double rx_mbps = 0;    ///< RX capacity at that hold, Mbit/s, finite, >= 0
  double loss = 0;       ///< fraction of the received traffic the host drops, 0..1
};

/// Offered load of the traffic model, Mbit/s, >= 0, and optionally a synthetic RX curve.
struct TrafficSpec {
  double offered_rx_mbps = 0;
  double offered_tx_mbps = 0;
  /// Made-up RX capacity and loss by hold, for tests of hold tuning that need an optimum
  /// between the extremes (the calibrated model is monotone in the hold); not a measurement.
  /// When non-empty it replaces the calibrated RX capacity and RX loss of the device (TX keeps
  /// the calibrated figures); traffic_model.h gives the interpolation. Empty = calibrated
  /// model. After loading: 2..32 points, hold_us strictly increasing.
  std::vector<SyntheticCurvePoint> synthetic_curve;
};

/// Everything about a device that can change when it (re-)enumerates: its USB identity,
/// location, descriptors and the netdev its driver creates.
struct DeviceConfig {
  uint16_t vid = 0;
  uint16_t pid = 0;
  /// sysfs `speed` in Mbit/s: 1.5, 12, 480, 5000, 10000 or 20000.
  double speed_mbps = 480;
  int bus = 1;       ///< 1..255
  std::string port;  ///< port path below the root hub: "2", "1.3" (each hop 1..31, <= 6 hops)
  int devnum = 2;    ///< 2..127 (1 is the root hub)
  std::string peer;  ///< "B-P" of the companion port on the other root hub; empty = none
  /// For a device behind a hub: "B-P" of the companion of the root port the hub chain hangs
  /// from (a USB 2 hub on a USB 3-capable root port); empty = none.
  std::string hub_peer;
  /// The root port the hub chain hangs from, "B-X" for port "X.Y..."; empty on a root port.
  std::string HubRootPort() const;
  uint16_t bcd_usb = 0x0210;
  bool bcd_usb_explicit = false;  ///< false: bcd_usb follows the speed (0x0320 / 0x0210)
  /// The device can run at SuperSpeed: its BOS descriptor carries a SuperSpeed USB Device
  /// Capability (USB 3.2 spec 9.6.2.2) also while it runs at high-speed, as real USB 3
  /// adapters do (they report bcdUSB 0x0210 there). Default: true once the device was seen at
  /// SuperSpeed (a lab or plug speed >= 5000), else false.
  bool superspeed_capable = false;
  bool superspeed_capable_explicit = false;
  uint16_t bcd_device = 0;
  uint8_t device_class = 0;
  uint8_t device_subclass = 0;
  uint8_t device_protocol = 0;
  std::string manufacturer;  ///< empty = no string descriptor
  std::string product;
  std::string serial;
  int max_power_ma = 500;
  bool self_powered = false;
  bool remote_wakeup = false;
  std::vector<InterfaceSpec> interfaces;  ///< never empty after loading
  std::optional<NetdevSpec> netdev;

  /// "B-P", the kernel's device name, e.g. "2-2" or "2-1.3".
  std::string SysfsName() const;
  /// "/dev/bus/usb/BBB/DDD".
  std::string DevNode() const;
  bool SuperSpeed() const { return speed_mbps >= 5000; }
};

/// One emulated adapter of a lab.
struct DeviceSpec {
  std::string name;  ///< unique; used by the timeline and the state file
  int line = 0;      ///< line of the device in the lab file
  DeviceConfig config;
  /// Initial 32-bit register values (little-endian in a byte-addressed map); unknown = 0.
  std::map<uint32_t, uint32_t> registers;
  /// RX aggregation register of the traffic model: explicit, from the rtw89 chip table by
  /// VID:PID (v1 0x8900, v2/v3 0x6000), or none (the model then assumes no hold penalty).
  std::optional<uint32_t> rx_agg_register;
  bool rx_agg_register_explicit = false;
  std::optional<TrafficSpec> traffic;
  bool asleep = false;
  /// rtw88 driver watchdog: every 2 s of child time (rtw88 main.h:118) the emulator rewrites the
  /// RX aggregation registers as rtw_usb_dynamic_rx_agg does (usb.c:902-945), by the offered
  /// traffic (>= 1 Mbit/s either way: enabled). Only for rtw88 IDs.
  bool rtw88_watchdog = false;
  /// Every register read answers 0xFFFFFFFF (what a failed mt76 driver read returns, and what a
  /// hung chip answers).
  bool read_all_ones = false;
  /// false: the device is absent when the child starts (a timeline `plug` brings it).
  bool plugged = true;
};

/// A validated lab file.
struct Lab {
  std::string path;
  HostClass host_class = HostClass::kX86;
  std::vector<DeviceSpec> devices;

  /// Index of the device called `name`, or -1.
  int FindDevice(const std::string& name) const;
};

/// Failure modes of `fail_next`.
enum class FailMode { kTimeout, kStall, kProtocolError };

enum class EventKind {
  kUnplug,
  kPlug,
  kSetRegister,
  kSleep,
  kWake,
  kFailNext,
  kAdvanceTraffic,
};

/// "unplug", "plug", "set_register", "sleep", "wake", "fail_next", "advance_traffic".
std::string EventKindName(EventKind kind);

/// One timeline entry. Only the fields of its kind are meaningful.
struct TimelineEvent {
  double at_seconds = 0;  ///< since the child started
  EventKind kind = EventKind::kUnplug;
  int device = -1;  ///< index into Lab::devices
  int line = 0;
  /// kPlug: the configuration the device enumerates with (previous configuration with the
  /// event's overrides applied; see docs/EMULATOR.md for the rules).
  DeviceConfig plug_config;
  bool keep_registers = false;
  /// kSetRegister.
  uint32_t address = 0;
  uint32_t value = 0;
  /// kFailNext.
  int count = 0;
  FailMode mode = FailMode::kTimeout;
  /// kAdvanceTraffic.
  double seconds = 0;
};

/// The built-in interface set used when a lab gives none (or says `interfaces: default`):
/// one vendor-specific interface (class ff/ff/ff) with bulk IN 0x84 and bulk OUT 0x05, 0x06,
/// 0x07, as rtw89 USB adapters expose; wMaxPacketSize follows the speed.
std::vector<InterfaceSpec> DefaultInterfaces();

/// Loads and validates a lab file. InvalidArgument "FILE:LINE: field: problem" for any
/// unknown key, missing required field, bad value, duplicate name/netdev/location; NotFound if
/// the file cannot be read.
absl::StatusOr<Lab> LoadLab(const std::string& path);

/// Same, from text (`display_path` is used in messages).
absl::StatusOr<Lab> ParseLab(const std::string& yaml_text, const std::string& display_path);

/// Loads a timeline for `lab`. Events are returned sorted by time (stable). Validation
/// simulates plug state: unplugging an unplugged device, plugging a plugged one, or two
/// plugged devices sharing a bus+port or bus+devnum are errors naming the event's line.
absl::StatusOr<std::vector<TimelineEvent>> LoadTimeline(const std::string& path, const Lab& lab);
absl::StatusOr<std::vector<TimelineEvent>> ParseTimeline(const std::string& yaml_text,
                                                         const std::string& display_path,
                                                         const Lab& lab);

/// The USB topology the emulator builds: every root hub (bus) with its kind, and every port
/// path that needs a port directory (device locations and peers, over the lab and the
/// timeline). Hubs are synthesised for port paths deeper than one hop.
struct BusPlan {
  bool superspeed = false;              ///< USB 3 root hub (1d6b:0003) or USB 2 (1d6b:0002)
  double speed_mbps = 480;              ///< root hub sysfs speed: 480, 5000 or the fastest device's
  std::vector<std::string> port_paths;  ///< sorted, unique; includes intermediate hub ports
  std::vector<int> used_devnums;        ///< devnums any device takes on this bus (sorted)
};
using Topology = std::map<int, BusPlan>;

/// Plans the topology. InvalidArgument (naming the file and line) if a bus would host both
/// USB 3 and USB 2 devices (Linux puts them on separate root hubs), or a peer lies on the
/// device's own bus or on a bus of the same kind.
absl::StatusOr<Topology> PlanTopology(const Lab& lab, const std::vector<TimelineEvent>& timeline);

/// The RX aggregation register the traffic model reads for a device in `config`: the lab's
/// explicit `rx_agg_register`, else by VID:PID from the rtw89 chip table (v1 0x8900, v2/v3
/// 0x6000), else none.
std::optional<uint32_t> RxAggRegisterFor(const DeviceSpec& spec, const DeviceConfig& config);

/// Parses a sysfs speed text ("1.5", "12", "480", "5000", "10000", "20000").
std::optional<double> ParseSpeedMbps(const std::string& text);
/// The sysfs `speed` text of a speed, e.g. "1.5", "480", "5000".
std::string SpeedSysfsText(double speed_mbps);

}  // namespace rxfleet::emulator
