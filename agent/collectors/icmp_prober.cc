#include "agent/collectors/icmp_prober.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/collectors/text.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

namespace txt = ::rxfleet::agent::text;
using common::ToAbslView;

constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIcmpEcho = 8;
constexpr size_t kIcmpHeaderBytes = 8;
constexpr size_t kNonceBytes = 8;
constexpr size_t kMaxWindowSamples = 10000;
// Raw-socket ICMP type filter (linux/icmp.h ICMP_FILTER on SOL_RAW); spelled out here because
// <linux/icmp.h> and <netinet/ip_icmp.h> cannot be included together.
constexpr int kSolRaw = 255;
constexpr int kIcmpFilter = 1;
constexpr unsigned kRtfUp = 0x0001;
constexpr unsigned kRtfGateway = 0x0002;

std::atomic<int> g_logged_socket_kind{0};  // 0 none, 1 datagram, 2 raw

uint16_t InternetChecksum(const uint8_t* data, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += static_cast<uint32_t>(data[i] << 8 | data[i + 1]);
  if (len % 2 == 1) sum += static_cast<uint32_t>(data[len - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// One open ICMP socket bound to a netdev; closed on destruction.
struct Socket {
  int fd = -1;
  bool raw = false;
  uint16_t ident = 0;  // echo identifier for raw sockets (the kernel picks it for datagram ones)
  std::string netdev;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

absl::StatusOr<std::shared_ptr<Socket>> OpenSocket(const std::string& netdev, uint16_t ident,
                                                   const LogFn& log) {
  auto sock = std::make_shared<Socket>();
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

std::string_view ProbeStateName(ProbeState state) {
  switch (state) {
    case ProbeState::kOk:
      return "ok";
    case ProbeState::kUnreachable:
      return "unreachable";
    case ProbeState::kNoTarget:
      return "no_target";
    case ProbeState::kNoNetdev:
      return "no_netdev";
    case ProbeState::kNotPermitted:
      return "not_permitted";
    case ProbeState::kPending:
      return "pending";
    case ProbeState::kError:
      return "error";
  }
  return "error";
}

absl::Status ValidateIcmpProberOptions(const IcmpProberOptions& o) {
  if (o.interval < absl::Milliseconds(10) || o.interval > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe interval ", absl::FormatDuration(o.interval), " out of range 10ms..1h"));
  }
  if (o.timeout < absl::Milliseconds(1) || o.timeout > o.interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe timeout ", absl::FormatDuration(o.timeout),
                     " out of range 1ms..interval (", absl::FormatDuration(o.interval), ")"));
  }
  if (o.payload_bytes < 16 || o.payload_bytes > 1472) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe payload ", o.payload_bytes, " bytes out of range 16..1472"));
  }
  if (o.unreachable_after < 1) {
    return absl::InvalidArgumentError("probe unreachable_after must be at least 1");
  }
  if (!o.target.empty()) {
    in_addr addr{};
    if (inet_pton(AF_INET, o.target.c_str(), &addr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe target \"", o.target, "\" is not an IPv4 address"));
    }
  }
  return absl::OkStatus();
}

struct IcmpProber::Adapter {
  ProbeAdapter config;
  uint64_t generation = 0;
  ProbeState state = ProbeState::kPending;
  std::string detail;
  std::map<ProbeState, prometheus::Gauge*> state_series;
  prometheus::Histogram* rtt = nullptr;
  prometheus::Counter* sent = nullptr;
  prometheus::Counter* lost = nullptr;
  prometheus::Gauge* target_info = nullptr;
  std::string target;                                     // resolved target of the last round
  std::array<ProbeWindowStats, kProbeConsumers> windows;  // one per ProbeConsumer
  std::shared_ptr<Socket> socket;
  uint32_t consecutive_lost = 0;
  uint16_t seq = 0;
};

// One adapter's part of a round.
struct IcmpProber::Probe {
  std::string adapter_id;
  uint64_t generation = 0;
  std::string netdev;
  std::string target;  // explicit target, or resolved
  std::shared_ptr<Socket> socket;
  uint16_t ident = 0;
  uint16_t seq = 0;
  sockaddr_in addr{};
  bool target_resolved = false;
  int64_t sent_realtime_ns = 0;
  SteadyTime sent_steady;
  bool in_flight = false;
  // Outcome.
  std::optional<ProbeState> state;  // set when the round ends in a non-probe state
  std::string detail;
  bool counted_sent = false;
  bool lost = false;
  std::optional<double> rtt_seconds;
  bool drop_socket = false;
};

IcmpProber::IcmpProber(prometheus::Registry& registry, IcmpProberOptions options)
    : options_(std::move(options)),
      rtt_(prometheus::BuildHistogram()
               .Name("rxfleet_adapter_rtt_seconds")
               .Help("Round-trip time of ICMP echo probes sent through the adapter's netdev, in "
                     "seconds.")
               .Register(registry)),
      sent_(prometheus::BuildCounter()
                .Name("rxfleet_adapter_probes_sent_total")
                .Help("ICMP echo probes sent (or attempted) through the adapter's netdev.")
                .Register(registry)),
      lost_(prometheus::BuildCounter()
                .Name("rxfleet_adapter_probes_lost_total")
                .Help("ICMP echo probes without a reply within the timeout, or that could not "
                      "be sent.")
                .Register(registry)),
      state_(prometheus::BuildGauge()
                 .Name("rxfleet_adapter_probe_state")
                 .Help("RTT prober state per adapter: 1 for the current state, 0 for the others.")
                 .Register(registry)),
      target_info_(prometheus::BuildGauge()
                       .Name("rxfleet_adapter_probe_target_info")
                       .Help("Address the RTT prober probes for the adapter (value is always 1).")
                       .Register(registry)) {
  if (!options_.log) options_.log = LogToStderr;
  std::random_device rd;
  nonce_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

absl::StatusOr<std::unique_ptr<IcmpProber>> IcmpProber::Create(prometheus::Registry& registry,
                                                               IcmpProberOptions options) {
  if (absl::Status s = ValidateIcmpProberOptions(options); !s.ok()) return s;
  std::unique_ptr<IcmpProber> prober(new IcmpProber(registry, std::move(options)));
  if (prober->wake_fd_ < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  }
  return prober;
}

IcmpProber::~IcmpProber() {
  Stop();
  absl::MutexLock lock(&mu_);
  while (!adapters_.empty()) RemoveLocked(adapters_.begin()->first);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void IcmpProber::UpsertLocked(const ProbeAdapter& config) {
  auto it = adapters_.find(config.adapter_id);
  if (it != adapters_.end()) {
    Adapter& a = *it->second;
    if (a.config == config) return;
    a.config = config;
    ++a.generation;  // results of an in-flight round for the old config are dropped
    a.socket.reset();
    a.consecutive_lost = 0;
    return;
  }
  auto a = std::make_unique<Adapter>();
  a->config = config;
  const std::map<std::string, std::string> labels = {{"adapter", config.adapter_id}};
  a->rtt = &rtt_.Add(labels, RttBuckets());
  a->sent = &sent_.Add(labels);
  a->lost = &lost_.Add(labels);
  for (ProbeState s : kAllProbeStates) {
    prometheus::Gauge& g =
        state_.Add({{"adapter", config.adapter_id}, {"state", std::string(ProbeStateName(s))}});
    g.Set(s == ProbeState::kPending ? 1 : 0);
    a->state_series[s] = &g;
  }
  adapters_.emplace(config.adapter_id, std::move(a));
}

void IcmpProber::RemoveLocked(std::string_view adapter_id) {
  auto it = adapters_.find(adapter_id);
  if (it == adapters_.end()) return;
  Adapter& a = *it->second;
  rtt_.Remove(a.rtt);
  sent_.Remove(a.sent);
  lost_.Remove(a.lost);
  for (auto& [state, gauge] : a.state_series) state_.Remove(gauge);
  if (a.target_info != nullptr) target_info_.Remove(a.target_info);
  adapters_.erase(it);
}

void IcmpProber::SetAdapters(const std::vector<ProbeAdapter>& adapters) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> gone;
  for (const auto& entry : adapters_) {
    const std::string& id = entry.first;
    if (std::none_of(adapters.begin(), adapters.end(),
                     [&id](const ProbeAdapter& p) { return p.adapter_id == id; })) {
      gone.push_back(id);
    }
  }
  for (const std::string& id : gone) RemoveLocked(id);
  for (const ProbeAdapter& p : adapters) {
    if (!p.adapter_id.empty()) UpsertLocked(p);
  }
}

void IcmpProber::UpsertAdapter(const ProbeAdapter& adapter) {
  if (adapter.adapter_id.empty()) return;
  absl::MutexLock lock(&mu_);
  UpsertLocked(adapter);
}

void IcmpProber::RemoveAdapter(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  RemoveLocked(adapter_id);
}

void IcmpProber::SetStateLocked(Adapter& a, ProbeState state, std::string_view detail) {
  if (state == a.state) {
    a.detail = std::string(detail);
    return;
  }
  a.state_series[a.state]->Set(0);
  a.state_series[state]->Set(1);
  std::string line =
      absl::StrCat("adapter ", a.config.adapter_id, ": RTT probe state ",
                   ToAbslView(ProbeStateName(a.state)), " -> ", ToAbslView(ProbeStateName(state)));
  if (!detail.empty()) absl::StrAppend(&line, " (", ToAbslView(detail), ")");
  options_.log(line);
  a.state = state;
  a.detail = std::string(detail);
}

void IcmpProber::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  running_ = true;
  uint64_t drained = 0;
  while (::read(wake_fd_, &drained, sizeof(drained)) > 0) {
  }
  thread_ = std::thread([this] { Loop(); });
}

void IcmpProber::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

void IcmpProber::Loop() {
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    ProbeOnce();
    const absl::Duration elapsed = absl::FromChrono(std::chrono::steady_clock::now() - start);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval - elapsed);
    if (stop_) return;
  }
}

