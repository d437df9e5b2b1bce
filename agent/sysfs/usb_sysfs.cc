#include "agent/sysfs/usb_sysfs.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

namespace fs = std::filesystem;
using common::ToAbslView;

// Longest hub chain the USB specification allows below a root hub (tiers 2..7).
constexpr size_t kMaxPortDepth = 7;

std::optional<uint8_t> ParseByte(std::string_view text) {
  if (text.empty() || text.size() > 3) return std::nullopt;
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 255) {
    return std::nullopt;
  }
  return static_cast<uint8_t>(value);
}

// A plain directory entry name: non-empty, no separators, not "." or "..".
bool IsPlainName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::optional<std::string> LinkBasename(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  if (ec) return std::nullopt;
  std::string name = target.filename().string();
  if (name.empty()) name = target.parent_path().filename().string();  // trailing slash
  if (!IsPlainName(name)) return std::nullopt;
  return name;
}

}  // namespace

std::optional<PortPath> ParsePortPath(std::string_view text) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::optional<uint8_t> bus = ParseByte(text.substr(0, dash));
  if (!bus.has_value()) return std::nullopt;
  PortPath path{.bus = *bus, .ports = {}};
  for (absl::string_view part : absl::StrSplit(ToAbslView(text.substr(dash + 1)), '.')) {
    const std::optional<uint8_t> port = ParseByte(common::ToStdView(part));
    if (!port.has_value()) return std::nullopt;
    path.ports.push_back(*port);
  }
  if (path.ports.size() > kMaxPortDepth) return std::nullopt;
  return path;
}

std::string FormatPortPath(const PortPath& path) {
  return absl::StrCat(path.bus, "-",
                      absl::StrJoin(path.ports, ".", [](std::string* out, uint8_t port) {
                        absl::StrAppend(out, port);
                      }));
}

std::optional<std::string> PortPathFromPortDirName(std::string_view name) {
  constexpr std::string_view kPortMarker = "-port";
  const size_t marker = name.rfind(kPortMarker);
  if (marker == std::string_view::npos) return std::nullopt;
  const std::optional<uint8_t> port = ParseByte(name.substr(marker + kPortMarker.size()));
  if (!port.has_value()) return std::nullopt;
  const std::string_view prefix = name.substr(0, marker);
  std::string result;
  if (prefix.starts_with("usb")) {
    // Root hub port: usbB-portX.
    const std::optional<uint8_t> bus = ParseByte(prefix.substr(3));
    if (!bus.has_value()) return std::nullopt;
    result = absl::StrCat(*bus, "-", *port);
  } else {
    // Port of an external hub whose own port path is the prefix: <hub>-portX.
    if (!ParsePortPath(prefix).has_value()) return std::nullopt;
    result = absl::StrCat(ToAbslView(prefix), ".", *port);
  }
  if (!ParsePortPath(result).has_value()) return std::nullopt;  // too deep
  return result;
}

UsbSysfs::UsbSysfs(std::string sysfs_root) : sysfs_root_(std::move(sysfs_root)) {}

std::string UsbSysfs::DeviceDir(std::string_view name) const {
  return absl::StrCat(sysfs_root_, "/bus/usb/devices/", ToAbslView(name));
}

std::optional<std::string> UsbSysfs::PeerPortPath(std::string_view port_path) const {
  if (!IsPlainName(port_path)) return std::nullopt;
  // <dev>/port is a link to the port directory of the hub port the device is plugged into;
  // the kernel resolves the relative `peer` link inside it for us.
  const fs::path peer_link = fs::path(DeviceDir(port_path)) / "port" / "peer";
  const std::optional<std::string> peer_dir = LinkBasename(peer_link);
  if (!peer_dir.has_value()) return std::nullopt;
  return PortPathFromPortDirName(*peer_dir);
}

std::string UsbSysfs::StableAdapterId(std::string_view port_path) const {
  std::string canonical(port_path);
  if (const std::optional<std::string> peer = PeerPortPath(port_path); peer.has_value()) {
    const std::optional<PortPath> own_parsed = ParsePortPath(port_path);
    const std::optional<PortPath> peer_parsed = ParsePortPath(*peer);
    if (own_parsed.has_value() && peer_parsed.has_value() && *peer_parsed < *own_parsed) {
      canonical = *peer;
    }
  }
  return absl::StrCat("port-", canonical);
}

std::optional<UsbSysfs::NetdevInfo> UsbSysfs::Netdev(std::string_view port_path) const {
  if (!IsPlainName(port_path)) return std::nullopt;
  const fs::path interface_dir = DeviceDir(absl::StrCat(ToAbslView(port_path), ":1.0"));
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(interface_dir / "net", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (IsPlainName(name)) names.push_back(std::move(name));
  }
  if (names.empty()) return std::nullopt;
  std::sort(names.begin(), names.end());
  NetdevInfo info;
  info.name = names.front();
  info.driver = LinkBasename(interface_dir / "driver").value_or("");
  info.statistics_dir = (interface_dir / "net" / info.name / "statistics").string();
  return info;
}

std::optional<std::string> UsbSysfs::ReadAttribute(std::string_view port_path,
                                                   std::string_view attr) const {
  if (!IsPlainName(port_path) || !IsPlainName(attr)) return std::nullopt;
  std::ifstream in(absl::StrCat(DeviceDir(port_path), "/", ToAbslView(attr)), std::ios::binary);
  if (!in) return std::nullopt;
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(contents));
}

}  // namespace rxfleet::agent
