#pragma once

// Active throughput probes (proto/rxfleet/v1/probe.proto): the value type every program uses
// for a ProbeSpec, its ranges and its rules. The server checks policies and experiments with
// ValidateProbeSpec, the agent checks every bundle and local file with the same function, so a
// probe the server accepts is one the agent runs.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rxfleet::common {

/// iperf3's default TCP/UDP port (iperf3 -p default).
inline constexpr uint16_t kDefaultIperfPort = 5201;
/// Ranges of a probe (docs/AGENT.md, "Probes").
inline constexpr int kMaxProbeStreams = 16;
inline constexpr absl::Duration kMinProbeDuration = absl::Seconds(1);
inline constexpr absl::Duration kMaxProbeDuration = absl::Seconds(60);
inline constexpr absl::Duration kDefaultProbeDuration = absl::Seconds(10);
inline constexpr uint64_t kMinProbeUdpRateBps = 1'000;
inline constexpr uint64_t kMaxProbeUdpRateBps = 10'000'000'000;
inline constexpr absl::Duration kMinProbeInterval = absl::Minutes(1);
inline constexpr absl::Duration kMaxProbeInterval = absl::Hours(7 * 24);
inline constexpr absl::Duration kDefaultProbeInterval = absl::Hours(1);
/// Longest host part of a probe server address (a DNS name).
inline constexpr size_t kMaxProbeServerHostLength = 253;

enum class ProbeProtocol : uint8_t { kTcp, kUdp };
enum class ProbeDirection : uint8_t {
  kReverse,  ///< the iperf3 server sends, the adapter receives (iperf3 -R, a download)
  kForward,  ///< the adapter sends (an upload)
};

/// One iperf3 test, with every default applied (a validated value once ValidateProbeSpec
/// passed).
struct ProbeSpec {
  /// iperf3 server host: an IPv4/IPv6 address (without brackets) or a DNS name.
  std::string server_host;
  uint16_t server_port = kDefaultIperfPort;
  ProbeProtocol protocol = ProbeProtocol::kTcp;
  ProbeDirection direction = ProbeDirection::kReverse;
  /// Parallel streams (iperf3 -P), 1..kMaxProbeStreams.
  int parallel_streams = 1;
  /// Test length (iperf3 -t), whole seconds in [kMinProbeDuration, kMaxProbeDuration].
  absl::Duration duration = kDefaultProbeDuration;
  /// UDP: target rate per stream in bit/s (iperf3 -b), [kMinProbeUdpRateBps,
  /// kMaxProbeUdpRateBps]; TCP: 0.
  uint64_t udp_rate_bps = 0;
  /// Policies: time between two runs on one adapter, [kMinProbeInterval, kMaxProbeInterval].
  absl::Duration interval = kDefaultProbeInterval;

  friend bool operator==(const ProbeSpec&, const ProbeSpec&) = default;
};

/// Parses a probe server address as documents and ProbeSpec.server write it: `host` or
/// `host:port`, host an IPv4 address (dotted quad as inet_pton takes it: no leading zeros) or
/// an RFC 1123 host name (stored lower-cased, so one server has one spelling). Sets
/// server_host and server_port (default 5201) of `spec`. InvalidArgument ("probe server 'x':
/// ...") for IPv6 (brackets or several colons: probes run over IPv4, iperf3 -4), an empty host,
/// a host over 253 characters, with characters outside [A-Za-z0-9.-], all digits and dots but
/// no IPv4 address, or with an empty, over-long or '-'-edged label, and for a port outside
/// 1..65535 or not decimal. Two names of one machine are still two servers.
absl::Status ParseProbeServer(std::string_view address, ProbeSpec& spec);

/// `host:port` of the spec's server, as logs and metrics show it.
std::string ProbeServerAddress(const ProbeSpec& spec);

/// Checks every range above and the combinations: udp_rate_bps set for UDP and 0 for TCP,
/// duration in whole seconds. InvalidArgument naming the field ("probe.parallelStreams 17 is
/// outside 1..16").
absl::Status ValidateProbeSpec(const ProbeSpec& spec);

/// "tcp"/"udp" and "reverse"/"forward", the words documents, metrics labels and logs use.
std::string_view ProbeProtocolName(ProbeProtocol protocol);
std::string_view ProbeDirectionName(ProbeDirection direction);

/// One line for logs and `describe`: "TCP download, 4 streams, 10s, against 10.0.0.1:5201" or
/// "UDP upload at 50 Mbit/s, 1 stream, 10s, against iperf.lab:5201".
std::string DescribeProbeSpec(const ProbeSpec& spec);

}  // namespace rxfleet::common
