#include "tools/emulator/sysfs_tree.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/emulator/descriptors.h"
#include "umockdev.h"

namespace rxfleet::emulator {
namespace {

constexpr char kController[] = "/sys/devices/pci0000:00/0000:00:14.0";
constexpr int kUsbDeviceMajor = 189;  // usb_device character major (Linux devices.txt)
constexpr int kMinPortsPerHub = 4;

std::string Hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) absl::StrAppendFormat(&out, "%02X", b);
  return out;
}

// Escapes a value for an "A:" line of umockdev's record format (g_strcompress on read).
std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Attr(std::string& text, const std::string& name, const std::string& value) {
  absl::StrAppend(&text, "A: ", name, "=", Escape(value + "\n"), "\n");
}

void Prop(std::string& text, const std::string& name, const std::string& value) {
  absl::StrAppend(&text, "E: ", name, "=", value, "\n");
}

// "P: /devices/..." from a "/sys/devices/..." syspath.
void Path(std::string& text, const std::string& syspath) {
  absl::StrAppend(&text, "P: ", syspath.substr(4), "\n");
}

std::string Parent(const std::string& port) {
  const size_t dot = port.rfind('.');
  return dot == std::string::npos ? "" : port.substr(0, dot);
}

std::string LastHop(const std::string& port) {
  const size_t dot = port.rfind('.');
  return dot == std::string::npos ? port : port.substr(dot + 1);
}

// Relative symlink target from directory `from_dir` to `to` (both absolute).
std::string Relative(const std::string& from_dir, const std::string& to) {
  return std::filesystem::path(to).lexically_relative(from_dir).string();
}

std::string VersionText(uint16_t bcd) { return absl::StrFormat("%2x.%02x", bcd >> 8, bcd & 0xff); }

