#pragma once

// The RTT prober's sockets: one ICMP socket per adapter, bound to its netdev. An unprivileged
// ICMP datagram socket (socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP), allowed when the agent's
// group is inside net.ipv4.ping_group_range) is tried first, then a raw socket (needs
// CAP_NET_RAW). Errors use one code per prober state: PermissionDenied -> not_permitted,
// NotFound -> no_netdev, Unavailable -> the probe is lost (no route, host unreachable, full
// buffers), Internal -> error.

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/collectors/collector.h"

namespace rxfleet::agent {

/// One open ICMP socket bound to a netdev; closed on destruction.
struct IcmpSocket {
  int fd = -1;
  /// A raw socket (CAP_NET_RAW): replies arrive with their IPv4 header and the echo identifier
  /// is ours; on a datagram socket the kernel picks the identifier.
  bool raw = false;
  /// Echo identifier of the requests (raw sockets only).
  uint16_t ident = 0;
  std::string netdev;

  IcmpSocket() = default;
  IcmpSocket(const IcmpSocket&) = delete;
  IcmpSocket& operator=(const IcmpSocket&) = delete;
  ~IcmpSocket();
};

/// Opens a non-blocking ICMP socket bound to `netdev` (SO_BINDTODEVICE) with kernel receive
/// timestamps (SO_TIMESTAMPNS) and, on raw sockets, an ICMP filter that passes echo replies
/// only. Which kind is in use is logged once per change of kind. Errors: PermissionDenied if
/// neither kind may be opened (the message says what to allow) or SO_BINDTODEVICE is refused;
/// NotFound if `netdev` does not exist; Internal for other errno values.
absl::StatusOr<std::shared_ptr<IcmpSocket>> OpenIcmpSocket(const std::string& netdev,
                                                           uint16_t ident, const LogFn& log);

/// The errno of a failed sendto(2) as a Status of the codes above: ENETUNREACH, EHOSTUNREACH,
/// EHOSTDOWN, EADDRNOTAVAIL, ENOBUFS, EAGAIN -> Unavailable ("send to T via N: ..."); ENODEV,
/// ENXIO, ENETDOWN -> NotFound ("netdev N: ..."); EPERM, EACCES -> PermissionDenied ("send to
/// T refused: ..."); anything else -> Internal ("send to T: ...").
absl::Status SendErrorStatus(int err, std::string_view target, std::string_view netdev);

/// Sends `packet` to `to` (SendErrorStatus on failure).
absl::Status SendDatagram(const IcmpSocket& socket, std::span<const uint8_t> packet,
                          const sockaddr_in& to, std::string_view target);

/// One received datagram.
struct ReceivedDatagram {
  size_t bytes = 0;
  /// Sender address (network byte order).
  in_addr from{};
  /// Kernel receive time, CLOCK_REALTIME nanoseconds (SCM_TIMESTAMPNS), when the kernel gave one.
  std::optional<int64_t> kernel_rx_realtime_ns;
};

/// Reads one waiting datagram into `buffer` (truncated to its size). nullopt when none is
/// waiting (EAGAIN, EINTR). Errors: Unavailable with the errno text for an ICMP error queued
/// on the socket (host or network unreachable): the probe in flight is lost.
absl::StatusOr<std::optional<ReceivedDatagram>> ReceiveDatagram(const IcmpSocket& socket,
                                                                std::span<uint8_t> buffer);

/// CLOCK_REALTIME in nanoseconds (the clock of SCM_TIMESTAMPNS).
int64_t RealtimeNanos();

/// The RTT of one answered probe, seconds: the kernel receive stamp minus the send time on
/// CLOCK_REALTIME when there is a stamp and it lies in (0, steady_rtt_seconds] (a wall-clock
/// step during the probe makes it fall outside), else `steady_rtt_seconds` (user-space timing
/// on the steady clock).
double ProbeRttSeconds(double steady_rtt_seconds, std::optional<int64_t> kernel_rx_realtime_ns,
                       int64_t sent_realtime_ns);

}  // namespace rxfleet::agent
