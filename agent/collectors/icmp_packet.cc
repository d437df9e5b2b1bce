#include "agent/collectors/icmp_packet.h"

#include <cstring>

namespace rxfleet::agent {
namespace {

constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIcmpEcho = 8;
constexpr size_t kMinIpv4HeaderBytes = 20;

}  // namespace

uint16_t InternetChecksum(std::span<const uint8_t> data) {
  uint32_t sum = 0;
  const size_t len = data.size();
  for (size_t i = 0; i + 1 < len; i += 2) sum += static_cast<uint32_t>(data[i] << 8 | data[i + 1]);
  if (len % 2 == 1) sum += static_cast<uint32_t>(data[len - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

std::vector<uint8_t> BuildEchoRequest(const EchoId& id, uint32_t payload_bytes) {
  std::vector<uint8_t> packet(kIcmpEchoHeaderBytes + payload_bytes);
  packet[0] = kIcmpEcho;
  packet[1] = 0;
  packet[4] = static_cast<uint8_t>(id.ident >> 8);
  packet[5] = static_cast<uint8_t>(id.ident & 0xff);
  packet[6] = static_cast<uint8_t>(id.seq >> 8);
  packet[7] = static_cast<uint8_t>(id.seq & 0xff);
  std::memcpy(&packet[kIcmpEchoHeaderBytes], &id.nonce, kIcmpNonceBytes);
  for (size_t i = kIcmpEchoHeaderBytes + kIcmpNonceBytes; i < packet.size(); ++i) {
    packet[i] = static_cast<uint8_t>(i);
  }
  const uint16_t checksum = InternetChecksum(packet);
  packet[2] = static_cast<uint8_t>(checksum >> 8);
  packet[3] = static_cast<uint8_t>(checksum & 0xff);
  return packet;
}

std::optional<EchoId> ParseEchoReply(std::span<const uint8_t> datagram, bool with_ip_header) {
  size_t offset = 0;
  if (with_ip_header) {
    if (datagram.size() < kMinIpv4HeaderBytes) return std::nullopt;
    offset = static_cast<size_t>(datagram[0] & 0x0f) * 4;
  }
  if (datagram.size() < offset + kIcmpEchoHeaderBytes + kIcmpNonceBytes) return std::nullopt;
  const uint8_t* icmp = datagram.data() + offset;
  if (icmp[0] != kIcmpEchoReply) return std::nullopt;
  EchoId id;
  id.ident = static_cast<uint16_t>(icmp[4] << 8 | icmp[5]);
  id.seq = static_cast<uint16_t>(icmp[6] << 8 | icmp[7]);
  std::memcpy(&id.nonce, icmp + kIcmpEchoHeaderBytes, kIcmpNonceBytes);
  return id;
}

}  // namespace rxfleet::agent
