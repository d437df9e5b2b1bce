#include "common/probe/probe_spec.h"

#include <arpa/inet.h>
#include <netinet/in.h>

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
#include "absl/strings/str_split.h"
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
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') {
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
  if (!address.empty() &&
      (address.front() == '[' || std::count(address.begin(), address.end(), ':') > 1)) {
    return ServerProblem(address,
                         "IPv6 servers are not supported: probes run over IPv4 (iperf3 -4); give "
                         "an IPv4 address or a name with an A record");
  }
  std::string_view host = address;
  std::string_view port;
  if (const size_t colon = address.find(':'); colon != std::string_view::npos) {
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
    return ServerProblem(address, "host may contain only letters, digits, '.' and '-'");
  }
  std::string canonical;
  if (std::all_of(host.begin(), host.end(), [](char c) {
        return c == '.' || absl::ascii_isdigit(static_cast<unsigned char>(c));
      })) {
    // Digits and dots only: an IPv4 address, in the one spelling inet_pton accepts (four
    // decimal numbers 0..255 without leading zeros), so one server has one spelling.
    in_addr parsed{};
    if (::inet_pton(AF_INET, std::string(host).c_str(), &parsed) != 1) {
      return ServerProblem(address, "not an IPv4 address (four numbers 0..255, no leading zeros)");
    }
    canonical = std::string(host);
  } else {
    // A host name (RFC 1123): dot-separated labels of 1..63 letters, digits and '-', neither
    // starting nor ending with '-'; lower-cased, since names are case-insensitive.
    for (absl::string_view label : absl::StrSplit(ToAbslView(host), '.')) {
      if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
        return ServerProblem(address,
                             "not a host name (labels of 1..63 letters, digits and '-', "
                             "not starting or ending with '-')");
      }
    }
    canonical = absl::AsciiStrToLower(ToAbslView(host));
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
  spec.server_host = std::move(canonical);
  spec.server_port = static_cast<uint16_t>(port_number);
  return absl::OkStatus();
}

std::string ProbeServerAddress(const ProbeSpec& spec) {
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
