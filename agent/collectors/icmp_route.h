#pragma once

// Where the RTT prober sends an adapter's probes when no target is configured: the IPv4
// default gateway of its netdev, from the kernel's routing table (/proc/net/route).

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace rxfleet::agent {

/// Finds the IPv4 default gateway of `netdev` in /proc/net/route text (the kernel's FIB dump:
/// a header line, then "Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT"
/// per route, addresses as 8 hex digits of the in-memory 32-bit value, i.e. byte-reversed on the
/// little-endian hosts the agent runs on: "010200C0" is 192.0.2.1). A default route has
/// Destination 0, Mask 0 and flags RTF_UP|RTF_GATEWAY; among several, the lowest Metric wins.
/// Returns the gateway as a dotted quad ("192.0.2.1"). Errors: NotFound if `netdev` has no
/// default route; InvalidArgument if the text has no header or a route line is malformed.
absl::StatusOr<std::string> DefaultGatewayFromRoutes(std::string_view route_text,
                                                     std::string_view netdev);

/// The default gateways of one probe round: <procfs_root>/net/route is read at the first
/// lookup and reused for the rest of the round (a new lookup per round follows DHCP changes).
/// Not thread-safe.
class GatewayLookup {
 public:
  explicit GatewayLookup(std::string procfs_root) : procfs_root_(std::move(procfs_root)) {}

  /// The default gateway of `netdev` (DefaultGatewayFromRoutes). Errors: those of
  /// DefaultGatewayFromRoutes, or the read error of the route file (NotFound naming it if it
  /// does not exist).
  absl::StatusOr<std::string> DefaultGateway(std::string_view netdev);

 private:
  std::string procfs_root_;
  std::optional<absl::StatusOr<std::string>> route_text_;
};

}  // namespace rxfleet::agent
