#include "agent/collectors/icmp_socket.h"

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

constexpr uint8_t kIcmpEchoReply = 0;
// Raw-socket ICMP type filter (linux/icmp.h ICMP_FILTER on SOL_RAW); spelled out here because
// <linux/icmp.h> and <netinet/ip_icmp.h> cannot be included together.
constexpr int kSolRaw = 255;
constexpr int kIcmpFilter = 1;

std::atomic<int> g_logged_socket_kind{0};  // 0 none, 1 datagram, 2 raw

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

IcmpSocket::~IcmpSocket() {
  if (fd >= 0) ::close(fd);
}

absl::StatusOr<std::shared_ptr<IcmpSocket>> OpenIcmpSocket(const std::string& netdev,
                                                           uint16_t ident, const LogFn& log) {
  auto sock = std::make_shared<IcmpSocket>();
  sock->netdev = netdev;
  sock->ident = ident;
  sock->fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
  const int dgram_errno = sock->fd < 0 ? errno : 0;
  if (sock->fd < 0) {
    sock->fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
    sock->raw = true;
  }
  if (sock->fd < 0) {
    const int raw_errno = errno;
    if (raw_errno == EPERM || raw_errno == EACCES) {
      return absl::PermissionDeniedError(absl::StrCat(
          "ICMP datagram socket refused (", ErrnoText(dgram_errno),
          "; allow the agent's group in net.ipv4.ping_group_range) and raw socket refused (",
          ErrnoText(raw_errno), "; needs CAP_NET_RAW)"));
    }
    return absl::InternalError(absl::StrCat("cannot open an ICMP socket: ", ErrnoText(raw_errno)));
  }
  const int kind = sock->raw ? 2 : 1;
  if (g_logged_socket_kind.exchange(kind) != kind) {
    log(sock->raw ? absl::StrCat("ICMP probes use raw sockets (ICMP datagram socket refused: ",
                                 ErrnoText(dgram_errno), ")")
                  : std::string("ICMP probes use unprivileged ICMP datagram sockets"));
  }
  if (::setsockopt(sock->fd, SOL_SOCKET, SO_BINDTODEVICE, netdev.c_str(),
                   static_cast<socklen_t>(netdev.size())) != 0) {
    const int err = errno;
    if (err == ENODEV) return absl::NotFoundError(absl::StrCat("no netdev ", netdev));
    if (err == EPERM || err == EACCES) {
      return absl::PermissionDeniedError(
          absl::StrCat("SO_BINDTODEVICE ", netdev, " refused: ", ErrnoText(err)));
    }
    return absl::InternalError(absl::StrCat("SO_BINDTODEVICE ", netdev, ": ", ErrnoText(err)));
  }
  const int on = 1;
  // Kernel receive timestamps; without them RTTs fall back to user-space timing.
  (void)::setsockopt(sock->fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
  if (sock->raw) {
    // Only echo replies wake us up (raw ICMP sockets otherwise see every ICMP packet).
    const uint32_t mask = ~(1u << kIcmpEchoReply);
    (void)::setsockopt(sock->fd, kSolRaw, kIcmpFilter, &mask, sizeof(mask));
  }
  return sock;
}

absl::Status SendErrorStatus(int err, std::string_view target, std::string_view netdev) {
  const std::string text = ErrnoText(err);
  if (err == ENETUNREACH || err == EHOSTUNREACH || err == EHOSTDOWN || err == EADDRNOTAVAIL ||
      err == ENOBUFS || err == EAGAIN) {
    return absl::UnavailableError(
        absl::StrCat("send to ", ToAbslView(target), " via ", ToAbslView(netdev), ": ", text));
  }
  if (err == ENODEV || err == ENXIO || err == ENETDOWN) {
    return absl::NotFoundError(absl::StrCat("netdev ", ToAbslView(netdev), ": ", text));
  }
  if (err == EPERM || err == EACCES) {
    return absl::PermissionDeniedError(
        absl::StrCat("send to ", ToAbslView(target), " refused: ", text));
  }
  return absl::InternalError(absl::StrCat("send to ", ToAbslView(target), ": ", text));
}

absl::Status SendDatagram(const IcmpSocket& socket, std::span<const uint8_t> packet,
                          const sockaddr_in& to, std::string_view target) {
  const ssize_t n = ::sendto(socket.fd, packet.data(), packet.size(), 0,
                             reinterpret_cast<const sockaddr*>(&to), sizeof(to));
  if (n < 0) return SendErrorStatus(errno, target, socket.netdev);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ReceivedDatagram>> ReceiveDatagram(const IcmpSocket& socket,
                                                                std::span<uint8_t> buffer) {
  char control[256];
  sockaddr_in from{};
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof(from);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(socket.fd, &msg, MSG_DONTWAIT);
  if (n < 0) {
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return std::nullopt;
    return absl::UnavailableError(ErrnoText(err));
  }
  ReceivedDatagram datagram;
  datagram.bytes = static_cast<size_t>(n);
  datagram.from = from.sin_addr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      datagram.kernel_rx_realtime_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
  }
  return datagram;
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ProbeRttSeconds(double steady_rtt_seconds, std::optional<int64_t> kernel_rx_realtime_ns,
                       int64_t sent_realtime_ns) {
  if (!kernel_rx_realtime_ns) return steady_rtt_seconds;
  const double kernel_rtt = static_cast<double>(*kernel_rx_realtime_ns - sent_realtime_ns) / 1e9;
  return kernel_rtt > 0 && kernel_rtt <= steady_rtt_seconds ? kernel_rtt : steady_rtt_seconds;
}

}  // namespace rxfleet::agent
