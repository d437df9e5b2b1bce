#include "tools/emulator/lab.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/chips/chip_table.h"
#include "common/chips/family.h"
#include "common/chips/rx_agg.h"
#include "yaml-cpp/yaml.h"

namespace rxfleet::emulator {
namespace {

constexpr double kSpeeds[] = {1.5, 12, 480, 5000, 10000, 20000};

// Reads YAML nodes into values, producing "FILE:LINE: field: problem" errors.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }

  absl::Status Error(const YAML::Node& node, const std::string& field,
                     const std::string& problem) const {
    return ErrorAtLine(Line(node), field, problem);
  }

  absl::Status ErrorAtLine(int line, const std::string& field, const std::string& problem) const {
    std::string where = line > 0 ? absl::StrCat(path_, ":", line) : path_;
    return absl::InvalidArgumentError(field.empty()
                                          ? absl::StrCat(where, ": ", problem)
                                          : absl::StrCat(where, ": ", field, ": ", problem));
  }

  static int Line(const YAML::Node& node) {
    if (!node.IsDefined()) return 0;
    const YAML::Mark mark = node.Mark();
    return mark.line >= 0 ? mark.line + 1 : 0;
  }

  // Unknown keys are errors, listing the allowed ones.
  absl::Status CheckKeys(const YAML::Node& map, const std::string& field,
                         const std::vector<std::string>& allowed) const {
    if (!map.IsMap()) return Error(map, field, "expected a mapping");
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) return Error(it->first, field, "keys must be plain names");
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Error(
            it->first, field.empty() ? key : absl::StrCat(field, ".", key),
            absl::StrCat("unknown key '", key, "' (allowed: ", absl::StrJoin(allowed, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  // Integer scalars: decimal, or hexadecimal with a 0x prefix. With `quoted_is_hex`, a quoted
  // string is hexadecimal with or without the prefix ("0bda").
  absl::StatusOr<uint64_t> Uint(const YAML::Node& node, const std::string& field, uint64_t min,
                                uint64_t max, bool quoted_is_hex = false) const {
    if (!node.IsScalar()) return Error(node, field, "expected an integer");
    std::string text = node.Scalar();
    const bool quoted = node.Tag() == "!";
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
      base = 16;
      text = text.substr(2);
    } else if (quoted && quoted_is_hex) {
      base = 16;
    }
    if (text.empty() || text.size() > 16) {
      return Error(node, field, absl::StrCat("expected an integer; got \"", node.Scalar(), "\""));
    }
    uint64_t value = 0;
    for (char c : text) {
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (base == 16 && c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (base == 16 && c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return Error(node, field,
                     absl::StrCat("expected ", base == 16 ? "a hexadecimal" : "an",
                                  " integer; got \"", node.Scalar(), "\""));
      }
      value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    }
    if (value < min || value > max) {
      return Error(node, field,
                   absl::StrFormat("%s out of range [%s, %s]", node.Scalar(), Format(min, base),
                                   Format(max, base)));
    }
    return value;
  }

  absl::StatusOr<double> Number(const YAML::Node& node, const std::string& field, double min,
                                double max) const {
    if (!node.IsScalar() || node.Tag() == "!") return Error(node, field, "expected a number");
    const std::string text = node.Scalar();
    std::istringstream in(text);
    in.imbue(std::locale::classic());
    double value = 0;
    in >> value;
    if (in.fail() || !in.eof() || !std::isfinite(value)) {
      return Error(node, field, absl::StrCat("expected a number; got \"", text, "\""));
    }
    if (value < min || value > max) {
      return Error(node, field, absl::StrFormat("%s out of range [%g, %g]", text, min, max));
    }
    return value;
  }

  absl::StatusOr<std::string> String(const YAML::Node& node, const std::string& field,
                                     size_t max_length = 255) const {
    if (!node.IsScalar()) return Error(node, field, "expected a string");
    std::string value = node.Scalar();
    if (value.size() > max_length) {
      return Error(node, field, absl::StrCat("longer than ", max_length, " characters"));
    }
    for (unsigned char c : value) {
      if (c < 0x20 || c == 0x7f) return Error(node, field, "contains control characters");
    }
    return value;
  }

  absl::StatusOr<bool> Bool(const YAML::Node& node, const std::string& field) const {
    if (node.IsScalar() && node.Tag() != "!") {
      if (node.Scalar() == "true") return true;
      if (node.Scalar() == "false") return false;
    }
    return Error(node, field, "expected true or false");
  }

 private:
  static std::string Format(uint64_t v, int base) {
    return base == 16 ? absl::StrFormat("0x%x", v) : absl::StrCat(v);
  }

  std::string path_;
};

#define RX_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_or = (expr);              \
  if (!lhs##_or.ok()) return lhs##_or.status();

#define RX_RETURN_IF_ERROR(expr)       \
  do {                                 \
    absl::Status status_ = (expr);     \
    if (!status_.ok()) return status_; \
  } while (false)

bool ValidPortPath(const std::string& port) {
  std::vector<std::string> hops = absl::StrSplit(port, '.');
  if (hops.empty() || hops.size() > 6) return false;
  for (const std::string& hop : hops) {
    if (hop.empty() || hop.size() > 2) return false;
    int value = 0;
    for (char c : hop) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 31) return false;
  }
  return true;
}

// "B-P" → bus and port path.
bool ParseLocation(const std::string& text, int* bus, std::string* port) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 3) return false;
  int value = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + (text[i] - '0');
  }
  if (value < 1 || value > 255) return false;
  const std::string rest = text.substr(dash + 1);
  if (!ValidPortPath(rest)) return false;
  *bus = value;
  *port = rest;
  return true;
}

std::string DefaultDriverFor(uint16_t vid, uint16_t pid) {
  const common::ChipId* chip = common::LookupChip(vid, pid);
  if (chip == nullptr) return "";
  // Module stem "rtl8922au" → driver name "rtw89_8922au" (rtw89 registers its USB drivers
  // as KBUILD_MODNAME, e.g. rtw89_8922au).
  std::string stem(chip->chip);
  if (stem.rfind("rtl", 0) == 0) stem = stem.substr(3);
  return "rtw89_" + stem;
}

std::string MacFromSerialOrName(const std::string& serial, const std::string& name) {
  bool hex12 = serial.size() == 12;
  for (char c : serial) hex12 = hex12 && std::isxdigit(static_cast<unsigned char>(c));
  if (hex12) {
    std::string mac;
    for (size_t i = 0; i < 12; i += 2) {
      if (!mac.empty()) mac += ':';
      mac += static_cast<char>(std::tolower(static_cast<unsigned char>(serial[i])));
      mac += static_cast<char>(std::tolower(static_cast<unsigned char>(serial[i + 1])));
    }
    return mac;
  }
  // Locally administered address from an FNV-1a hash of the device name.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return absl::StrFormat("02:%02x:%02x:%02x:%02x:%02x", (h >> 32) & 0xff, (h >> 24) & 0xff,
                         (h >> 16) & 0xff, (h >> 8) & 0xff, h & 0xff);
}