void IcmpProber::ProbeOnce() {
  absl::MutexLock round_lock(&round_mu_);

  // 1. Snapshot the adapters and assign sequence numbers.
  std::vector<Probe> probes;
  {
    absl::MutexLock lock(&mu_);
    if (!running_) {
      // Called directly (not by the thread): a Stop() signal left from earlier must not cut
      // this round short.
      uint64_t drained = 0;
      while (::read(wake_fd_, &drained, sizeof(drained)) > 0) {
      }
    }
    for (auto& [id, a] : adapters_) {
      Probe p;
      p.adapter_id = id;
      p.generation = a->generation;
      p.netdev = a->config.netdev;
      p.target = !a->config.target.empty() ? a->config.target : options_.target;
      p.socket = a->socket;
      p.seq = ++a->seq;
      probes.push_back(std::move(p));
    }
  }
  if (probes.empty()) {
    absl::MutexLock lock(&mu_);
    ++rounds_;
    return;
  }

  // 2. Resolve targets and send.
  std::optional<absl::StatusOr<std::string>> route_text;
  std::mt19937 rng(static_cast<uint32_t>(nonce_ ^ RealtimeNanos()));
  for (Probe& p : probes) {
    if (p.netdev.empty()) {
      p.state = ProbeState::kNoNetdev;
      p.detail = "adapter has no netdev";
      continue;
    }
    if (p.target.empty()) {
      if (!route_text.has_value()) {
        route_text = txt::ReadSmallFile(options_.procfs_root + "/net/route");
      }
      absl::StatusOr<std::string> gateway = route_text->ok()
                                                ? DefaultGatewayFromRoutes(**route_text, p.netdev)
                                                : absl::StatusOr<std::string>(route_text->status());
      if (!gateway.ok()) {
        p.state = ProbeState::kNoTarget;
        p.detail.assign(gateway.status().message().data(), gateway.status().message().size());
        continue;
      }
      p.target = *gateway;
    }
    p.addr.sin_family = AF_INET;
    if (inet_pton(AF_INET, p.target.c_str(), &p.addr.sin_addr) != 1) {
      p.state = ProbeState::kError;
      p.detail = absl::StrCat("target \"", p.target, "\" is not an IPv4 address");
      continue;
    }
    p.target_resolved = true;
    if (p.socket == nullptr || p.socket->netdev != p.netdev) {
      absl::StatusOr<std::shared_ptr<Socket>> sock =
          OpenSocket(p.netdev, static_cast<uint16_t>(rng()), options_.log);
      if (!sock.ok()) {
        p.state = absl::IsPermissionDenied(sock.status()) ? ProbeState::kNotPermitted
                  : absl::IsNotFound(sock.status())       ? ProbeState::kNoNetdev
                                                          : ProbeState::kError;
        p.detail.assign(sock.status().message().data(), sock.status().message().size());
        continue;
      }
      p.socket = *std::move(sock);
    }
    p.ident = p.socket->ident;

    std::vector<uint8_t> packet(kIcmpHeaderBytes + options_.payload_bytes);
    packet[0] = kIcmpEcho;
    packet[1] = 0;
    packet[4] = static_cast<uint8_t>(p.ident >> 8);
    packet[5] = static_cast<uint8_t>(p.ident & 0xff);
    packet[6] = static_cast<uint8_t>(p.seq >> 8);
    packet[7] = static_cast<uint8_t>(p.seq & 0xff);
    std::memcpy(&packet[kIcmpHeaderBytes], &nonce_, kNonceBytes);
    for (size_t i = kIcmpHeaderBytes + kNonceBytes; i < packet.size(); ++i) {
      packet[i] = static_cast<uint8_t>(i);
    }
    const uint16_t checksum = InternetChecksum(packet.data(), packet.size());
    packet[2] = static_cast<uint8_t>(checksum >> 8);
    packet[3] = static_cast<uint8_t>(checksum & 0xff);

    p.counted_sent = true;
    p.sent_steady = std::chrono::steady_clock::now();
    p.sent_realtime_ns = RealtimeNanos();
    const ssize_t n = ::sendto(p.socket->fd, packet.data(), packet.size(), 0,
                               reinterpret_cast<const sockaddr*>(&p.addr), sizeof(p.addr));
    if (n < 0) {
      const int err = errno;
      p.lost = true;
      if (err == ENETUNREACH || err == EHOSTUNREACH || err == EHOSTDOWN || err == EADDRNOTAVAIL ||
          err == ENOBUFS || err == EAGAIN) {
        p.detail = absl::StrCat("send to ", p.target, " via ", p.netdev, ": ", ErrnoText(err));
      } else if (err == ENODEV || err == ENXIO || err == ENETDOWN) {
        p.state = ProbeState::kNoNetdev;
        p.detail = absl::StrCat("netdev ", p.netdev, ": ", ErrnoText(err));
        p.drop_socket = true;
      } else if (err == EPERM || err == EACCES) {
        p.state = ProbeState::kNotPermitted;
        p.detail = absl::StrCat("send to ", p.target, " refused: ", ErrnoText(err));
      } else {
        p.state = ProbeState::kError;
        p.detail = absl::StrCat("send to ", p.target, ": ", ErrnoText(err));
        p.drop_socket = true;
      }
      continue;
    }
    p.in_flight = true;
  }

  // 3. Collect replies until all arrive or the timeout passes; Stop() wakes us via wake_fd_.
  const auto timeout = absl::ToChronoNanoseconds(options_.timeout);
  bool stopped = false;
  while (!stopped) {
    std::vector<pollfd> fds;
    std::vector<Probe*> owners;
    std::optional<SteadyTime> deadline;
    const SteadyTime now = std::chrono::steady_clock::now();
    for (Probe& p : probes) {
      if (!p.in_flight) continue;
      const SteadyTime expires = p.sent_steady + timeout;
      if (now >= expires) {
        p.in_flight = false;
        p.lost = true;
        p.detail = absl::StrCat("no reply from ", p.target, " via ", p.netdev, " within ",
                                absl::FormatDuration(options_.timeout));
        continue;
      }
      if (!deadline.has_value() || expires < *deadline) deadline = expires;
      fds.push_back(pollfd{p.socket->fd, POLLIN, 0});
      owners.push_back(&p);
    }
    if (fds.empty()) break;
    fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now);
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (fds.back().revents != 0) {
      stopped = true;  // in-flight probes are neither answered nor lost
      break;
    }
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Probe& p = *owners[i];
      // Drain the socket: replies to earlier, timed-out probes are discarded by seq.
      while (p.in_flight) {
        uint8_t buf[2048];
        char control[256];
        sockaddr_in from{};
        iovec iov{buf, sizeof(buf)};
        msghdr msg{};
        msg.msg_name = &from;
        msg.msg_namelen = sizeof(from);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        const ssize_t n = ::recvmsg(p.socket->fd, &msg, MSG_DONTWAIT);
        const SteadyTime arrived = std::chrono::steady_clock::now();
        if (n < 0) {
          const int err = errno;
          if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) break;
          // An ICMP error reported on the socket (host/net unreachable): this probe is lost.
          p.in_flight = false;
          p.lost = true;
          p.detail = absl::StrCat("probe to ", p.target, " via ", p.netdev, ": ", ErrnoText(err));
          break;
        }
        size_t offset = 0;
        if (p.socket->raw) {
          if (n < 20) continue;
          offset = static_cast<size_t>(buf[0] & 0x0f) * 4;
        }
        if (static_cast<size_t>(n) < offset + kIcmpHeaderBytes + kNonceBytes) continue;
        const uint8_t* icmp = buf + offset;
        const uint16_t ident = static_cast<uint16_t>(icmp[4] << 8 | icmp[5]);
        const uint16_t seq = static_cast<uint16_t>(icmp[6] << 8 | icmp[7]);
        if (icmp[0] != kIcmpEchoReply || seq != p.seq) continue;
        if (p.socket->raw && ident != p.ident) continue;
        if (from.sin_addr.s_addr != p.addr.sin_addr.s_addr) continue;
        if (std::memcmp(icmp + kIcmpHeaderBytes, &nonce_, kNonceBytes) != 0) continue;
        double rtt = std::chrono::duration<double>(arrived - p.sent_steady).count();
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            timespec ts{};
            std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            const int64_t rx_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
            const double kernel_rtt = static_cast<double>(rx_ns - p.sent_realtime_ns) / 1e9;
            // Use the kernel stamp unless the wall clock stepped during the probe.
            if (kernel_rtt > 0 && kernel_rtt <= rtt) rtt = kernel_rtt;
          }
        }
        p.rtt_seconds = rtt;
        p.in_flight = false;
      }
    }
  }

  // 4. Apply the outcomes to adapters that still have the configuration the round used.
  absl::MutexLock lock(&mu_);
  for (Probe& p : probes) {
    auto it = adapters_.find(p.adapter_id);
    if (it == adapters_.end() || it->second->generation != p.generation) continue;
    Adapter& a = *it->second;
    a.socket = p.drop_socket ? nullptr : p.socket;

    // The target info series follows the resolved target.
    const std::string target = p.target_resolved ? p.target : std::string();
    if (target != a.target) {
      if (a.target_info != nullptr) target_info_.Remove(a.target_info);
      a.target_info = nullptr;
      if (!target.empty()) {
        a.target_info = &target_info_.Add({{"adapter", p.adapter_id}, {"target", target}});
        a.target_info->Set(1);
      }
      a.target = target;
    }

    if (p.counted_sent) {
      a.sent->Increment();
      for (ProbeWindowStats& w : a.windows) ++w.sent;
    }
    if (p.rtt_seconds.has_value()) {
      a.rtt->Observe(*p.rtt_seconds);
      for (ProbeWindowStats& w : a.windows) {
        if (w.rtt_seconds.size() < kMaxWindowSamples) w.rtt_seconds.push_back(*p.rtt_seconds);
      }
      a.consecutive_lost = 0;
      SetStateLocked(a, ProbeState::kOk, "");
      continue;
    }
    if (p.lost) {
      a.lost->Increment();
      for (ProbeWindowStats& w : a.windows) ++w.lost;
    }
    if (p.state.has_value()) {
      a.consecutive_lost = 0;
      SetStateLocked(a, *p.state, p.detail);
      continue;
    }
    if (p.lost) {
      ++a.consecutive_lost;
      if (a.consecutive_lost >= options_.unreachable_after) {
        SetStateLocked(a, ProbeState::kUnreachable,
                       absl::StrCat(a.consecutive_lost, " probes lost; last: ", p.detail));
      }
    }
  }
  ++rounds_;
}

