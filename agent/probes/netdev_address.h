#pragma once

// The IPv4 address a probe binds to: the first IPv4 address of the adapter's netdev, from
// getifaddrs(3). Behind a small pure function so tests feed interface lists.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rxfleet::agent {

/// One entry of getifaddrs(3), reduced to what a probe needs.
struct InterfaceAddress {
  std::string name;  ///< netdev name ("wlan0")
  bool up = false;   ///< IFF_UP set
  /// Dotted IPv4 address, empty for entries of other families (AF_PACKET, AF_INET6).
  std::string ipv4;
};

/// The first IPv4 address of `netdev` among `interfaces`. Errors: NotFound ("netdev wlan0 is
/// missing") if no entry has the name, FailedPrecondition ("netdev wlan0 is down" / "netdev
/// wlan0 has no IPv4 address") otherwise; an empty name is NotFound too.
absl::StatusOr<std::string> PickNetdevIpv4(const std::vector<InterfaceAddress>& interfaces,
                                           std::string_view netdev);

/// getifaddrs(3) as InterfaceAddress entries. Internal with errno's text if it fails.
absl::StatusOr<std::vector<InterfaceAddress>> ReadInterfaceAddresses();

}  // namespace rxfleet::agent
