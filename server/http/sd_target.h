#pragma once

// Which metrics addresses the server publishes in /sd/agents. An agent announces its own
// address in Hello.metrics_address and Prometheus scrapes whatever the server lists, so a
// hostile or misconfigured agent could point Prometheus at the cloud metadata service
// (169.254.169.254:80) or at any other host. docs/SECURITY.md, "HTTP".

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::server {

struct SdTargetPolicy {
  /// The address's host must be an IP literal equal to the IP address the agent's stream came
  /// from (rxfleet-server --sd-require-peer-address). Off by default: agents behind NAT or
  /// announcing a DNS name would otherwise drop out of service discovery.
  bool require_peer_address = false;
};

/// Whether /sd/agents may publish `metrics_address` (HOST:PORT or [IPv6]:PORT, as validated at
/// Hello) of an agent whose stream came from `peer` (a gRPC peer string such as
/// "ipv4:10.0.0.5:51234", or its address part). Always refused (FailedPrecondition with the
/// reason): link-local addresses (169.254.0.0/16, where cloud metadata services live, and
/// fe80::/10), unspecified (0.0.0.0/8, ::), multicast and broadcast addresses, also as
/// IPv4-mapped IPv6. With `policy.require_peer_address`, also a host that is not the peer's
/// IP address (DNS names included: they are not resolved). Loopback and private addresses
/// are allowed (single-machine setups, lab networks).
absl::Status CheckSdTarget(std::string_view metrics_address, std::string_view peer,
                           const SdTargetPolicy& policy);

}  // namespace rxfleet::server
