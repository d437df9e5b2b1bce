// The RTT prober's pieces on their own: ICMP echo packets (build, recognise the reply), the
// socket error mapping and RTT choice, and the per-round default gateway lookup.
#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/collectors/icmp_packet.h"
#include "agent/collectors/icmp_route.h"
#include "agent/collectors/icmp_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using ::testing::HasSubstr;

// ---- packets ----

TEST(IcmpPacketTest, ChecksumFollowsRfc1071) {
  // RFC 1071 section 3's example words 0001 f203 f4f5 f6f7 sum to ddf2 (with the carry folded).
  const std::vector<uint8_t> words = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(InternetChecksum(words), 0x220d);
  // An odd last byte counts as the high byte of a zero-padded word.
  EXPECT_EQ(InternetChecksum(std::vector<uint8_t>{0x01}), 0xfeff);
}

TEST(IcmpPacketTest, EchoRequestCarriesTheIdAndAValidChecksum) {
  const EchoId id{0x1234, 0xabcd, 0x0102030405060708};
  const std::vector<uint8_t> packet = BuildEchoRequest(id, 56);
  ASSERT_EQ(packet.size(), 64u);  // ping(8)'s 56 payload bytes after the 8-byte header
  EXPECT_EQ(packet[0], 8);        // echo request
  EXPECT_EQ(packet[1], 0);
  EXPECT_EQ(packet[4], 0x12);
  EXPECT_EQ(packet[5], 0x34);
  EXPECT_EQ(packet[6], 0xab);
  EXPECT_EQ(packet[7], 0xcd);
  EXPECT_EQ(packet[63], 63);
  // A correct checksum makes the packet sum to zero.
  EXPECT_EQ(InternetChecksum(packet), 0);
}

// The reply as the peer sends it: type 0, the rest echoed (checksum recomputed).
std::vector<uint8_t> ReplyTo(std::vector<uint8_t> request) {
  request[0] = 0;
  request[2] = request[3] = 0;
  const uint16_t checksum = InternetChecksum(request);
  request[2] = static_cast<uint8_t>(checksum >> 8);
  request[3] = static_cast<uint8_t>(checksum & 0xff);
  return request;
}

TEST(IcmpPacketTest, ReplyIsRecognisedOnDatagramAndRawSockets) {
  const EchoId id{7, 42, 0xfeedfacecafebeef};
  const std::vector<uint8_t> reply = ReplyTo(BuildEchoRequest(id, 16));
  EXPECT_EQ(ParseEchoReply(reply, /*with_ip_header=*/false), id);

  // A raw socket delivers the IPv4 header first; its IHL (here 6 words, with options) says
  // where ICMP starts.
  std::vector<uint8_t> with_header(24, 0);
  with_header[0] = 0x46;
  with_header.insert(with_header.end(), reply.begin(), reply.end());
  EXPECT_EQ(ParseEchoReply(with_header, /*with_ip_header=*/true), id);
}

TEST(IcmpPacketTest, OtherPacketsAreNotReplies) {
  const std::vector<uint8_t> request = BuildEchoRequest(EchoId{1, 2, 3}, 16);
  EXPECT_EQ(ParseEchoReply(request, false), std::nullopt);  // a request, not a reply
  const std::vector<uint8_t> reply = ReplyTo(request);
  // Shorter than header + nonce.
  EXPECT_EQ(ParseEchoReply(std::span<const uint8_t>(reply.data(), 15), false), std::nullopt);
  // A raw datagram shorter than an IPv4 header.
  EXPECT_EQ(ParseEchoReply(std::span<const uint8_t>(reply.data(), 19), true), std::nullopt);
}

// ---- sockets ----

TEST(IcmpSocketTest, SendErrorsMapToProberStates) {
  for (int err : {ENETUNREACH, EHOSTUNREACH, EHOSTDOWN, EADDRNOTAVAIL, ENOBUFS, EAGAIN}) {
    const absl::Status s = SendErrorStatus(err, "192.0.2.1", "wlan0");
    EXPECT_TRUE(absl::IsUnavailable(s)) << err << " " << s;
    EXPECT_THAT(s.message(), HasSubstr("send to 192.0.2.1 via wlan0: "));
  }
  for (int err : {ENODEV, ENXIO, ENETDOWN}) {
    const absl::Status s = SendErrorStatus(err, "192.0.2.1", "wlan0");
    EXPECT_TRUE(absl::IsNotFound(s)) << err << " " << s;
    EXPECT_THAT(s.message(), HasSubstr("netdev wlan0: "));
  }
  for (int err : {EPERM, EACCES}) {
    const absl::Status s = SendErrorStatus(err, "192.0.2.1", "wlan0");
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << err << " " << s;
    EXPECT_THAT(s.message(), HasSubstr("send to 192.0.2.1 refused: "));
  }
  EXPECT_TRUE(absl::IsInternal(SendErrorStatus(EMSGSIZE, "192.0.2.1", "wlan0")));
}

TEST(IcmpSocketTest, KernelTimestampWinsUnlessTheWallClockStepped) {
  const int64_t sent = 1'000'000'000'000;
  // No kernel stamp: the steady-clock RTT.
  EXPECT_DOUBLE_EQ(ProbeRttSeconds(0.002, std::nullopt, sent), 0.002);
  // A stamp 1.5 ms after the send: more precise than user-space timing.
  EXPECT_DOUBLE_EQ(ProbeRttSeconds(0.002, sent + 1'500'000, sent), 0.0015);
  // The wall clock stepped back or forward during the probe: the stamp is not believed.
  EXPECT_DOUBLE_EQ(ProbeRttSeconds(0.002, sent - 5'000'000, sent), 0.002);
  EXPECT_DOUBLE_EQ(ProbeRttSeconds(0.002, sent + 3'000'000'000, sent), 0.002);
}

// ---- default gateways ----

constexpr char kRoutes[] =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "wlan0\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n";

TEST(GatewayLookupTest, ReadsTheRouteTableOncePerRound) {
  TempDir procfs;
  std::filesystem::create_directories(procfs.path() / "net");
  ASSERT_TRUE(WriteTextFile(procfs.File("net/route"), kRoutes).ok());
  GatewayLookup round(procfs.path().string());
  EXPECT_EQ(round.DefaultGateway("wlan0").value_or(""), "192.0.2.1");
  EXPECT_TRUE(absl::IsNotFound(round.DefaultGateway("wlan1").status()));

  // DHCP moved the gateway: the round in progress keeps what it read, the next one follows.
  std::string moved = kRoutes;
  moved.replace(moved.find("010200C0"), 8, "FE0200C0");
  ASSERT_TRUE(WriteTextFile(procfs.File("net/route"), moved).ok());
  EXPECT_EQ(round.DefaultGateway("wlan0").value_or(""), "192.0.2.1");
  EXPECT_EQ(GatewayLookup(procfs.path().string()).DefaultGateway("wlan0").value_or(""),
            "192.0.2.254");
}

TEST(GatewayLookupTest, MissingRouteTableIsNotFound) {
  TempDir procfs;
  EXPECT_TRUE(
      absl::IsNotFound(GatewayLookup(procfs.path().string()).DefaultGateway("wlan0").status()));
}

}  // namespace
}  // namespace rxfleet::agent
