#pragma once

// Why a listening socket cannot be opened, in plain words. HTTP libraries (civetweb behind
// prometheus-cpp's Exposer) and gRPC report a failed bind as "null context when constructing
// CivetServer" or a null server; this asks the kernel directly by binding the address once
// more, so both daemons can say "127.0.0.1:9477 is already in use".

#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::common {

/// The error for a listener `what` ("metrics endpoint", "HTTP endpoint", "gRPC") that could not
/// be opened on `address` (HOST:PORT, IPv6 in brackets; a name is resolved with getaddrinfo).
/// Binds a TCP socket to the address (SO_REUSEADDR, like the servers) and names the cause:
///  - EADDRINUSE: Unavailable "<what>: <address> is already in use (another process listens
///    there: find it with `ss -ltnp 'sport = :<port>'`, or choose another address)";
///  - EACCES: PermissionDenied "<what>: no permission to listen on <address> (ports below 1024
///    need CAP_NET_BIND_SERVICE)";
///  - EADDRNOTAVAIL / unresolvable host: FailedPrecondition "<what>: <address> is not an
///    address of this host";
///  - otherwise (the bind works now, or another errno): Unavailable "<what>: cannot listen on
///    <address>: <library_message>" (with strerror when the bind failed).
absl::Status ListenError(std::string_view what, std::string_view address,
                         std::string_view library_message);

}  // namespace rxfleet::common