bool ValidMac(const std::string& mac) {
  if (mac.size() != 17) return false;
  for (size_t i = 0; i < 17; ++i) {
    if (i % 3 == 2) {
      if (mac[i] != ':') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(mac[i]))) {
      return false;
    }
  }
  return true;
}

bool ValidNetdevName(const std::string& name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  for (unsigned char c : name) {
    if (c <= 0x20 || c == '/' || c == ':' || c >= 0x7f) return false;
  }
  return true;
}

absl::StatusOr<std::vector<EndpointSpec>> ParseEndpoints(const Reader& r, const YAML::Node& node,
                                                         const std::string& field) {
  if (!node.IsSequence()) return r.Error(node, field, "expected a list of endpoints");
  std::vector<EndpointSpec> endpoints;
  std::set<uint8_t> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node e = node[i];
    const std::string f = absl::StrCat(field, "[", i, "]");
    RX_RETURN_IF_ERROR(
        r.CheckKeys(e, f, {"address", "type", "max_packet", "interval", "max_burst"}));
    EndpointSpec ep;
    if (!e["address"]) return r.Error(e, f, "missing required key 'address'");
    RX_ASSIGN_OR_RETURN(address, r.Uint(e["address"], f + ".address", 0x01, 0x8f));
    if ((*address_or & 0x70) != 0 || (*address_or & 0x0f) == 0) {
      return r.Error(e["address"], f + ".address",
                     "expected an endpoint address 0x01..0x0f (OUT) or 0x81..0x8f (IN)");
    }
    ep.address = static_cast<uint8_t>(*address_or);
    if (!seen.insert(ep.address).second) {
      return r.Error(e["address"], f + ".address", "duplicate endpoint address in interface");
    }
    if (!e["type"]) return r.Error(e, f, "missing required key 'type'");
    RX_ASSIGN_OR_RETURN(type, r.String(e["type"], f + ".type"));
    if (*type_or == "bulk") {
      ep.type = EndpointType::kBulk;
    } else if (*type_or == "interrupt") {
      ep.type = EndpointType::kInterrupt;
    } else if (*type_or == "isochronous") {
      ep.type = EndpointType::kIsochronous;
    } else {
      return r.Error(
          e["type"], f + ".type",
          absl::StrCat("expected bulk, interrupt or isochronous; got \"", *type_or, "\""));
    }
    if (e["max_packet"]) {
      RX_ASSIGN_OR_RETURN(mp, r.Uint(e["max_packet"], f + ".max_packet", 0, 1024));
      ep.max_packet = static_cast<uint16_t>(*mp_or);
    }
    if (e["interval"]) {
      RX_ASSIGN_OR_RETURN(iv, r.Uint(e["interval"], f + ".interval", 0, 255));
      ep.interval = static_cast<uint8_t>(*iv_or);
    }
    if (e["max_burst"]) {
      RX_ASSIGN_OR_RETURN(mb, r.Uint(e["max_burst"], f + ".max_burst", 0, 15));
      ep.max_burst = static_cast<uint8_t>(*mb_or);
    }
    endpoints.push_back(ep);
  }
  return endpoints;
}

absl::StatusOr<std::vector<InterfaceSpec>> ParseInterfaces(const Reader& r, const YAML::Node& node,
                                                           const std::string& field) {
  if (node.IsScalar() && node.Scalar() == "default") return DefaultInterfaces();
  if (!node.IsSequence() || node.size() == 0) {
    return r.Error(node, field, "expected a non-empty list of interfaces or \"default\"");
  }
  std::vector<InterfaceSpec> interfaces;
  std::set<std::pair<int, int>> seen;
  std::set<int> numbers;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node n = node[i];
    const std::string f = absl::StrCat(field, "[", i, "]");
    RX_RETURN_IF_ERROR(r.CheckKeys(n, f,
                                   {"number", "alternate", "class", "subclass", "protocol",
                                    "function", "endpoints", "driver"}));
    InterfaceSpec spec;
    if (!n["number"]) return r.Error(n, f, "missing required key 'number'");
    RX_ASSIGN_OR_RETURN(number, r.Uint(n["number"], f + ".number", 0, 31));
    spec.number = static_cast<uint8_t>(*number_or);
    if (n["alternate"]) {
      RX_ASSIGN_OR_RETURN(alt, r.Uint(n["alternate"], f + ".alternate", 0, 31));
      spec.alternate = static_cast<uint8_t>(*alt_or);
    }
    if (!seen.insert({spec.number, spec.alternate}).second) {
      return r.Error(n, f, "duplicate interface number/alternate");
    }
    numbers.insert(spec.number);
    if (n["class"]) {
      RX_ASSIGN_OR_RETURN(v, r.Uint(n["class"], f + ".class", 0, 255));
      spec.interface_class = static_cast<uint8_t>(*v_or);
    }
    if (n["subclass"]) {
      RX_ASSIGN_OR_RETURN(v, r.Uint(n["subclass"], f + ".subclass", 0, 255));
      spec.interface_subclass = static_cast<uint8_t>(*v_or);
    }
    if (n["protocol"]) {
      RX_ASSIGN_OR_RETURN(v, r.Uint(n["protocol"], f + ".protocol", 0, 255));
      spec.interface_protocol = static_cast<uint8_t>(*v_or);
    }
    if (n["function"]) {
      const YAML::Node fn = n["function"];
      const std::string ff = f + ".function";
      RX_RETURN_IF_ERROR(r.CheckKeys(fn, ff, {"interface_count", "class", "subclass", "protocol"}));
      FunctionSpec function;
      if (fn["interface_count"]) {
        RX_ASSIGN_OR_RETURN(v, r.Uint(fn["interface_count"], ff + ".interface_count", 1, 32));
        function.interface_count = static_cast<uint8_t>(*v_or);
      }
      if (fn["class"]) {
        RX_ASSIGN_OR_RETURN(v, r.Uint(fn["class"], ff + ".class", 0, 255));
        function.function_class = static_cast<uint8_t>(*v_or);
      }
      if (fn["subclass"]) {
        RX_ASSIGN_OR_RETURN(v, r.Uint(fn["subclass"], ff + ".subclass", 0, 255));
        function.function_subclass = static_cast<uint8_t>(*v_or);
      }
      if (fn["protocol"]) {
        RX_ASSIGN_OR_RETURN(v, r.Uint(fn["protocol"], ff + ".protocol", 0, 255));
        function.function_protocol = static_cast<uint8_t>(*v_or);
      }
      spec.function = function;
    }
    if (n["endpoints"]) {
      RX_ASSIGN_OR_RETURN(eps, ParseEndpoints(r, n["endpoints"], f + ".endpoints"));
      spec.endpoints = *eps_or;
    }
    if (n["driver"]) {
      RX_ASSIGN_OR_RETURN(drv, r.String(n["driver"], f + ".driver", 64));
      if (!ValidNetdevName(*drv_or) && !drv_or->empty()) {
        return r.Error(n["driver"], f + ".driver", "not a valid driver name");
      }
      spec.driver = *drv_or;
    }
    interfaces.push_back(std::move(spec));
  }
  for (int expected = 0; expected < static_cast<int>(numbers.size()); ++expected) {
    if (!numbers.count(expected) || !seen.count({expected, 0})) {
      return r.Error(node, field,
                     absl::StrCat("interface numbers must be 0..", numbers.size() - 1,
                                  " each with alternate 0; interface ", expected, " is missing"));
    }
  }
  return interfaces;
}