// Attributes and properties of a usb_device paragraph.
void UsbDeviceParagraph(std::string& text, const std::string& syspath, const DeviceConfig& c,
                        const std::vector<uint8_t>& descriptors, const std::string& devpath,
                        const std::string& port_link, const std::string& driver_link) {
  const int minor = (c.bus - 1) * 128 + (c.devnum - 1);
  const std::string devname = absl::StrFormat("bus/usb/%03d/%03d", c.bus, c.devnum);
  Path(text, syspath);
  absl::StrAppend(&text, "N: ", devname, "=", Hex(descriptors), "\n");
  absl::StrAppend(&text, "H: descriptors=", Hex(descriptors), "\n");
  Prop(text, "SUBSYSTEM", "usb");
  Prop(text, "DEVTYPE", "usb_device");
  Prop(text, "DEVNAME", "/dev/" + devname);
  Prop(text, "DRIVER", "usb");
  Prop(text, "PRODUCT", absl::StrFormat("%x/%x/%x", c.vid, c.pid, c.bcd_device));
  Prop(text, "TYPE",
       absl::StrFormat("%d/%d/%d", c.device_class, c.device_subclass, c.device_protocol));
  Prop(text, "BUSNUM", absl::StrFormat("%03d", c.bus));
  Prop(text, "DEVNUM", absl::StrFormat("%03d", c.devnum));
  Prop(text, "MAJOR", absl::StrCat(kUsbDeviceMajor));
  Prop(text, "MINOR", absl::StrCat(minor));
  Prop(text, "ID_VENDOR_ID", absl::StrFormat("%04x", c.vid));
  Prop(text, "ID_MODEL_ID", absl::StrFormat("%04x", c.pid));
  Prop(text, "ID_BUS", "usb");
  Attr(text, "dev", absl::StrFormat("%d:%d", kUsbDeviceMajor, minor));
  Attr(text, "busnum", absl::StrCat(c.bus));
  Attr(text, "devnum", absl::StrCat(c.devnum));
  Attr(text, "devpath", devpath);
  Attr(text, "speed", SpeedSysfsText(c.speed_mbps));
  Attr(text, "version", VersionText(c.bcd_usb));
  Attr(text, "idVendor", absl::StrFormat("%04x", c.vid));
  Attr(text, "idProduct", absl::StrFormat("%04x", c.pid));
  Attr(text, "bcdDevice", absl::StrFormat("%04x", c.bcd_device));
  Attr(text, "bDeviceClass", absl::StrFormat("%02x", c.device_class));
  Attr(text, "bDeviceSubClass", absl::StrFormat("%02x", c.device_subclass));
  Attr(text, "bDeviceProtocol", absl::StrFormat("%02x", c.device_protocol));
  Attr(text, "bMaxPacketSize0",
       absl::StrCat(MaxPacketSize0(c.speed_mbps) == 9 ? 512 : MaxPacketSize0(c.speed_mbps)));
  Attr(text, "bNumConfigurations", "1");
  Attr(text, "bConfigurationValue", "1");
  const std::vector<uint8_t> conf(descriptors.begin() + 18, descriptors.end());
  Attr(text, "bNumInterfaces", absl::StrFormat("%2d", conf.size() > 4 ? conf[4] : 0));
  Attr(text, "bmAttributes", absl::StrFormat("%02x", conf.size() > 7 ? conf[7] : 0x80));
  Attr(text, "bMaxPower", absl::StrFormat("%dmA", c.max_power_ma));
  Attr(text, "maxchild", c.device_class == 9 ? "4" : "0");
  Attr(text, "authorized", "1");
  // "unknown" unless firmware (ACPI _PLD / hub descriptor bits) says otherwise, as Linux 6.1
  // shows devices on qemu-xhci.
  Attr(text, "removable", "unknown");
  Attr(text, "quirks", "0x0");
  Attr(text, "urbnum", "0");
  Attr(text, "configuration", "");
  Attr(text, "rx_lanes", "1");
  Attr(text, "tx_lanes", "1");
  Attr(text, "ltm_capable", "no");
  Attr(text, "avoid_reset_quirk", "0");
  if (!c.manufacturer.empty()) Attr(text, "manufacturer", c.manufacturer);
  if (!c.product.empty()) Attr(text, "product", c.product);
  if (!c.serial.empty()) Attr(text, "serial", c.serial);
  if (!port_link.empty()) absl::StrAppend(&text, "L: port=", port_link, "\n");
  if (!driver_link.empty()) absl::StrAppend(&text, "L: driver=", driver_link, "\n");
  text += "\n";
}

void InterfaceParagraph(std::string& text, const std::string& syspath, const DeviceConfig& c,
                        const InterfaceSpec& i, const std::string& driver_link) {
  Path(text, syspath);
  const std::string type =
      absl::StrFormat("%d/%d/%d", i.interface_class, i.interface_subclass, i.interface_protocol);
  const std::string modalias =
      absl::StrFormat("usb:v%04Xp%04Xd%04Xdc%02Xdsc%02Xdp%02Xic%02Xisc%02Xip%02Xin%02X", c.vid,
                      c.pid, c.bcd_device, c.device_class, c.device_subclass, c.device_protocol,
                      i.interface_class, i.interface_subclass, i.interface_protocol, i.number);
  Prop(text, "SUBSYSTEM", "usb");
  Prop(text, "DEVTYPE", "usb_interface");
  if (!i.driver.empty()) Prop(text, "DRIVER", i.driver);
  Prop(text, "PRODUCT", absl::StrFormat("%x/%x/%x", c.vid, c.pid, c.bcd_device));
  Prop(text, "TYPE",
       absl::StrFormat("%d/%d/%d", c.device_class, c.device_subclass, c.device_protocol));
  Prop(text, "INTERFACE", type);
  Prop(text, "MODALIAS", modalias);
  Attr(text, "bInterfaceNumber", absl::StrFormat("%02x", i.number));
  Attr(text, "bAlternateSetting", absl::StrFormat("%2d", i.alternate));
  Attr(text, "bInterfaceClass", absl::StrFormat("%02x", i.interface_class));
  Attr(text, "bInterfaceSubClass", absl::StrFormat("%02x", i.interface_subclass));
  Attr(text, "bInterfaceProtocol", absl::StrFormat("%02x", i.interface_protocol));
  Attr(text, "bNumEndpoints", absl::StrFormat("%02x", i.endpoints.size()));
  Attr(text, "authorized", "1");
  Attr(text, "supports_autosuspend", "1");
  Attr(text, "modalias", modalias);
  if (!driver_link.empty()) absl::StrAppend(&text, "L: driver=", driver_link, "\n");
  text += "\n";
}

