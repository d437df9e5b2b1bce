#include "common/probe/probe_spec.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

absl::Status ServerProblem(std::string_view address, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "probe server '", absl::CHexEscape(ToAbslView(address)), "': ", ToAbslView(what)));
}

bool HostCharactersOk(std::string_view host) {
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':') {
      return false;
    }
  }
  return true;
}

std::string FormatRate(uint64_t bps) {
  if (bps >= 1'000'000'000 && bps % 1'000'000 == 0) {
    return absl::StrFormat("%g Gbit/s", static_cast<double>(bps) / 1e9);
  }
  if (bps >= 1'000'000) return absl::StrFormat("%g Mbit/s", static_cast<double>(bps) / 1e6);
  return absl::StrFormat("%g kbit/s", static_cast<double>(bps) / 1e3);
}

}  // namespace

absl::Status ParseProbeServer(std::string_view address, ProbeSpec& spec) {
  std::string_view host = address;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos) return ServerProblem(address, "missing ']'");
    host = address.substr(1, close - 1);
    std::string_view rest = address.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return ServerProblem(address, "expected ':PORT' after ']'");
      port = rest.substr(1);
      if (port.empty()) return ServerProblem(address, "empty port");
    }
  } else if (const size_t colon = address.rfind(':');
             colon != std::string_view::npos && address.find(':') == colon) {
    // Exactly one colon: host:port. Several colons without brackets: a bare IPv6 address.
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (port.empty()) return ServerProblem(address, "empty port");
  }
  if (host.empty()) return ServerProblem(address, "empty host");
  if (host.size() > kMaxProbeServerHostLength) {
    return ServerProblem(
        address, absl::StrCat("host is longer than ", kMaxProbeServerHostLength, " characters"));
  }
  if (!HostCharactersOk(host)) {
    return ServerProblem(address, "host may contain only letters, digits, '.', '-' and ':'");
  }
  uint32_t port_number = kDefaultIperfPort;
  if (!port.empty()) {
    const bool digits = port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
                          return absl::ascii_isdigit(static_cast<unsigned char>(c));
                        });
    if (!digits || !absl::SimpleAtoi(ToAbslView(port), &port_number) || port_number < 1 ||
        port_number > 65535) {
      return ServerProblem(address, "port must be a number in 1..65535");
    }
  }
  spec.server_host = std::string(host);
  spec.server_port = static_cast<uint16_t>(port_number);
  return absl::OkStatus();
}

std::string ProbeServerAddress(const ProbeSpec& spec) {
  if (spec.server_host.find(':') != std::string::npos) {
    return absl::StrCat("[", spec.server_host, "]:", spec.server_port);
  }
  return absl::StrCat(spec.server_host, ":", spec.server_port);
}

absl::Status ValidateProbeSpec(const ProbeSpec& spec) {
  if (spec.server_host.empty()) {
    return absl::InvalidArgumentError("probe.server is required (an iperf3 server, host[:port])");
  }
  ProbeSpec parsed;  // the host must be one ParseProbeServer accepts
  if (absl::Status s = ParseProbeServer(ProbeServerAddress(spec), parsed); !s.ok()) return s;
  if (spec.server_port == 0) return absl::InvalidArgumentError("probe.server port 0 is invalid");
  if (spec.parallel_streams < 1 || spec.parallel_streams > kMaxProbeStreams) {
    return absl::InvalidArgumentError(absl::StrCat("probe.parallelStreams ", spec.parallel_streams,
                                                   " is outside 1..", kMaxProbeStreams));
  }
  if (spec.duration < kMinProbeDuration || spec.duration > kMaxProbeDuration ||
      spec.duration != absl::Seconds(absl::ToInt64Seconds(spec.duration))) {
    return absl::InvalidArgumentError(absl::StrCat("probe.duration ",
                                                   absl::FormatDuration(spec.duration),
                                                   " must be whole seconds in 1s..60s"));
  }
  if (spec.interval < kMinProbeInterval || spec.interval > kMaxProbeInterval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe.interval ", absl::FormatDuration(spec.interval), " is outside 1m..168h"));
  }
  if (spec.protocol == ProbeProtocol::kUdp) {
    if (spec.udp_rate_bps < kMinProbeUdpRateBps || spec.udp_rate_bps > kMaxProbeUdpRateBps) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe.udpRate ", spec.udp_rate_bps,
                       " bit/s is outside 1 kbit/s..10 Gbit/s (required for UDP probes)"));
    }
  } else if (spec.udp_rate_bps != 0) {
    return absl::InvalidArgumentError("probe.udpRate is for UDP probes only (protocol: udp)");
  }
  return absl::OkStatus();
}

std::string_view ProbeProtocolName(ProbeProtocol protocol) {
  return protocol == ProbeProtocol::kUdp ? "udp" : "tcp";
}

std::string_view ProbeDirectionName(ProbeDirection direction) {
  return direction == ProbeDirection::kForward ? "forward" : "reverse";
}

std::string DescribeProbeSpec(const ProbeSpec& spec) {
  std::string out = spec.protocol == ProbeProtocol::kUdp ? "UDP" : "TCP";
  absl::StrAppend(&out, spec.direction == ProbeDirection::kForward ? " upload" : " download");
  if (spec.protocol == ProbeProtocol::kUdp) {
    absl::StrAppend(&out, " at ", FormatRate(spec.udp_rate_bps));
  }
  absl::StrAppend(&out, ", ", spec.parallel_streams,
                  spec.parallel_streams == 1 ? " stream, " : " streams, ",
                  absl::FormatDuration(spec.duration), ", against ", ProbeServerAddress(spec));
  return out;
}

}  // namespace rxfleet::common