absl::StatusOr<ShapeSpec> ParseShape(const Reader& r, const YAML::Node& node,
                                     const std::string& field) {
  RX_RETURN_IF_ERROR(r.CheckKeys(node, field, {"netns", "device", "scale"}));
  ShapeSpec shape;
  for (const char* key : {"netns", "device"}) {
    if (!node[key]) return r.Error(node, field, absl::StrCat("missing required key '", key, "'"));
  }
  RX_ASSIGN_OR_RETURN(netns, r.String(node["netns"], field + ".netns"));
  if (netns_or->empty() || *netns_or == "." || *netns_or == ".." ||
      netns_or->find('/') != std::string::npos) {
    return r.Error(node["netns"], field + ".netns",
                   "expected a network namespace name as in /run/netns (no '/')");
  }
  shape.netns = *netns_or;
  RX_ASSIGN_OR_RETURN(device, r.String(node["device"], field + ".device"));
  if (!ValidNetdevName(*device_or)) {
    return r.Error(node["device"], field + ".device",
                   "expected 1..15 characters without '/', ':' or whitespace");
  }
  shape.device = *device_or;
  if (node["scale"]) {
    RX_ASSIGN_OR_RETURN(scale, r.Number(node["scale"], field + ".scale", 0, 10));
    if (*scale_or <= 0) return r.Error(node["scale"], field + ".scale", "must be > 0");
    shape.scale = *scale_or;
  }
  return shape;
}

absl::StatusOr<NetdevSpec> ParseNetdev(const Reader& r, const YAML::Node& node,
                                       const std::string& field, const DeviceConfig& config,
                                       const std::string& device_name) {
  RX_RETURN_IF_ERROR(
      r.CheckKeys(node, field,
                  {"name", "driver", "interface", "address", "rx_bytes", "tx_bytes", "rx_packets",
                   "tx_packets", "rx_dropped", "rx_errors", "tx_errors", "tx_dropped", "shape"}));
  NetdevSpec netdev;
  if (!node["name"]) return r.Error(node, field, "missing required key 'name'");
  RX_ASSIGN_OR_RETURN(name, r.String(node["name"], field + ".name"));
  if (!ValidNetdevName(*name_or)) {
    return r.Error(node["name"], field + ".name",
                   "expected 1..15 characters without '/', ':' or whitespace");
  }
  netdev.name = *name_or;
  if (node["driver"]) {
    RX_ASSIGN_OR_RETURN(drv, r.String(node["driver"], field + ".driver", 64));
    if (!ValidNetdevName(*drv_or)) {
      return r.Error(node["driver"], field + ".driver", "not a valid driver name");
    }
    netdev.driver = *drv_or;
  } else {
    netdev.driver = DefaultDriverFor(config.vid, config.pid);
    if (netdev.driver.empty()) {
      return r.Error(node, field,
                     "missing 'driver' (required when VID:PID is not in the rtw89 chip table)");
    }
  }
  if (node["interface"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["interface"], field + ".interface", 0, 31));
    netdev.interface = static_cast<uint8_t>(*v_or);
  }
  if (node["address"]) {
    RX_ASSIGN_OR_RETURN(mac, r.String(node["address"], field + ".address"));
    if (!ValidMac(*mac_or)) {
      return r.Error(node["address"], field + ".address", "expected aa:bb:cc:dd:ee:ff");
    }
    netdev.address = *mac_or;
  } else {
    netdev.address = MacFromSerialOrName(config.serial, device_name);
  }
  const std::pair<const char*, uint64_t*> counters[] = {
      {"rx_bytes", &netdev.rx_bytes},     {"tx_bytes", &netdev.tx_bytes},
      {"rx_packets", &netdev.rx_packets}, {"tx_packets", &netdev.tx_packets},
      {"rx_dropped", &netdev.rx_dropped}, {"rx_errors", &netdev.rx_errors},
      {"tx_errors", &netdev.tx_errors},   {"tx_dropped", &netdev.tx_dropped},
  };
  for (const auto& [key, target] : counters) {
    if (!node[key]) continue;
    RX_ASSIGN_OR_RETURN(v, r.Uint(node[key], absl::StrCat(field, ".", key), 0, (1ull << 62)));
    *target = *v_or;
  }
  if (node["shape"]) {
    RX_ASSIGN_OR_RETURN(shape, ParseShape(r, node["shape"], field + ".shape"));
    netdev.shape = *shape_or;
  }
  return netdev;
}

// Keys shared by lab devices and plug events (the re-enumerable configuration).
const std::vector<std::string>& ConfigKeys() {
  static const std::vector<std::string> keys = {
      "vid",          "pid",           "speed",      "bus",     "port",
      "devnum",       "peer",          "hub_peer",   "bcd_usb", "bcd_device",
      "device_class", "manufacturer",  "product",    "serial",  "max_power_ma",
      "self_powered", "remote_wakeup", "interfaces", "netdev",  "superspeed_capable"};
  return keys;
}