// Interfaces with alternate setting 0 (one sysfs interface each), by number.
std::vector<InterfaceSpec> SysfsInterfaces(const DeviceConfig& c) {
  std::vector<InterfaceSpec> out;
  for (const InterfaceSpec& i : c.interfaces) {
    if (i.alternate == 0) out.push_back(i);
  }
  std::sort(out.begin(), out.end(),
            [](const InterfaceSpec& a, const InterfaceSpec& b) { return a.number < b.number; });
  for (InterfaceSpec& i : out) {
    if (c.netdev && c.netdev->interface == i.number && i.driver.empty()) {
      i.driver = c.netdev->driver;
    }
  }
  return out;
}

}  // namespace

SysfsTree::SysfsTree(UMockdevTestbed* testbed) : testbed_(testbed) {
  gchar* root = umockdev_testbed_get_root_dir(testbed_);
  root_ = root;
  g_free(root);
}

std::string SysfsTree::Disk(const std::string& syspath) const { return root_ + syspath; }

std::string SysfsTree::DeviceSyspath(int bus, const std::string& port) {
  std::string path = absl::StrCat(kController, "/usb", bus);
  std::string prefix;
  const std::vector<std::string> hops = absl::StrSplit(port, '.');
  for (const std::string& hop : hops) {
    prefix = prefix.empty() ? hop : absl::StrCat(prefix, ".", hop);
    absl::StrAppend(&path, "/", bus, "-", prefix);
  }
  return path;
}

std::string SysfsTree::PortSyspath(int bus, const std::string& port) {
  const std::string parent = Parent(port);
  const std::string hop = LastHop(port);
  if (parent.empty()) {
    return absl::StrCat(kController, "/usb", bus, "/", bus, "-0:1.0/usb", bus, "-port", hop);
  }
  const std::string hub = absl::StrCat(bus, "-", parent);
  return absl::StrCat(DeviceSyspath(bus, parent), "/", hub, ":1.0/", hub, "-port", hop);
}

std::string SysfsTree::InterfaceSyspath(const DeviceConfig& config, int number) const {
  return absl::StrCat(DeviceSyspath(config.bus, config.port), "/", config.SysfsName(), ":1.",
                      number);
}