std::optional<ProbeState> IcmpProber::State(std::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  auto it = adapters_.find(adapter_id);
  if (it == adapters_.end()) return std::nullopt;
  return it->second->state;
}

std::map<std::string, ProbeWindowStats> IcmpProber::TakeWindowStats(ProbeConsumer consumer) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, ProbeWindowStats> out;
  const size_t slot = static_cast<size_t>(consumer);
  for (auto& [id, a] : adapters_) out[id] = std::exchange(a->windows[slot], ProbeWindowStats{});
  return out;
}

uint64_t IcmpProber::rounds() const {
  absl::MutexLock lock(&mu_);
  return rounds_;
}

bool IcmpProber::WaitForRounds(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return rounds_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

const std::vector<double>& IcmpProber::RttBuckets() {
  // 0.1 ms .. 100 ms, densest around 0.5-3 ms where the hold changes RTT (1.2-2.3 ms on USB 3
  // hosts, 0.65-1.5 ms on a Pi 5).
  static const std::vector<double> buckets = {0.0001, 0.00025, 0.0005, 0.00075, 0.001,
                                              0.0015, 0.002,   0.003,  0.005,   0.0075,
                                              0.01,   0.025,   0.05,   0.1};
  return buckets;
}

}  // namespace rxfleet::agent
