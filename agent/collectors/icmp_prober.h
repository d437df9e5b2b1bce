#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/icmp_route.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

/// Per-adapter prober state, exported as rxfleet_adapter_probe_state{adapter,state} (1 for the
/// current value, 0 for the others) and logged once on every change.
enum class ProbeState : uint8_t {
  kOk,            ///< "ok": one of the last `unreachable_after` probes was answered
  kUnreachable,   ///< "unreachable": the last `unreachable_after` probes got no reply or could
                  ///< not be sent (no route, host unreachable)
  kNoTarget,      ///< "no_target": no target configured and the netdev has no default gateway
  kNoNetdev,      ///< "no_netdev": the adapter has no netdev, or it vanished (ENODEV)
  kNotPermitted,  ///< "not_permitted": neither an ICMP datagram socket (ping_group_range) nor a
                  ///< raw socket (CAP_NET_RAW) could be opened, or SO_BINDTODEVICE was refused
  kPending,       ///< "pending": added, no probe finished yet
  kError,         ///< "error": another socket error (logged with errno text)
};
inline constexpr ProbeState kAllProbeStates[] = {
    ProbeState::kOk,       ProbeState::kUnreachable,  ProbeState::kNoTarget,
    ProbeState::kNoNetdev, ProbeState::kNotPermitted, ProbeState::kPending,
    ProbeState::kError};

/// "ok", "unreachable", "no_target", "no_netdev", "not_permitted", "pending", "error".
std::string_view ProbeStateName(ProbeState state);

/// One adapter as the prober sees it.
struct ProbeAdapter {
  /// Stable adapter id; the `adapter` label.
  std::string adapter_id;
  /// Interface the probes leave through (SO_BINDTODEVICE). Empty: the adapter has no netdev and
  /// is not probed (state no_netdev).
  std::string netdev;
  /// IPv4 literal to probe. Empty: IcmpProberOptions::target, and if that is empty too, the
  /// netdev's default gateway from <procfs_root>/net/route (re-read every round, so a DHCP
  /// change is followed).
  std::string target;

  friend bool operator==(const ProbeAdapter&, const ProbeAdapter&) = default;
};

/// Raw RTT samples and probe counts of one adapter since the last TakeWindowStats().
struct ProbeWindowStats {
  /// Round-trip times of answered probes, seconds, in arrival order (at most 10000 kept).
  std::vector<double> rtt_seconds;
  uint64_t sent = 0;
  uint64_t lost = 0;
};

/// Who takes window statistics from the prober; each has its own accumulation.
enum class ProbeConsumer : uint8_t {
  kMetricWindow = 0,      ///< WindowTracker (--metric-window)
  kExperimentWindow = 1,  ///< experiment metric windows
};
inline constexpr size_t kProbeConsumers = 2;

struct IcmpProberOptions {
  /// Time between the starts of two probe rounds (one echo request per adapter per round).
  /// 10 ms .. 1 h. Default 1 s.
  absl::Duration interval = absl::Seconds(1);
  /// How long a probe waits for its reply before it counts as lost. 1 ms .. interval.
  /// Default 1 s.
  absl::Duration timeout = absl::Seconds(1);
  /// ICMP payload bytes after the 8-byte ICMP header; 16 .. 1472 (fits a 1500-byte MTU).
  /// Default 56, as ping(8).
  uint32_t payload_bytes = 56;
  /// Default IPv4 target for adapters that set none; empty: each netdev's default gateway.
  std::string target;
  /// procfs mount point for net/route.
  std::string procfs_root = "/proc";
  /// Consecutive lost probes that turn the state to "unreachable". >= 1. Default 3.
  uint32_t unreachable_after = 3;
  LogFn log = LogToStderr;
};

/// Checks the ranges documented on IcmpProberOptions; InvalidArgument naming the field.
absl::Status ValidateIcmpProberOptions(const IcmpProberOptions& options);

