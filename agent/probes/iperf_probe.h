#pragma once

// IperfProbeRunner: one probe attempt with libiperf (iperf 3.12, the library behind iperf3),
// in this process, bound to the adapter's netdev (docs/AGENT.md, "Probes").
//
// libiperf keeps its error in a global (i_errno), its timers in globals and parses options
// with getopt: it is not thread-safe. Every attempt of every IperfProbeRunner in the process
// takes one process-wide lock, so tests run one at a time even when two runners exist; the
// agent runs them on the scheduler's single worker thread.

#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/probes/netdev_address.h"
#include "agent/probes/probe_runner.h"

namespace rxfleet::agent {

struct IperfProbeOptions {
  /// Control connection setup limit (iperf3 --connect-timeout); also bounds each stream's
  /// connect. > 0.
  absl::Duration connect_timeout = absl::Seconds(5);
  /// The hard limit of an attempt is spec.duration + timeout_margin: then the agent shuts the
  /// control connection down, libiperf's loop ends and the attempt is `timeout`. > 0.
  absl::Duration timeout_margin = kProbeTimeoutMargin;
  /// REVERSE probes: nothing received for this long ends the test (iperf3 --rcv-timeout,
  /// libiperf's idle check while the test runs; error IENOMSG -> unreachable). > 0.
  absl::Duration receive_timeout = absl::Seconds(5);
  /// The host's interfaces (getifaddrs); injectable for tests.
  std::function<absl::StatusOr<std::vector<InterfaceAddress>>()> interfaces =
      ReadInterfaceAddresses;
};

/// The iperf3 options of one attempt, as libiperf's iperf_parse_arguments takes them (the
/// declared API of 3.12 has no setter for the bind device nor the receive timeout, so every
/// option goes through the parser that iperf3 itself uses): `-c HOST -p PORT -4 -B ADDR%DEV
/// -t SECONDS -P STREAMS [-R] [-u -b RATE] -J --logfile /dev/null --connect-timeout MS
/// [--rcv-timeout MS]`; argv[0] is "rxfleet-agent".
std::vector<std::string> IperfClientArguments(const common::ProbeSpec& spec,
                                              const std::string& bind_address,
                                              const std::string& netdev,
                                              const IperfProbeOptions& options);

/// ProbeRunner on libiperf. The process must ignore SIGPIPE (agent/main.cc does): libiperf
/// writes to connections the server or the watchdog closed.
///
/// An attempt: (1) the netdev must exist, be up and have an IPv4 address (else
/// `interface_down`, no traffic); (2) libiperf runs the client with IperfClientArguments; all
/// its sockets are bound to that address and, with SO_BINDTODEVICE, to the netdev
/// (unprivileged since Linux 5.7, commit c427bfec18f2 "net: core: enable SO_BINDTODEVICE for
/// non-root users"; older kernels need CAP_NET_RAW, else the attempt fails with `error`
/// "unable to bind-to-device"); (3) a watchdog shuts the control connection down at
/// spec.duration + timeout_margin (`timeout`) or on Cancel().
/// libiperf's JSON report is parsed for the measurement (ParseIperfReport); its failures map
/// through ClassifyIperfError. Output goes to /dev/null, never to the agent's stdout.
///
/// Bounds: connect attempts end after connect_timeout; a test in progress ends at the hard
/// limit. What is not bounded by the agent: a DNS lookup of the server name (the resolver's own
/// timeouts) and a UDP stream's setup handshake (libiperf waits up to 30 s for the server's
/// reply, SO_RCVTIMEO): an attempt then returns later than the limit, as `timeout`.
class IperfProbeRunner final : public ProbeRunner {
 public:
  explicit IperfProbeRunner(IperfProbeOptions options = {});
  ProbeResult Run(const ProbeRequest& request) override;
  /// Shuts the control connection of the attempt in progress down (retried every 100 ms until
  /// the attempt ends, so one still connecting is caught too); later attempts fail with
  /// `error` "cancelled: the agent is stopping" without traffic.
  void Cancel() override;

 private:
  IperfProbeOptions options_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // The attempt in progress has returned from libiperf (reset per attempt).
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rxfleet::agent
