// The prober: per-adapter state and series, and the probe round in four steps (snapshot, send,
// collect replies, apply outcomes). Length reason: these share the adapter records and their
// lock, so they stay in one file; packets, sockets and gateway lookup are in icmp_packet,
// icmp_socket and icmp_route.
#include "agent/collectors/icmp_prober.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/collectors/icmp_packet.h"
#include "agent/collectors/icmp_socket.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

constexpr size_t kMaxWindowSamples = 10000;

// The prober state a socket error puts the adapter in (codes of agent/collectors/icmp_socket.h).
ProbeState StateOfSocketError(const absl::Status& status) {
  if (absl::IsPermissionDenied(status)) return ProbeState::kNotPermitted;
  if (absl::IsNotFound(status)) return ProbeState::kNoNetdev;
  return ProbeState::kError;
}

// Consumes a Stop() signal left in the eventfd.
void DrainWakeFd(int fd) {
  uint64_t drained = 0;
  while (::read(fd, &drained, sizeof(drained)) > 0) {
  }
}

}  // namespace

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
  std::shared_ptr<IcmpSocket> socket;
  uint32_t consecutive_lost = 0;
  uint16_t seq = 0;
};

// One adapter's part of a round.
struct IcmpProber::Probe {
  std::string adapter_id;
  uint64_t generation = 0;
  std::string netdev;
  std::string target;  // explicit target, or resolved
  std::shared_ptr<IcmpSocket> socket;
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
    return absl::ResourceExhaustedError(absl::StrCat("eventfd: ", std::strerror(errno)));
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
  DrainWakeFd(wake_fd_);
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
  std::vector<Probe> probes = SnapshotRound();
  if (!probes.empty()) {
    GatewayLookup gateways(options_.procfs_root);
    std::mt19937 rng(static_cast<uint32_t>(nonce_ ^ RealtimeNanos()));
    for (Probe& p : probes) SendProbe(p, gateways, rng);
    CollectReplies(probes);
  }
  FinishRound(probes);
}

std::vector<IcmpProber::Probe> IcmpProber::SnapshotRound() {
  std::vector<Probe> probes;
  absl::MutexLock lock(&mu_);
  if (!running_) {
    // Called directly (not by the thread): a Stop() signal left from earlier must not cut
    // this round short.
    DrainWakeFd(wake_fd_);
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
  return probes;
}

void IcmpProber::SendProbe(Probe& p, GatewayLookup& gateways, std::mt19937& rng) {
  if (p.netdev.empty()) {
    p.state = ProbeState::kNoNetdev;
    p.detail = "adapter has no netdev";
    return;
  }
  if (p.target.empty()) {
    absl::StatusOr<std::string> gateway = gateways.DefaultGateway(p.netdev);
    if (!gateway.ok()) {
      p.state = ProbeState::kNoTarget;
      p.detail = std::string(gateway.status().message());
      return;
    }
    p.target = *gateway;
  }
  p.addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, p.target.c_str(), &p.addr.sin_addr) != 1) {
    p.state = ProbeState::kError;
    p.detail = absl::StrCat("target \"", p.target, "\" is not an IPv4 address");
    return;
  }
  p.target_resolved = true;
  if (p.socket == nullptr || p.socket->netdev != p.netdev) {
    absl::StatusOr<std::shared_ptr<IcmpSocket>> sock =
        OpenIcmpSocket(p.netdev, static_cast<uint16_t>(rng()), options_.log);
    if (!sock.ok()) {
      p.state = StateOfSocketError(sock.status());
      p.detail = std::string(sock.status().message());
      return;
    }
    p.socket = *std::move(sock);
  }
  p.ident = p.socket->ident;
  const std::vector<uint8_t> packet =
      BuildEchoRequest(EchoId{p.ident, p.seq, nonce_}, options_.payload_bytes);
  p.counted_sent = true;
  p.sent_steady = std::chrono::steady_clock::now();
  p.sent_realtime_ns = RealtimeNanos();
  if (absl::Status sent = SendDatagram(*p.socket, packet, p.addr, p.target); !sent.ok()) {
    // Unavailable: lost, the state follows the loss count; others are a state of their own.
    p.lost = true;
    p.detail = std::string(sent.message());
    if (!absl::IsUnavailable(sent)) {
      p.state = StateOfSocketError(sent);
      p.drop_socket = !absl::IsPermissionDenied(sent);
    }
    return;
  }
  p.in_flight = true;
}

void IcmpProber::CollectReplies(std::vector<Probe>& probes) {
  // Until all replies arrived or the timeout passed; Stop() wakes us via wake_fd_.
  const auto timeout = absl::ToChronoNanoseconds(options_.timeout);
  while (true) {
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
    if (fds.empty()) return;
    fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now);
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) return;
    if (ready <= 0) continue;
    if (fds.back().revents != 0) return;  // Stop(): in-flight probes are neither answered nor lost
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents != 0) ReadReplies(*owners[i]);
    }
  }
}

void IcmpProber::ReadReplies(Probe& p) {
  // Drain the socket: replies to earlier, timed-out probes are discarded by seq.
  while (p.in_flight) {
    uint8_t buf[2048];
    absl::StatusOr<std::optional<ReceivedDatagram>> received = ReceiveDatagram(*p.socket, buf);
    const SteadyTime arrived = std::chrono::steady_clock::now();
    if (!received.ok()) {
      // An ICMP error reported on the socket (host/net unreachable): this probe is lost.
      p.in_flight = false;
      p.lost = true;
      p.detail =
          absl::StrCat("probe to ", p.target, " via ", p.netdev, ": ", received.status().message());
      return;
    }
    if (!received->has_value()) return;
    const ReceivedDatagram& datagram = **received;
    const std::optional<EchoId> reply =
        ParseEchoReply(std::span<const uint8_t>(buf, datagram.bytes), p.socket->raw);
    if (!reply || reply->seq != p.seq || reply->nonce != nonce_) continue;
    if (p.socket->raw && reply->ident != p.ident) continue;
    if (datagram.from.s_addr != p.addr.sin_addr.s_addr) continue;
    p.rtt_seconds = ProbeRttSeconds(std::chrono::duration<double>(arrived - p.sent_steady).count(),
                                    datagram.kernel_rx_realtime_ns, p.sent_realtime_ns);
    p.in_flight = false;
  }
}

void IcmpProber::FinishRound(std::vector<Probe>& probes) {
  // Apply the outcomes to adapters that still have the configuration the round used.
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