/// Active ICMP echo prober, one echo request per adapter per round, on its own thread.
///
/// Sockets (agent/collectors/icmp_socket.h): an unprivileged ICMP datagram socket (socket(AF_INET,
/// SOCK_DGRAM, IPPROTO_ICMP), allowed when the agent's group is inside net.ipv4.ping_group_range)
/// is tried first, then a raw socket (needs CAP_NET_RAW). Each adapter's socket is bound to its
/// netdev with SO_BINDTODEVICE and kept open across rounds (re-opened after errors). RTTs use
/// kernel receive timestamps (SO_TIMESTAMPNS) when available. Packets: icmp_packet.h; default
/// gateways: icmp_route.h.
///
/// Series (label `adapter`; see docs/METRICS.md):
///   rxfleet_adapter_rtt_seconds              histogram, buckets 0.1 ms .. 100 ms
///   rxfleet_adapter_probes_sent_total        counter
///   rxfleet_adapter_probes_lost_total        counter (no reply within timeout, or send failed)
///   rxfleet_adapter_probe_state{state}       gauge 1/0 over ProbeState names
///   rxfleet_adapter_probe_target_info{target} gauge 1, the address being probed
/// Only adapters with a target are probed; a missing gateway or an unreachable target is a
/// state (one log line on change), never an error storm.
///
/// Thread-safe: SetAdapters/UpsertAdapter/RemoveAdapter/State/TakeWindowStats may be called
/// from any thread while the prober runs.
class IcmpProber {
 public:
  /// Validates `options` (ValidateIcmpProberOptions) and registers the metric families in
  /// `registry`, which must outlive the prober.
  static absl::StatusOr<std::unique_ptr<IcmpProber>> Create(prometheus::Registry& registry,
                                                            IcmpProberOptions options);
  /// Stops the thread if running and closes all sockets.
  ~IcmpProber();

  IcmpProber(const IcmpProber&) = delete;
  IcmpProber& operator=(const IcmpProber&) = delete;

  /// Replaces the adapter set (series of removed adapters are deleted).
  void SetAdapters(const std::vector<ProbeAdapter>& adapters);
  /// Adds an adapter or updates its netdev/target (its socket is re-opened on change).
  void UpsertAdapter(const ProbeAdapter& adapter);
  /// Removes the adapter and deletes its series. Unknown ids are ignored.
  void RemoveAdapter(std::string_view adapter_id);

  /// Starts the probe thread; the first round starts immediately. No-op if running.
  void Start();
  /// Stops and joins the thread. Wakes a round waiting for replies at once (eventfd), so it
  /// returns within milliseconds. Idempotent.
  void Stop();

  /// Runs one probe round on the calling thread: resolves targets, sends one echo request per
  /// adapter, and waits until all are answered or timed out. Sockets are created on the calling
  /// thread (and so in its network namespace). Used by the thread and by tests; must not run
  /// concurrently with a started prober.
  void ProbeOnce();

  /// Current state of `adapter_id`, nullopt for unknown ids.
  std::optional<ProbeState> State(std::string_view adapter_id) const;

  /// Returns and clears every adapter's samples and counts since the previous call by the same
  /// consumer (each consumer has its own accumulation: WindowTracker and the experiment
  /// windows cut at different times).
  std::map<std::string, ProbeWindowStats> TakeWindowStats(
      ProbeConsumer consumer = ProbeConsumer::kMetricWindow);

  /// Number of completed rounds (each ProbeOnce counts).
  uint64_t rounds() const;
  /// Blocks until at least `n` rounds have completed or `timeout` passed; true if reached.
  bool WaitForRounds(uint64_t n, absl::Duration timeout) const;

  /// RTT histogram bucket upper bounds, seconds.
  static const std::vector<double>& RttBuckets();

 private:
  struct Adapter;  // per-adapter state and series, defined in the .cc
  struct Probe;    // one in-flight echo request

  IcmpProber(prometheus::Registry& registry, IcmpProberOptions options);
  void Loop();
  // The steps of ProbeOnce: snapshot the adapters, resolve and send, wait for the replies (or
  // Stop()), apply the outcomes to the adapters and their series.
  std::vector<Probe> SnapshotRound();
  void SendProbe(Probe& probe, GatewayLookup& gateways, std::mt19937& rng);
  void CollectReplies(std::vector<Probe>& probes);
  void ReadReplies(Probe& probe);
  void FinishRound(std::vector<Probe>& probes);
  void UpsertLocked(const ProbeAdapter& adapter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(std::string_view adapter_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(Adapter& adapter, ProbeState state, std::string_view detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  IcmpProberOptions options_;
  prometheus::Family<prometheus::Histogram>& rtt_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Counter>& lost_;
  prometheus::Family<prometheus::Gauge>& state_;
  prometheus::Family<prometheus::Gauge>& target_info_;
  uint64_t nonce_;
  int wake_fd_ = -1;  // eventfd signalled by Stop()

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Adapter>, std::less<>> adapters_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // between Start() and the end of Stop()
  uint64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
  absl::Mutex round_mu_;  // serialises ProbeOnce
};

}  // namespace rxfleet::agent
