#pragma once

// The outcome of one active throughput probe (rxfleet.v1.ProbeResult, proto/rxfleet/v1/probe.proto)
// as the agent keeps it: the measurement of a finished iperf3 test, or why it failed.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::agent {

/// Why a probe produced no measurement (ProbeResult.failure_reason).
enum class ProbeFailure : uint8_t {
  kNone,           ///< the test ran to the end
  kUnreachable,    ///< no connection to the iperf3 server (refused, timed out, no route)
  kBusy,           ///< the server was running another test on every attempt
  kInterfaceDown,  ///< the netdev is missing, down or has no IPv4 address (checked first)
  kTimeout,        ///< no result within duration + 10 s (the agent ended the test)
  kRefused,        ///< the server ended the test with an error of its own
  kError,          ///< anything else (local socket errors, unparsable output)
};

/// "" for kNone, else "unreachable", "busy", "interface_down", "timeout", "refused", "error"
/// (the words of ProbeResult.failure_reason and of the metric label `reason`).
std::string_view ProbeFailureName(ProbeFailure failure);

/// Longest failure_message kept (the proto's bound), in bytes.
inline constexpr size_t kMaxProbeFailureMessage = 1024;

/// One probe's outcome, field for field rxfleet.v1.ProbeResult.
struct ProbeResult {
  /// Wall-clock start of the first attempt.
  absl::Time start_time = absl::UnixEpoch();
  /// Measured length of the last attempt (monotonic clock), >= 0.
  absl::Duration duration = absl::ZeroDuration();
  /// True when the test ran to the end; the measurements below are then set.
  bool ok = false;
  ProbeFailure failure = ProbeFailure::kNone;
  /// iperf3's own error text or the agent's reason, at most kMaxProbeFailureMessage bytes.
  std::string failure_message;
  /// Receiver-side throughput of all streams, bit/s (REVERSE: what the adapter received).
  double throughput_bps = 0;
  /// TCP: sender retransmits summed over the streams (kernel tcp_info).
  uint64_t retransmits = 0;
  /// UDP: lost / sent datagrams, [0, 1].
  double udp_loss_ratio = 0;
  /// UDP: receiver-side interarrival jitter (RFC 3550), seconds.
  double udp_jitter_seconds = 0;
  /// Payload bytes the receiver counted.
  uint64_t bytes = 0;
  /// Attempts made: 1 + retries after `busy`, >= 1 once the probe ran.
  uint32_t attempts = 0;
  /// The spec that ran.
  common::ProbeSpec spec;
};

/// Truncates `message` to kMaxProbeFailureMessage bytes (at a UTF-8 boundary).
std::string BoundedFailureMessage(std::string_view message);

}  // namespace rxfleet::agent