absl::Status SysfsTree::AddFromString(const std::string& text) {
  GError* error = nullptr;
  if (!umockdev_testbed_add_from_string(testbed_, text.c_str(), &error)) {
    absl::Status status =
        absl::InternalError(absl::StrCat("umockdev rejected a device description: ",
                                         error != nullptr ? error->message : "unknown error"));
    if (error != nullptr) g_error_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::Status SysfsTree::Symlink(const std::string& target, const std::string& link_syspath) {
  const std::string link = Disk(link_syspath);
  std::error_code ec;
  std::filesystem::remove(link, ec);
  if (symlink(target.c_str(), link.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create symlink ", link, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SysfsTree::WriteFile(const std::string& syspath, const std::string& contents) {
  const std::string path = Disk(syspath);
  // Written beside /sys (same filesystem, invisible to the child), then renamed into place.
  const std::string tmp = root_ + "/.rxfleet-tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  const ssize_t n = write(fd, contents.data(), contents.size());
  close(fd);
  if (n != static_cast<ssize_t>(contents.size()) || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SysfsTree::EnsureDriver(const std::string& driver) {
  std::error_code ec;
  std::filesystem::create_directories(Disk("/sys/bus/usb/drivers/" + driver), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create driver dir: ", ec.message()));
  return absl::OkStatus();
}

absl::Status SysfsTree::Build(const Topology& topology,
                              const std::vector<std::pair<std::string, std::string>>& peers) {
  std::string text;
  Path(text, kController);
  Prop(text, "SUBSYSTEM", "pci");
  Prop(text, "DRIVER", "xhci_hcd");
  Prop(text, "PCI_CLASS", "C0330");
  Prop(text, "PCI_ID", "8086:A36D");
  Prop(text, "PCI_SLOT_NAME", "0000:00:14.0");
  Attr(text, "vendor", "0x8086");
  Attr(text, "device", "0xa36d");
  Attr(text, "class", "0x0c0330");
  absl::StrAppend(&text, "L: driver=", Relative(kController, "/sys/bus/pci/drivers/xhci_hcd"),
                  "\n\n");
  std::error_code dir_error;
  std::filesystem::create_directories(Disk("/sys/bus/pci/drivers/xhci_hcd"), dir_error);
  if (absl::Status s = AddFromString(text); !s.ok()) return s;
  for (const char* driver : {"usb", "hub"}) {
    if (absl::Status s = EnsureDriver(driver); !s.ok()) return s;
  }

  for (const auto& [bus, plan] : topology) {
    // Root hub.
    DeviceConfig root;
    root.vid = 0x1d6b;
    root.pid = plan.superspeed ? 0x0003 : 0x0002;
    root.bus = bus;
    root.devnum = 1;
    root.speed_mbps = plan.speed_mbps;
    root.bcd_usb = plan.superspeed ? 0x0300 : 0x0200;
    root.bcd_device = 0x0601;
    root.device_class = 9;
    root.device_protocol = plan.superspeed ? 3 : 1;
    root.max_power_ma = 0;
    root.manufacturer = "Linux 6.1.0 xhci-hcd";
    root.product = "xHCI Host Controller";
    root.serial = "0000:00:14.0";
    const std::string root_path = absl::StrCat(kController, "/usb", bus);
    const std::string root_intf = absl::StrCat(root_path, "/", bus, "-0:1.0");
    std::string hubs;
    InterfaceSpec hub_intf;
    hub_intf.number = 0;
    hub_intf.interface_class = 9;
    hub_intf.interface_subclass = 0;
    hub_intf.interface_protocol = 0;
    hub_intf.endpoints = {{0x81, EndpointType::kInterrupt, 4, 12, 0}};
    hub_intf.driver = "hub";
    InterfaceParagraph(hubs, root_intf, root, hub_intf,
                       Relative(root_intf, "/sys/bus/usb/drivers/hub"));
    UsbDeviceParagraph(hubs, root_path, root, RootHubDescriptors(plan.superspeed), "0", "",
                       Relative(root_path, "/sys/bus/usb/drivers/usb"));
    // Synthesised hubs for deeper port paths (every prefix of a deeper path).
    std::set<std::string> hub_paths;
    for (const std::string& p : plan.port_paths) {
      for (std::string parent = Parent(p); !parent.empty(); parent = Parent(parent)) {
        hub_paths.insert(parent);
      }
    }
    int next_devnum = 2;
    for (const std::string& hub_path : hub_paths) {
      while (std::find(plan.used_devnums.begin(), plan.used_devnums.end(), next_devnum) !=
             plan.used_devnums.end()) {
        ++next_devnum;
      }
      DeviceConfig hub;
      hub.vid = 0x05e3;
      hub.pid = plan.superspeed ? 0x0626 : 0x0610;
      hub.bus = bus;
      hub.port = hub_path;
      hub.devnum = next_devnum++;
      hub.speed_mbps = plan.superspeed ? 5000 : 480;
      hub.bcd_usb = plan.superspeed ? 0x0320 : 0x0210;
      hub.bcd_device = 0x0663;
      hub.device_class = 9;
      hub.device_protocol = plan.superspeed ? 3 : 1;
      hub.max_power_ma = plan.superspeed ? 896 : 100;
      hub.manufacturer = "GenesysLogic";
      hub.product = plan.superspeed ? "USB3.1 Hub" : "USB2.1 Hub";
      const std::string path = DeviceSyspath(bus, hub_path);
      const std::string intf = absl::StrCat(path, "/", hub.SysfsName(), ":1.0");
      InterfaceSpec hi = hub_intf;
      hi.endpoints = {{0x81, EndpointType::kInterrupt, 1, 12, 0}};
      InterfaceParagraph(hubs, intf, hub, hi, Relative(intf, "/sys/bus/usb/drivers/hub"));
      UsbDeviceParagraph(hubs, path, hub, ExternalHubDescriptors(plan.superspeed), hub_path,
                         Relative(path, PortSyspath(bus, hub_path)),
                         Relative(path, "/sys/bus/usb/drivers/usb"));
    }
    if (absl::Status s = AddFromString(hubs); !s.ok()) return s;

    // Port directories: every hub gets ports 1..max(4, highest port used below it).
    std::map<std::string, int> ports_per_hub;  // "" = root hub
    for (const std::string& h : hub_paths) ports_per_hub[h] = kMinPortsPerHub;
    ports_per_hub[""] = kMinPortsPerHub;
    for (const std::string& p : plan.port_paths) {
      int& count = ports_per_hub[Parent(p)];
      count = std::max(count, std::stoi(LastHop(p)));
    }
    for (const auto& [hub_path, count] : ports_per_hub) {
      for (int port = 1; port <= count; ++port) {
        const std::string port_path =
            hub_path.empty() ? absl::StrCat(port) : absl::StrCat(hub_path, ".", port);
        const std::string dir = PortSyspath(bus, port_path);
        std::error_code ec;
        std::filesystem::create_directories(Disk(dir), ec);
        if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
        for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
                 // As Linux 6.1 shows ports on a host without ACPI _PLD (measured on
                 // Debian 12's kernel under QEMU's qemu-xhci): an empty uevent (ports
                 // send no uevents), connect_type "unknown" and location 0x00000000.
                 {"uevent", ""},
                 {"connect_type", "unknown\n"},
                 {"over_current_count", "0\n"},
                 {"quirks", "00000000\n"},
                 {"location", "0x00000000\n"},
             }) {
          if (absl::Status s = WriteFile(dir + "/" + name, value); !s.ok()) return s;
        }
        if (plan.superspeed) {
          if (absl::Status s = WriteFile(dir + "/usb3_lpm_permit", "u1_u2\n"); !s.ok()) return s;
        }
      }
    }
  }

  std::map<std::string, std::string> peer_of;
  for (const auto& [a, b] : peers) {
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      auto [it, inserted] = peer_of.emplace(from, to);
      if (!inserted && it->second != to) {
        return absl::InvalidArgumentError(
            absl::StrCat("port ", from, " would be peered with both ", it->second, " and ", to));
      }
    }
  }
  for (const auto& [from, to] : peer_of) {
    const size_t fd = from.find('-');
    const size_t td = to.find('-');
    const std::string from_dir = PortSyspath(std::stoi(from.substr(0, fd)), from.substr(fd + 1));
    const std::string to_dir = PortSyspath(std::stoi(to.substr(0, td)), to.substr(td + 1));
    if (absl::Status s = Symlink(Relative(from_dir, to_dir), from_dir + "/peer"); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status SysfsTree::AddDevice(const DeviceConfig& c, int ifindex,
                                  const NetdevCounters& counters) {
  const std::string path = DeviceSyspath(c.bus, c.port);
  const std::vector<InterfaceSpec> interfaces = SysfsInterfaces(c);
  std::string text;
  for (const InterfaceSpec& i : interfaces) {
    const std::string intf = InterfaceSyspath(c, i.number);
    std::string driver_link;
    if (!i.driver.empty()) {
      if (absl::Status s = EnsureDriver(i.driver); !s.ok()) return s;
      driver_link = Relative(intf, "/sys/bus/usb/drivers/" + i.driver);
    }
    InterfaceParagraph(text, intf, c, i, driver_link);
  }
  if (c.netdev) {
    const std::string intf = InterfaceSyspath(c, c.netdev->interface);
    const std::string net = absl::StrCat(intf, "/net/", c.netdev->name);
    std::error_code ec;
    std::filesystem::create_directories(Disk(net + "/statistics"), ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", net, ": ", ec.message()));
    if (absl::Status s = WriteNetdevStatistics(c, counters); !s.ok()) return s;
    Path(text, net);
    Prop(text, "SUBSYSTEM", "net");
    Prop(text, "DEVTYPE", "wlan");
    Prop(text, "INTERFACE", c.netdev->name);
    Prop(text, "IFINDEX", absl::StrCat(ifindex));
    Attr(text, "address", c.netdev->address);
    Attr(text, "operstate", "up");
    Attr(text, "carrier", "1");
    Attr(text, "ifindex", absl::StrCat(ifindex));
    Attr(text, "iflink", absl::StrCat(ifindex));
    Attr(text, "mtu", "1500");
    Attr(text, "type", "1");
    Attr(text, "flags", "0x1003");
    Attr(text, "tx_queue_len", "1000");
    absl::StrAppend(&text, "L: device=", Relative(net, intf), "\n\n");
  }
  UsbDeviceParagraph(text, path, c, SysfsDescriptors(c), c.port,
                     Relative(path, PortSyspath(c.bus, c.port)),
                     Relative(path, "/sys/bus/usb/drivers/usb"));
  if (absl::Status s = AddFromString(text); !s.ok()) return s;
  const std::string port_dir = PortSyspath(c.bus, c.port);
  return Symlink(Relative(port_dir, path), port_dir + "/device");
}

absl::Status SysfsTree::RemoveDevice(const DeviceConfig& c) {
  const std::string path = DeviceSyspath(c.bus, c.port);
  std::vector<std::string> children;
  if (c.netdev) {
    children.push_back(
        absl::StrCat(InterfaceSyspath(c, c.netdev->interface), "/net/", c.netdev->name));
  }
  for (const InterfaceSpec& i : SysfsInterfaces(c))
    children.push_back(InterfaceSyspath(c, i.number));
  for (const std::string& child : children)
    umockdev_testbed_uevent(testbed_, child.c_str(), "remove");
  umockdev_testbed_uevent(testbed_, path.c_str(), "remove");
  for (const std::string& child : children) {
    umockdev_testbed_remove_device(testbed_, child.c_str());
  }
  umockdev_testbed_remove_device(testbed_, path.c_str());
  std::error_code ec;
  std::filesystem::remove(Disk(PortSyspath(c.bus, c.port) + "/device"), ec);
  if (std::filesystem::exists(Disk(path))) {
    return absl::InternalError(absl::StrCat("device directory ", path, " is still present"));
  }
  return absl::OkStatus();
}

absl::Status SysfsTree::WriteNetdevStatistics(const DeviceConfig& c,
                                              const NetdevCounters& counters) {
  if (!c.netdev) return absl::OkStatus();
  const std::string dir = absl::StrCat(InterfaceSyspath(c, c.netdev->interface), "/net/",
                                       c.netdev->name, "/statistics/");
  const std::pair<const char*, uint64_t> values[] = {
      {"rx_bytes", counters.rx_bytes()},     {"tx_bytes", counters.tx_bytes()},
      {"rx_packets", counters.rx_packets()}, {"tx_packets", counters.tx_packets()},
      {"rx_dropped", counters.rx_dropped()}, {"rx_errors", counters.rx_errors()},
      {"tx_errors", counters.tx_errors()},   {"tx_dropped", counters.tx_dropped()},
  };
  for (const auto& [name, value] : values) {
    if (absl::Status s = WriteFile(dir + name, absl::StrCat(value, "\n")); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::emulator
