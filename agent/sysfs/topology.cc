#include "agent/sysfs/topology.h"

#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

bool IsSuperSpeedOrFaster(common::UsbSpeed speed) {
  return speed == common::UsbSpeed::kSuper || speed == common::UsbSpeed::kSuperPlus;
}

common::UsbSpeed ReadSpeed(const UsbSysfs& sysfs, std::string_view name) {
  const std::optional<std::string> text = sysfs.ReadAttribute(name, "speed");
  return text ? common::UsbSpeedFromSysfs(*text) : common::UsbSpeed::kUnknown;
}

}  // namespace

bool UsbTopology::Usb3Partner() const {
  return IsSuperSpeedOrFaster(root_speed) || !peer_port_path.empty();
}

UsbTopology ReadUsbTopology(const UsbSysfs& sysfs, std::string_view port_path) {
  UsbTopology topology;
  topology.port_path = std::string(port_path);
  const std::optional<PortPath> parsed = ParsePortPath(port_path);
  if (!parsed) return topology;
  topology.bus = parsed->bus;
  topology.root_speed = ReadSpeed(sysfs, absl::StrCat("usb", parsed->bus));
  PortPath prefix{parsed->bus, {}};
  for (size_t i = 0; i + 1 < parsed->ports.size(); ++i) {
    prefix.ports.push_back(parsed->ports[i]);
    HubHop hop;
    hop.port_path = FormatPortPath(prefix);
    hop.speed = ReadSpeed(sysfs, hop.port_path);
    hop.upstream_peer = sysfs.PeerPortPath(hop.port_path).value_or("");
    topology.hubs.push_back(std::move(hop));
  }
  topology.peer_port_path = sysfs.PeerPortPath(port_path).value_or("");
  return topology;
}

std::string BoundDriver(const UsbSysfs& sysfs, std::string_view port_path) {
  if (port_path.empty() || port_path.find('/') != std::string_view::npos) return "";
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::read_symlink(
      absl::StrCat(sysfs.root(), "/bus/usb/devices/", common::ToAbslView(port_path), ":1.0/driver"),
      ec);
  return ec ? std::string() : target.filename().string();
}

std::string FormatHubChain(const std::vector<HubHop>& hubs) {
  return absl::StrJoin(hubs, " > ", [](std::string* out, const HubHop& hop) {
    absl::StrAppend(out, hop.port_path, " (",
                    common::ToAbslView(common::UsbSpeedDisplayName(hop.speed)), ")");
  });
}

}  // namespace rxfleet::agent
