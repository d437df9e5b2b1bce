#pragma once

// ICMP echo packets of the RTT prober (RFC 792): building a request and recognising its reply.
// Pure byte work, no sockets.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rxfleet::agent {

/// Bytes of the ICMP echo header: type, code, checksum, identifier, sequence number.
inline constexpr size_t kIcmpEchoHeaderBytes = 8;
/// Bytes of the prober's nonce, the first payload bytes of every request.
inline constexpr size_t kIcmpNonceBytes = 8;

/// What tells one echo request (and its reply) apart from others on the same host.
struct EchoId {
  /// Echo identifier (bytes 4-5, big-endian). The kernel replaces it on ICMP datagram sockets,
  /// so only raw sockets can match on it.
  uint16_t ident = 0;
  /// Sequence number (bytes 6-7, big-endian).
  uint16_t seq = 0;
  /// The prober's random nonce, copied as the first 8 payload bytes in host byte order (both
  /// ends of the comparison are this host).
  uint64_t nonce = 0;

  friend bool operator==(const EchoId&, const EchoId&) = default;
};

/// The RFC 1071 Internet checksum of `data` (one's complement of the one's complement sum of
/// 16-bit big-endian words; an odd last byte is padded with zero).
uint16_t InternetChecksum(std::span<const uint8_t> data);

/// An ICMP echo request (type 8, code 0) carrying `id`, with `payload_bytes` of payload after
/// the header: the nonce, then byte i = i & 0xff (as ping(8) fills it). `payload_bytes` >=
/// kIcmpNonceBytes (IcmpProberOptions keeps it in 16..1472). The checksum is filled in.
std::vector<uint8_t> BuildEchoRequest(const EchoId& id, uint32_t payload_bytes);

/// Reads an ICMP echo reply (type 0) out of a received datagram: `with_ip_header` for raw
/// sockets, which deliver the IPv4 header first (its IHL gives the length); datagram sockets
/// deliver the ICMP message alone. Returns the reply's identifier, sequence number and nonce;
/// nullopt for anything shorter than header + nonce or of another type.
std::optional<EchoId> ParseEchoReply(std::span<const uint8_t> datagram, bool with_ip_header);

}  // namespace rxfleet::agent
