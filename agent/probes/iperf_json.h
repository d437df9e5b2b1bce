#pragma once

// Parsing the JSON report of one iperf3 client test (libiperf's
// iperf_get_test_json_output_string, the same text `iperf3 -c ... -J` prints). Shapes checked
// against iperf 3.12 (Debian 12); recorded samples in tests/fixtures/iperf/.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::agent {

/// What one iperf3 report says.
struct IperfReport {
  /// The report's top-level "error" (the test failed; the measurements are then 0), e.g.
  /// "the server is busy running a test. try again later".
  std::optional<std::string> error;
  /// Receiver-side bit/s of all streams: TCP end.sum_received.bits_per_second; UDP
  /// end.sum_received.bits_per_second (end.sum when sum_received is missing, before 3.10:
  /// end.sum counts what the *sender* sent in 3.12, 1.74 Gbit/s against 362 Mbit/s received
  /// at 79 % loss, so it is only the fallback).
  double throughput_bps = 0;
  /// TCP: end.sum_sent.retransmits (absent on hosts without tcp_info: 0).
  uint64_t retransmits = 0;
  /// UDP: end.sum.lost_percent / 100 (the receiver's lost datagrams over the sent ones).
  double udp_loss_ratio = 0;
  /// UDP: end.sum.jitter_ms / 1000.
  double udp_jitter_seconds = 0;
  /// Receiver-counted payload bytes: end.sum_received.bytes (UDP: end.sum.bytes as fallback).
  uint64_t bytes = 0;
  /// end.sum_received.seconds, the receiver's test length.
  double seconds = 0;
};

/// Parses `json` for a test of `protocol`. Errors: InvalidArgument if the text is not JSON, is
/// not an object, or (without a top-level "error") lacks end.sum_received (TCP) or both
/// end.sum_received and end.sum (UDP), or a field there has the wrong type. A report with an
/// "error" string parses OK with `error` set and whatever measurements it has.
absl::StatusOr<IperfReport> ParseIperfReport(std::string_view json, common::ProbeProtocol protocol);

}  // namespace rxfleet::agent
