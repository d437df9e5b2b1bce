#include "server/http/sd_target.h"

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

// An IP address as 16 bytes (IPv4 as IPv4-mapped IPv6), or nullopt for a name.
std::optional<std::array<uint8_t, 16>> ParseIp(std::string_view host) {
  std::string text(host);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  std::array<uint8_t, 16> out{};
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    out[10] = 0xff;
    out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4, 4);
    return out;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(out.data(), &v6, 16);
    return out;
  }
  return std::nullopt;
}

bool IsMappedV4(const std::array<uint8_t, 16>& ip) {
  for (int i = 0; i < 10; ++i) {
    if (ip[i] != 0) return false;
  }
  return ip[10] == 0xff && ip[11] == 0xff;
}

// Why an address must never be published, or nullptr.
const char* ForbiddenReason(const std::array<uint8_t, 16>& ip) {
  if (IsMappedV4(ip)) {
    const uint8_t a = ip[12], b = ip[13];
    if (a == 169 && b == 254) return "a link-local address (169.254.0.0/16: cloud metadata)";
    if (a == 0) return "an unspecified address (0.0.0.0/8)";
    if (a >= 224 && a <= 239) return "a multicast address";
    if (a == 255 && b == 255 && ip[14] == 255 && ip[15] == 255) return "the broadcast address";
    return nullptr;
  }
  if (ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80) return "a link-local address (fe80::/10)";
  if (ip[0] == 0xff) return "a multicast address";
  bool zero = true;
  for (uint8_t byte : ip) zero = zero && byte == 0;
  if (zero) return "the unspecified address (::)";
  return nullptr;
}

// "ipv4:10.0.0.5:51234" / "ipv6:[::1]:5" / "ipv4:10.0.0.5" -> the address part.
std::string PeerHost(std::string_view peer) {
  absl::string_view rest = ToAbslView(peer);
  const bool v6 = absl::ConsumePrefix(&rest, "ipv6:");
  if (!v6) absl::ConsumePrefix(&rest, "ipv4:");
  if (v6) {
    absl::ConsumePrefix(&rest, "[");
    const size_t close = rest.find(']');
    return std::string(close == absl::string_view::npos ? rest : rest.substr(0, close));
  }
  const size_t colon = rest.rfind(':');
  return std::string(colon == absl::string_view::npos ? rest : rest.substr(0, colon));
}

}  // namespace

absl::Status CheckSdTarget(std::string_view metrics_address, std::string_view peer,
                           const SdTargetPolicy& policy) {
  const size_t colon = metrics_address.rfind(':');
  const std::string_view host =
      colon == std::string_view::npos ? metrics_address : metrics_address.substr(0, colon);
  const std::optional<std::array<uint8_t, 16>> ip = ParseIp(host);
  if (ip.has_value()) {
    if (const char* reason = ForbiddenReason(*ip)) {
      return absl::FailedPreconditionError(
          absl::StrCat("metrics address ", ToAbslView(metrics_address), " is ", reason));
    }
  }
  if (!policy.require_peer_address) return absl::OkStatus();
  const std::string peer_host = PeerHost(peer);
  const std::optional<std::array<uint8_t, 16>> peer_ip = ParseIp(peer_host);
  if (!ip.has_value() || !peer_ip.has_value() || *ip != *peer_ip) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics address ", ToAbslView(metrics_address), " is not the agent's own address ",
        peer_host.empty() ? "(unknown)" : peer_host, " (--sd-require-peer-address)"));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
