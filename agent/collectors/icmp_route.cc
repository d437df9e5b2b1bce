#include "agent/collectors/icmp_route.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/collectors/text.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

namespace txt = ::rxfleet::agent::text;
using common::ToAbslView;

constexpr unsigned kRtfUp = 0x0001;
constexpr unsigned kRtfGateway = 0x0002;

}  // namespace

absl::StatusOr<std::string> DefaultGatewayFromRoutes(std::string_view route_text,
                                                     std::string_view netdev) {
  std::vector<std::string_view> lines;
  for (std::string_view line : txt::Lines(route_text)) {
    if (!txt::Trim(line).empty()) lines.push_back(line);
  }
  if (lines.empty() || txt::Trim(lines[0]).substr(0, 5) != "Iface") {
    return absl::InvalidArgumentError("route table: missing \"Iface ...\" header line");
  }
  std::optional<std::pair<uint64_t, uint64_t>> best;  // metric, gateway (in_addr s_addr)
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string_view> f = txt::Fields(lines[i]);
    if (f.size() < 8) {
      return absl::InvalidArgumentError(
          absl::StrCat("route table line ", i + 1, ": ", f.size(), " fields, need 8"));
    }
    uint64_t destination = 0, gateway = 0, flags = 0, metric = 0, mask = 0;
    if (!txt::ParseHex(f[1], &destination) || !txt::ParseHex(f[2], &gateway) ||
        !txt::ParseHex(f[3], &flags) || !txt::ParseDecimal(f[6], &metric) ||
        !txt::ParseHex(f[7], &mask) || gateway > 0xffffffffu) {
      return absl::InvalidArgumentError(
          absl::StrCat("route table line ", i + 1, ": malformed number"));
    }
    if (f[0] != netdev || destination != 0 || mask != 0) continue;
    if ((flags & (kRtfUp | kRtfGateway)) != (kRtfUp | kRtfGateway)) continue;
    if (!best.has_value() || metric < best->first) best = std::make_pair(metric, gateway);
  }
  if (!best.has_value()) {
    return absl::NotFoundError(absl::StrCat("no IPv4 default route via ", ToAbslView(netdev)));
  }
  // The kernel prints the in-memory (network byte order) address as a host-order integer, so
  // storing the parsed integer back as s_addr restores the address on the host that printed it.
  in_addr addr{};
  addr.s_addr = static_cast<uint32_t>(best->second);
  char dotted[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr, dotted, sizeof(dotted));
  return std::string(dotted);
}

absl::StatusOr<std::string> GatewayLookup::DefaultGateway(std::string_view netdev) {
  if (!route_text_.has_value()) route_text_ = txt::ReadSmallFile(procfs_root_ + "/net/route");
  if (!route_text_->ok()) return route_text_->status();
  return DefaultGatewayFromRoutes(**route_text_, netdev);
}

}  // namespace rxfleet::agent