// Applies the configuration keys present in `node` onto `config`.
absl::Status ApplyConfig(const Reader& r, const YAML::Node& node, const std::string& field,
                         const std::string& device_name, DeviceConfig& config) {
  if (node["vid"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["vid"], field + ".vid", 0, 0xffff, true));
    config.vid = static_cast<uint16_t>(*v_or);
  }
  if (node["pid"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["pid"], field + ".pid", 0, 0xffff, true));
    config.pid = static_cast<uint16_t>(*v_or);
  }
  if (node["speed"]) {
    std::optional<double> speed =
        node["speed"].IsScalar() ? ParseSpeedMbps(node["speed"].Scalar()) : std::nullopt;
    if (!speed) {
      return r.Error(node["speed"], field + ".speed",
                     absl::StrCat("expected one of 1.5, 12, 480, 5000, 10000, 20000; got \"",
                                  node["speed"].IsScalar() ? node["speed"].Scalar() : "?", "\""));
    }
    config.speed_mbps = *speed;
  }
  if (node["bus"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["bus"], field + ".bus", 1, 255));
    config.bus = static_cast<int>(*v_or);
  }
  if (node["port"]) {
    RX_ASSIGN_OR_RETURN(port, r.String(node["port"], field + ".port"));
    if (!ValidPortPath(*port_or)) {
      return r.Error(node["port"], field + ".port",
                     absl::StrCat("expected a port path like \"2\" or \"1.3\" (hops 1..31, at "
                                  "most 6); got \"",
                                  *port_or, "\""));
    }
    config.port = *port_or;
  }
  if (node["devnum"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["devnum"], field + ".devnum", 2, 127));
    config.devnum = static_cast<int>(*v_or);
  }
  if (node["peer"]) {
    RX_ASSIGN_OR_RETURN(peer, r.String(node["peer"], field + ".peer"));
    int bus = 0;
    std::string port;
    if (!peer_or->empty() && !ParseLocation(*peer_or, &bus, &port)) {
      return r.Error(
          node["peer"], field + ".peer",
          absl::StrCat("expected \"BUS-PORTPATH\" like \"3-3\"; got \"", *peer_or, "\""));
    }
    config.peer = *peer_or;
  } else if (node["bus"] || node["port"]) {
    config.peer.clear();
  }
  if (node["hub_peer"]) {
    RX_ASSIGN_OR_RETURN(hub_peer, r.String(node["hub_peer"], field + ".hub_peer"));
    int bus = 0;
    std::string port;
    if (!hub_peer_or->empty() &&
        (!ParseLocation(*hub_peer_or, &bus, &port) || port.find('.') != std::string::npos)) {
      return r.Error(node["hub_peer"], field + ".hub_peer",
                     absl::StrCat("expected a root port \"BUS-PORT\" like \"2-1\"; got \"",
                                  *hub_peer_or, "\""));
    }
    config.hub_peer = *hub_peer_or;
  } else if (node["bus"] || node["port"]) {
    config.hub_peer.clear();
  }
  if (node["bcd_usb"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["bcd_usb"], field + ".bcd_usb", 0x0100, 0x0320));
    config.bcd_usb = static_cast<uint16_t>(*v_or);
    config.bcd_usb_explicit = true;
  } else if (!config.bcd_usb_explicit) {
    config.bcd_usb = config.SuperSpeed() ? 0x0320 : 0x0210;
  }
  if (node["superspeed_capable"]) {
    RX_ASSIGN_OR_RETURN(v, r.Bool(node["superspeed_capable"], field + ".superspeed_capable"));
    config.superspeed_capable = *v_or;
    config.superspeed_capable_explicit = true;
  } else if (!config.superspeed_capable_explicit) {
    config.superspeed_capable = config.superspeed_capable || config.SuperSpeed();
  }
  if (node["bcd_device"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["bcd_device"], field + ".bcd_device", 0, 0xffff));
    config.bcd_device = static_cast<uint16_t>(*v_or);
  }
  if (node["device_class"]) {
    const YAML::Node dc = node["device_class"];
    const std::string f = field + ".device_class";
    RX_RETURN_IF_ERROR(r.CheckKeys(dc, f, {"class", "subclass", "protocol"}));
    if (dc["class"]) {
      RX_ASSIGN_OR_RETURN(v, r.Uint(dc["class"], f + ".class", 0, 255));
      config.device_class = static_cast<uint8_t>(*v_or);
    }
    if (dc["subclass"]) {
      RX_ASSIGN_OR_RETURN(v, r.Uint(dc["subclass"], f + ".subclass", 0, 255));
      config.device_subclass = static_cast<uint8_t>(*v_or);
    }
    if (dc["protocol"]) {
      RX_ASSIGN_OR_RETURN(v, r.Uint(dc["protocol"], f + ".protocol", 0, 255));
      config.device_protocol = static_cast<uint8_t>(*v_or);
    }
  }
  const std::pair<const char*, std::string*> strings[] = {
      {"manufacturer", &config.manufacturer},
      {"product", &config.product},
      {"serial", &config.serial},
  };
  for (const auto& [key, target] : strings) {
    if (!node[key]) continue;
    RX_ASSIGN_OR_RETURN(v, r.String(node[key], absl::StrCat(field, ".", key), 126));
    *target = *v_or;
  }
  if (node["max_power_ma"]) {
    RX_ASSIGN_OR_RETURN(v, r.Uint(node["max_power_ma"], field + ".max_power_ma", 0, 2040));
    config.max_power_ma = static_cast<int>(*v_or);
  }
  if (node["self_powered"]) {
    RX_ASSIGN_OR_RETURN(v, r.Bool(node["self_powered"], field + ".self_powered"));
    config.self_powered = *v_or;
  }
  if (node["remote_wakeup"]) {
    RX_ASSIGN_OR_RETURN(v, r.Bool(node["remote_wakeup"], field + ".remote_wakeup"));
    config.remote_wakeup = *v_or;
  }
  if (node["interfaces"]) {
    RX_ASSIGN_OR_RETURN(v, ParseInterfaces(r, node["interfaces"], field + ".interfaces"));
    config.interfaces = *v_or;
  }
  if (node["netdev"]) {
    if (node["netdev"].IsNull()) {
      config.netdev.reset();
    } else {
      RX_ASSIGN_OR_RETURN(v,
                          ParseNetdev(r, node["netdev"], field + ".netdev", config, device_name));
      config.netdev = *v_or;
    }
  }
  // Cross-field checks of the resulting configuration.
  if (config.netdev) {
    bool found = false;
    for (const InterfaceSpec& i : config.interfaces) found |= i.number == config.netdev->interface;
    if (!found) {
      return r.Error(node, field,
                     absl::StrCat("netdev.interface ", config.netdev->interface,
                                  " is not one of the device's interfaces"));
    }
  }
  if (!config.hub_peer.empty()) {
    int bus = 0;
    std::string port;
    ParseLocation(config.hub_peer, &bus, &port);
    if (config.port.find('.') == std::string::npos) {
      return r.Error(node, field, "hub_peer needs a device behind a hub (a port like \"1.2\")");
    }
    if (bus == config.bus) {
      return r.Error(node, field,
                     absl::StrCat("hub_peer ", config.hub_peer,
                                  " must be on the other root hub, not on bus ", config.bus));
    }
  }
  if (!config.peer.empty()) {
    int bus = 0;
    std::string port;
    ParseLocation(config.peer, &bus, &port);
    if (bus == config.bus) {
      return r.Error(node, field,
                     absl::StrCat("peer ", config.peer,
                                  " must be on the other root hub, not on bus ", config.bus));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> ParseYaml(const std::string& text, const std::string& path) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": YAML error: ", e.what()));
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Location uniqueness among plugged devices.
absl::Status CheckLocations(const Reader& r, int line, const std::vector<const DeviceConfig*>& cs,
                            const std::vector<std::string>& names) {
  for (size_t i = 0; i < cs.size(); ++i) {
    for (size_t j = i + 1; j < cs.size(); ++j) {
      if (cs[i]->bus != cs[j]->bus) continue;
      if (cs[i]->port == cs[j]->port) {
        return r.ErrorAtLine(line, "",
                             absl::StrCat("devices ", names[i], " and ", names[j],
                                          " are both plugged at ", cs[i]->SysfsName()));
      }
      if (cs[i]->devnum == cs[j]->devnum) {
        return r.ErrorAtLine(
            line, "",
            absl::StrCat("devices ", names[i], " and ", names[j], " both have devnum ",
                         cs[i]->devnum, " on bus ", cs[i]->bus));
      }
      const std::string a = cs[i]->port + ".";
      const std::string b = cs[j]->port + ".";
      if (b.rfind(a, 0) == 0 || a.rfind(b, 0) == 0) {
        return r.ErrorAtLine(line, "",
                             absl::StrCat("devices ", names[i], " (", cs[i]->SysfsName(), ") and ",
                                          names[j], " (", cs[j]->SysfsName(),
                                          ") overlap: a port path cannot be both a device and a "
                                          "hub"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string HostClassName(HostClass host_class) {
  switch (host_class) {
    case HostClass::kX86:
      return "x86";
    case HostClass::kPi5:
      return "pi5";
    case HostClass::kPi1:
      return "pi1";
  }
  return "x86";
}

std::string EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kUnplug:
      return "unplug";
    case EventKind::kPlug:
      return "plug";
    case EventKind::kSetRegister:
      return "set_register";
    case EventKind::kSleep:
      return "sleep";
    case EventKind::kWake:
      return "wake";
    case EventKind::kFailNext:
      return "fail_next";
    case EventKind::kAdvanceTraffic:
      return "advance_traffic";
  }
  return "unplug";
}

std::string DeviceConfig::SysfsName() const { return absl::StrCat(bus, "-", port); }

std::string DeviceConfig::DevNode() const {
  return absl::StrFormat("/dev/bus/usb/%03d/%03d", bus, devnum);
}

int Lab::FindDevice(const std::string& name) const {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<InterfaceSpec> DefaultInterfaces() {
  InterfaceSpec wlan;
  wlan.number = 0;
  wlan.interface_class = 0xff;
  wlan.interface_subclass = 0xff;
  wlan.interface_protocol = 0xff;
  wlan.endpoints = {
      {0x84, EndpointType::kBulk, 0, 0, 0},
      {0x05, EndpointType::kBulk, 0, 0, 0},
      {0x06, EndpointType::kBulk, 0, 0, 0},
      {0x07, EndpointType::kBulk, 0, 0, 0},
  };
  return {wlan};
}

std::optional<double> ParseSpeedMbps(const std::string& text) {
  for (double speed : kSpeeds) {
    if (text == SpeedSysfsText(speed)) return speed;
  }
  return std::nullopt;
}

std::string SpeedSysfsText(double speed_mbps) {
  if (speed_mbps == 1.5) return "1.5";
  return absl::StrCat(static_cast<int64_t>(std::llround(speed_mbps)));
}

std::optional<uint32_t> RxAggRegisterFor(const DeviceSpec& spec, const DeviceConfig& config) {
  if (spec.rx_agg_register_explicit) return spec.rx_agg_register;
  const common::ChipId* chip = common::LookupChip(config.vid, config.pid);
  if (chip == nullptr) return std::nullopt;
  return common::GetRxAggLayoutSpec(chip->layout).reg0_address;
}

namespace {

// traffic.synthetic_curve: 2..32 points {hold_us, rx_mbps, loss}, hold_us a multiple of 32 in
// 0..8160 and strictly increasing, rx_mbps >= 0, loss in [0, 1] (default 0).
absl::StatusOr<std::vector<SyntheticCurvePoint>> ParseSyntheticCurve(const Reader& r,
                                                                     const YAML::Node& node,
                                                                     const std::string& field) {
  constexpr size_t kMinPoints = 2;
  constexpr size_t kMaxPoints = 32;
  constexpr uint64_t kMaxHoldUs = uint64_t{255} * 32;  // RX aggregation reg 0 bits 15:8 x 32 µs
  if (!node.IsSequence()) {
    return r.Error(node, field, "expected a list of {hold_us, rx_mbps, loss} points");
  }
  if (node.size() < kMinPoints || node.size() > kMaxPoints) {
    return r.Error(
        node, field,
        absl::StrFormat("expected %d..%d points; got %d", kMinPoints, kMaxPoints, node.size()));
  }
  std::vector<SyntheticCurvePoint> curve;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node p = node[i];
    const std::string pf = absl::StrCat(field, "[", i, "]");
    RX_RETURN_IF_ERROR(r.CheckKeys(p, pf, {"hold_us", "rx_mbps", "loss"}));
    for (const char* key : {"hold_us", "rx_mbps"}) {
      if (!p[key]) return r.Error(p, pf, absl::StrCat("missing required key '", key, "'"));
    }
    SyntheticCurvePoint point;
    RX_ASSIGN_OR_RETURN(hold, r.Uint(p["hold_us"], pf + ".hold_us", 0, kMaxHoldUs));
    if (*hold_or % 32 != 0) {
      return r.Error(p["hold_us"], pf + ".hold_us",
                     absl::StrCat(*hold_or, " is not a multiple of 32 (the register's unit)"));
    }
    point.hold_us = static_cast<uint32_t>(*hold_or);
    if (!curve.empty() && point.hold_us <= curve.back().hold_us) {
      return r.Error(
          p["hold_us"], pf + ".hold_us",
          absl::StrCat(point.hold_us, " is not above the previous point's ", curve.back().hold_us,
                       " (points are sorted by hold_us, strictly increasing)"));
    }
    RX_ASSIGN_OR_RETURN(rx, r.Number(p["rx_mbps"], pf + ".rx_mbps", 0, 100000));
    point.rx_mbps = *rx_or;
    if (p["loss"]) {
      RX_ASSIGN_OR_RETURN(loss, r.Number(p["loss"], pf + ".loss", 0, 1));
      point.loss = *loss_or;
    }
    curve.push_back(point);
  }
  return curve;
}

absl::StatusOr<Lab> ParseLabUnchecked(const std::string& yaml_text,
                                      const std::string& display_path) {
  Reader r(display_path);
  RX_ASSIGN_OR_RETURN(root, ParseYaml(yaml_text, display_path));
  const YAML::Node doc = *root_or;
  if (!doc.IsMap()) return r.Error(doc, "", "a lab file is a mapping with a 'devices' list");
  RX_RETURN_IF_ERROR(r.CheckKeys(doc, "", {"host_class", "devices"}));
  Lab lab;
  lab.path = display_path;
  if (doc["host_class"]) {
    RX_ASSIGN_OR_RETURN(hc, r.String(doc["host_class"], "host_class"));
    if (*hc_or == "x86") {
      lab.host_class = HostClass::kX86;
    } else if (*hc_or == "pi5") {
      lab.host_class = HostClass::kPi5;
    } else if (*hc_or == "pi1") {
      lab.host_class = HostClass::kPi1;
    } else {
      return r.Error(doc["host_class"], "host_class",
                     absl::StrCat("expected x86, pi5 or pi1; got \"", *hc_or, "\""));
    }
  }
  const YAML::Node devices = doc["devices"];
  if (!devices) return r.Error(doc, "", "missing required key 'devices'");
  if (!devices.IsSequence() || devices.size() == 0) {
    return r.Error(devices, "devices", "expected a non-empty list of devices");
  }
  std::set<std::string> netdev_names;
  std::set<std::pair<std::string, std::string>> shaped;  // (netns, device)
  for (size_t i = 0; i < devices.size(); ++i) {
    const YAML::Node d = devices[i];
    const std::string f = absl::StrCat("devices[", i, "]");
    std::vector<std::string> allowed = ConfigKeys();
    for (const char* key : {"name", "registers", "rx_agg_register", "traffic", "asleep", "plugged",
                            "rtw88_watchdog", "read_all_ones"}) {
      allowed.push_back(key);
    }
    RX_RETURN_IF_ERROR(r.CheckKeys(d, f, allowed));
    DeviceSpec spec;
    spec.line = Reader::Line(d);
    for (const char* key : {"name", "vid", "pid", "speed", "bus", "port", "devnum"}) {
      if (!d[key]) return r.Error(d, f, absl::StrCat("missing required key '", key, "'"));
    }
    RX_ASSIGN_OR_RETURN(name, r.String(d["name"], f + ".name", 64));
    if (name_or->empty() || name_or->find_first_of(" \t/") != std::string::npos) {
      return r.Error(d["name"], f + ".name", "expected a non-empty name without spaces or '/'");
    }
    if (lab.FindDevice(*name_or) >= 0) {
      return r.Error(d["name"], f + ".name",
                     absl::StrCat("duplicate device name '", *name_or, "'"));
    }
    spec.name = *name_or;
    // ApplyConfig reads the netdev last, so its defaults (driver, MAC) see vid/pid/serial.
    spec.config.interfaces = DefaultInterfaces();
    RX_RETURN_IF_ERROR(ApplyConfig(r, d, f, spec.name, spec.config));
    if (!d["max_power_ma"]) spec.config.max_power_ma = spec.config.SuperSpeed() ? 896 : 500;
    if (spec.config.netdev) {
      if (!netdev_names.insert(spec.config.netdev->name).second) {
        return r.Error(d["netdev"], f + ".netdev.name",
                       absl::StrCat("duplicate netdev name '", spec.config.netdev->name, "'"));
      }
      if (const std::optional<ShapeSpec>& shape = spec.config.netdev->shape; shape.has_value()) {
        if (!shaped.emplace(shape->netns, shape->device).second) {
          return r.Error(d["netdev"]["shape"], f + ".netdev.shape",
                         absl::StrCat("device ", shape->device, " in namespace ", shape->netns,
                                      " is already shaped for another device"));
        }
      }
    }
    if (d["registers"]) {
      const YAML::Node regs = d["registers"];
      if (!regs.IsMap()) {
        return r.Error(regs, f + ".registers", "expected a mapping of address: value");
      }
      for (auto it = regs.begin(); it != regs.end(); ++it) {
        // 32-bit addresses: mt76 (mt7921u, mt7925u) registers live at 0x74000000 and up.
        RX_ASSIGN_OR_RETURN(addr, r.Uint(it->first, f + ".registers", 0, 0xffffffffull, true));
        if (*addr_or % 4 != 0) {
          return r.Error(it->first, f + ".registers",
                         absl::StrFormat("address 0x%x is not 32-bit aligned", *addr_or));
        }
        const std::string vf = absl::StrFormat("%s.registers[0x%x]", f, *addr_or);
        RX_ASSIGN_OR_RETURN(val, r.Uint(it->second, vf, 0, 0xffffffffull, true));
        if (!spec.registers.emplace(static_cast<uint32_t>(*addr_or), static_cast<uint32_t>(*val_or))
                 .second) {
          return r.Error(it->first, vf, "duplicate register address");
        }
      }
    }
    if (d["rx_agg_register"]) {
      RX_ASSIGN_OR_RETURN(v,
                          r.Uint(d["rx_agg_register"], f + ".rx_agg_register", 0, 0xffffff, true));
      if (*v_or % 4 != 0) {
        return r.Error(d["rx_agg_register"], f + ".rx_agg_register", "not 32-bit aligned");
      }
      spec.rx_agg_register = static_cast<uint32_t>(*v_or);
      spec.rx_agg_register_explicit = true;
    } else {
      spec.rx_agg_register = RxAggRegisterFor(spec, spec.config);
    }
    if (d["traffic"]) {
      const YAML::Node t = d["traffic"];
      RX_RETURN_IF_ERROR(r.CheckKeys(t, f + ".traffic",
                                     {"offered_rx_mbps", "offered_tx_mbps", "synthetic_curve"}));
      TrafficSpec traffic;
      if (t["offered_rx_mbps"]) {
        RX_ASSIGN_OR_RETURN(
            v, r.Number(t["offered_rx_mbps"], f + ".traffic.offered_rx_mbps", 0, 100000));
        traffic.offered_rx_mbps = *v_or;
      }
      if (t["offered_tx_mbps"]) {
        RX_ASSIGN_OR_RETURN(
            v, r.Number(t["offered_tx_mbps"], f + ".traffic.offered_tx_mbps", 0, 100000));
        traffic.offered_tx_mbps = *v_or;
      }
      if (t["synthetic_curve"]) {
        RX_ASSIGN_OR_RETURN(
            curve, ParseSyntheticCurve(r, t["synthetic_curve"], f + ".traffic.synthetic_curve"));
        traffic.synthetic_curve = std::move(*curve_or);
      }
      spec.traffic = traffic;
    }
    if (d["asleep"]) {
      RX_ASSIGN_OR_RETURN(v, r.Bool(d["asleep"], f + ".asleep"));
      spec.asleep = *v_or;
    }
    if (d["plugged"]) {
      RX_ASSIGN_OR_RETURN(v, r.Bool(d["plugged"], f + ".plugged"));
      spec.plugged = *v_or;
    }
    if (d["rtw88_watchdog"]) {
      RX_ASSIGN_OR_RETURN(v, r.Bool(d["rtw88_watchdog"], f + ".rtw88_watchdog"));
      const common::ObservedChip* chip =
          common::LookupObservedChip(spec.config.vid, spec.config.pid);
      if (*v_or && (chip == nullptr || chip->layout->family != common::ChipFamily::kRtw88)) {
        return r.Error(
            d["rtw88_watchdog"], f + ".rtw88_watchdog",
            "only rtw88 adapters (common/chips/rtw88-usb-devices.tsv) have that watchdog");
      }
      spec.rtw88_watchdog = *v_or;
    }
    if (d["read_all_ones"]) {
      RX_ASSIGN_OR_RETURN(v, r.Bool(d["read_all_ones"], f + ".read_all_ones"));
      spec.read_all_ones = *v_or;
    }
    lab.devices.push_back(std::move(spec));
  }
  std::vector<const DeviceConfig*> plugged;
  std::vector<std::string> names;
  for (const DeviceSpec& d : lab.devices) {
    if (!d.plugged) continue;
    plugged.push_back(&d.config);
    names.push_back(d.name);
  }
  RX_RETURN_IF_ERROR(CheckLocations(r, 0, plugged, names));
  RX_ASSIGN_OR_RETURN(topology, PlanTopology(lab, {}));
  return lab;
}

}  // namespace

absl::StatusOr<Lab> ParseLab(const std::string& yaml_text, const std::string& display_path) {
  try {
    return ParseLabUnchecked(yaml_text, display_path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_path, ":", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<Lab> LoadLab(const std::string& path) {
  RX_ASSIGN_OR_RETURN(text, ReadFile(path, "lab"));
  return ParseLab(*text_or, path);
}

namespace {

absl::StatusOr<std::vector<TimelineEvent>> ParseTimelineUnchecked(const std::string& yaml_text,
                                                                  const std::string& display_path,
                                                                  const Lab& lab) {
  Reader r(display_path);
  RX_ASSIGN_OR_RETURN(root, ParseYaml(yaml_text, display_path));
  const YAML::Node doc = *root_or;
  if (doc.IsNull()) return std::vector<TimelineEvent>{};
  if (!doc.IsSequence()) {
    return r.Error(doc, "", "a timeline file is a list of {at, event, device, ...} entries");
  }
  // Current configuration and plug state per device, in time order, for validation and for
  // resolving plug overrides against the previous configuration.
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < doc.size(); ++i) {
    const YAML::Node e = doc[i];
    const std::string f = absl::StrCat("[", i, "]");
    if (!e.IsMap()) return r.Error(e, f, "expected a mapping {at, event, device, ...}");
    if (!e["at"]) return r.Error(e, f, "missing required key 'at'");
    RX_ASSIGN_OR_RETURN(at, r.Number(e["at"], f + ".at", 0, 1e7));
    order.emplace_back(*at_or, i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  std::vector<DeviceConfig> current;
  std::vector<bool> plugged;
  for (const DeviceSpec& d : lab.devices) {
    current.push_back(d.config);
    plugged.push_back(d.plugged);
  }
  std::vector<TimelineEvent> events;
  for (const auto& [at, index] : order) {
    const YAML::Node e = doc[index];
    const std::string f = absl::StrCat("[", index, "]");
    TimelineEvent ev;
    ev.at_seconds = at;
    ev.line = Reader::Line(e);
    if (!e["event"]) return r.Error(e, f, "missing required key 'event'");
    if (!e["device"]) return r.Error(e, f, "missing required key 'device'");
    RX_ASSIGN_OR_RETURN(kind, r.String(e["event"], f + ".event"));
    std::vector<std::string> allowed = {"at", "event", "device"};
    const std::string& k = *kind_or;
    if (k == "unplug") {
      ev.kind = EventKind::kUnplug;
    } else if (k == "plug") {
      ev.kind = EventKind::kPlug;
      for (const std::string& key : ConfigKeys()) allowed.push_back(key);
      allowed.push_back("keep_registers");
    } else if (k == "set_register") {
      ev.kind = EventKind::kSetRegister;
      allowed.insert(allowed.end(), {"address", "value"});
    } else if (k == "sleep") {
      ev.kind = EventKind::kSleep;
    } else if (k == "wake") {
      ev.kind = EventKind::kWake;
    } else if (k == "fail_next") {
      ev.kind = EventKind::kFailNext;
      allowed.insert(allowed.end(), {"count", "mode"});
    } else if (k == "advance_traffic") {
      ev.kind = EventKind::kAdvanceTraffic;
      allowed.push_back("seconds");
    } else {
      return r.Error(e["event"], f + ".event",
                     absl::StrCat("unknown event \"", k,
                                  "\" (expected unplug, plug, set_register, sleep, wake, "
                                  "fail_next, advance_traffic)"));
    }
    RX_RETURN_IF_ERROR(r.CheckKeys(e, f, allowed));
    RX_ASSIGN_OR_RETURN(dev, r.String(e["device"], f + ".device"));
    ev.device = lab.FindDevice(*dev_or);
    if (ev.device < 0) {
      return r.Error(e["device"], f + ".device",
                     absl::StrCat("no device named '", *dev_or, "' in ", lab.path));
    }
    const size_t d = static_cast<size_t>(ev.device);
    switch (ev.kind) {
      case EventKind::kUnplug:
        if (!plugged[d]) {
          return r.Error(e, f, absl::StrCat("device '", *dev_or, "' is not plugged at t=", at));
        }
        plugged[d] = false;
        break;
      case EventKind::kPlug: {
        if (plugged[d]) {
          return r.Error(e, f,
                         absl::StrCat("device '", *dev_or, "' is already plugged at t=", at,
                                      " (unplug it first)"));
        }
        DeviceConfig config = current[d];
        RX_RETURN_IF_ERROR(ApplyConfig(r, e, f, lab.devices[d].name, config));
        if (e["keep_registers"]) {
          RX_ASSIGN_OR_RETURN(v, r.Bool(e["keep_registers"], f + ".keep_registers"));
          ev.keep_registers = *v_or;
        }
        current[d] = config;
        ev.plug_config = config;
        plugged[d] = true;
        std::vector<const DeviceConfig*> now;
        std::vector<std::string> names;
        for (size_t j = 0; j < current.size(); ++j) {
          if (!plugged[j]) continue;
          now.push_back(&current[j]);
          names.push_back(lab.devices[j].name);
        }
        RX_RETURN_IF_ERROR(CheckLocations(r, ev.line, now, names));
        break;
      }
      case EventKind::kSetRegister: {
        for (const char* key : {"address", "value"}) {
          if (!e[key]) return r.Error(e, f, absl::StrCat("missing required key '", key, "'"));
        }
        RX_ASSIGN_OR_RETURN(a, r.Uint(e["address"], f + ".address", 0, 0xffffff, true));
        if (*a_or % 4 != 0) return r.Error(e["address"], f + ".address", "not 32-bit aligned");
        RX_ASSIGN_OR_RETURN(v, r.Uint(e["value"], f + ".value", 0, 0xffffffffull, true));
        ev.address = static_cast<uint32_t>(*a_or);
        ev.value = static_cast<uint32_t>(*v_or);
        break;
      }
      case EventKind::kSleep:
      case EventKind::kWake:
        break;
      case EventKind::kFailNext: {
        if (!e["count"]) return r.Error(e, f, "missing required key 'count'");
        RX_ASSIGN_OR_RETURN(c, r.Uint(e["count"], f + ".count", 1, 1000000));
        ev.count = static_cast<int>(*c_or);
        if (e["mode"]) {
          RX_ASSIGN_OR_RETURN(m, r.String(e["mode"], f + ".mode"));
          if (*m_or == "timeout") {
            ev.mode = FailMode::kTimeout;
          } else if (*m_or == "stall") {
            ev.mode = FailMode::kStall;
          } else if (*m_or == "protocol_error") {
            ev.mode = FailMode::kProtocolError;
          } else {
            return r.Error(
                e["mode"], f + ".mode",
                absl::StrCat("expected timeout, stall or protocol_error; got \"", *m_or, "\""));
          }
        }
        break;
      }
      case EventKind::kAdvanceTraffic: {
        if (!e["seconds"]) return r.Error(e, f, "missing required key 'seconds'");
        RX_ASSIGN_OR_RETURN(s, r.Number(e["seconds"], f + ".seconds", 0, 1e9));
        if (*s_or <= 0) return r.Error(e["seconds"], f + ".seconds", "must be > 0");
        ev.seconds = *s_or;
        break;
      }
    }
    events.push_back(std::move(ev));
  }
  // Reports the timeline file for topology conflicts that only the timeline introduces.
  absl::StatusOr<Topology> topology = PlanTopology(lab, events);
  if (!topology.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(topology.status().message()),
                                                   " (with timeline ", display_path, ")"));
  }
  return events;
}

}  // namespace

absl::StatusOr<std::vector<TimelineEvent>> ParseTimeline(const std::string& yaml_text,
                                                         const std::string& display_path,
                                                         const Lab& lab) {
  try {
    return ParseTimelineUnchecked(yaml_text, display_path, lab);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(display_path, ":", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<std::vector<TimelineEvent>> LoadTimeline(const std::string& path, const Lab& lab) {
  RX_ASSIGN_OR_RETURN(text, ReadFile(path, "timeline"));
  return ParseTimeline(*text_or, path, lab);
}

absl::StatusOr<Topology> PlanTopology(const Lab& lab, const std::vector<TimelineEvent>& timeline) {
  Reader r(lab.path);
  struct Use {
    const DeviceConfig* config;
    std::string name;
    int line;
  };
  std::vector<Use> uses;
  for (const DeviceSpec& d : lab.devices) uses.push_back({&d.config, d.name, d.line});
  for (const TimelineEvent& e : timeline) {
    if (e.kind == EventKind::kPlug) {
      uses.push_back({&e.plug_config, lab.devices[static_cast<size_t>(e.device)].name, e.line});
    }
  }
  Topology topology;
  std::map<int, std::pair<std::string, int>> kind_source;  // bus → who decided its kind
  auto set_kind = [&](int bus, bool superspeed, const std::string& who, int line,
                      double speed) -> absl::Status {
    auto [it, inserted] = topology.try_emplace(bus);
    BusPlan& plan = it->second;
    if (inserted) {
      plan.superspeed = superspeed;
      plan.speed_mbps = superspeed ? 5000 : 480;
      kind_source[bus] = {who, line};
    } else if (plan.superspeed != superspeed) {
      const auto& [first, first_line] = kind_source[bus];
      return r.ErrorAtLine(
          line, "",
          absl::StrCat(who, " puts a ", superspeed ? "USB 3" : "USB 2", " port on bus ", bus,
                       ", but ", first, " (line ", first_line, ") made it a ",
                       plan.superspeed ? "USB 3" : "USB 2",
                       " root hub; Linux puts USB 3 and USB 2 ports on separate buses"));
    }
    if (superspeed && speed > plan.speed_mbps) plan.speed_mbps = speed;
    return absl::OkStatus();
  };
  for (const Use& u : uses) {
    const DeviceConfig& c = *u.config;
    RX_RETURN_IF_ERROR(
        set_kind(c.bus, c.SuperSpeed(), absl::StrCat("device ", u.name), u.line, c.speed_mbps));
    if (!c.peer.empty()) {
      int bus = 0;
      std::string port;
      ParseLocation(c.peer, &bus, &port);
      RX_RETURN_IF_ERROR(set_kind(bus, !c.SuperSpeed(),
                                  absl::StrCat("the peer ", c.peer, " of device ", u.name), u.line,
                                  0));
    }
    if (!c.hub_peer.empty()) {
      int bus = 0;
      std::string port;
      ParseLocation(c.hub_peer, &bus, &port);
      RX_RETURN_IF_ERROR(set_kind(bus, !c.SuperSpeed(),
                                  absl::StrCat("the hub_peer ", c.hub_peer, " of device ", u.name),
                                  u.line, 0));
    }
  }
  auto add_port_path = [&](int bus, const std::string& port) {
    BusPlan& plan = topology[bus];
    std::vector<std::string> hops = absl::StrSplit(port, '.');
    std::string prefix;
    for (const std::string& hop : hops) {
      prefix = prefix.empty() ? hop : absl::StrCat(prefix, ".", hop);
      if (std::find(plan.port_paths.begin(), plan.port_paths.end(), prefix) ==
          plan.port_paths.end()) {
        plan.port_paths.push_back(prefix);
      }
    }
  };
  for (const Use& u : uses) {
    const DeviceConfig& c = *u.config;
    add_port_path(c.bus, c.port);
    BusPlan& plan = topology[c.bus];
    if (std::find(plan.used_devnums.begin(), plan.used_devnums.end(), c.devnum) ==
        plan.used_devnums.end()) {
      plan.used_devnums.push_back(c.devnum);
    }
    for (const std::string* location : {&c.peer, &c.hub_peer}) {
      if (location->empty()) continue;
      int bus = 0;
      std::string port;
      ParseLocation(*location, &bus, &port);
      add_port_path(bus, port);
    }
  }
  for (auto& [bus, plan] : topology) {
    std::sort(plan.port_paths.begin(), plan.port_paths.end());
    std::sort(plan.used_devnums.begin(), plan.used_devnums.end());
  }
  // A port path that leads to a hub (a prefix of a deeper path) cannot also hold a device.
  for (const Use& u : uses) {
    const DeviceConfig& c = *u.config;
    const std::string below = c.port + ".";
    for (const std::string& p : topology[c.bus].port_paths) {
      if (p.rfind(below, 0) == 0) {
        return r.ErrorAtLine(u.line, "",
                             absl::StrCat("device ", u.name, " sits at ", c.SysfsName(),
                                          ", which is also the hub in front of ", c.bus, "-", p));
      }
    }
  }
  return topology;
}

std::string DeviceConfig::HubRootPort() const {
  const size_t dot = port.find('.');
  if (dot == std::string::npos) return "";
  return absl::StrCat(bus, "-", port.substr(0, dot));
}

}  // namespace rxfleet::emulator
