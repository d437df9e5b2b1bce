#include "agent/sysfs/usb_sysfs.h"

#include <filesystem>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::Eq;
using ::testing::Optional;

// Recorded-style trees of a Framework 13 (see tests/fixtures/sysfs/README.md): the same BE6500
// seen at SuperSpeed on 2-2 and at high-speed on 3-3, behind connector ports usb2-port2 and
// usb3-port3 that are each other's peer.
std::string Fixture(std::string_view name) {
  return rxfleet::testing::SourcePath(std::string("tests/fixtures/sysfs/") + std::string(name));
}

class FixtureTest : public ::testing::Test {
 protected:
  UsbSysfs superspeed_{Fixture("framework13-superspeed")};
  UsbSysfs highspeed_{Fixture("framework13-highspeed")};
};

TEST(PortPathTest, ParsesAndFormatsKernelPortPaths) {
  EXPECT_THAT(ParsePortPath("3-3"), Optional(PortPath{.bus = 3, .ports = {3}}));
  EXPECT_THAT(ParsePortPath("1-1.2"), Optional(PortPath{.bus = 1, .ports = {1, 2}}));
  EXPECT_EQ(FormatPortPath(PortPath{.bus = 2, .ports = {1, 4, 4}}), "2-1.4.4");
  for (const char* bad : {"", "3", "3-", "-3", "usb3", "3-0", "0-1", "3-1.", "3-1..2", "256-1",
                          "3-x", "3-1:1.0", "3-1.2.3.4.5.6.7.8", "3-+1"}) {
    EXPECT_EQ(ParsePortPath(bad), std::nullopt) << bad;
  }
}

TEST(PortPathTest, OrdersByBusThenPorts) {
  EXPECT_LT(*ParsePortPath("2-2"), *ParsePortPath("3-3"));
  EXPECT_LT(*ParsePortPath("2-9"), *ParsePortPath("10-1"));  // numeric, not textual
  EXPECT_LT(*ParsePortPath("2-1"), *ParsePortPath("2-1.4"));
  EXPECT_LT(*ParsePortPath("2-1.4"), *ParsePortPath("2-2"));
}

TEST(PortPathTest, MapsPortDirectoryNames) {
  EXPECT_THAT(PortPathFromPortDirName("usb2-port2"), Optional(Eq("2-2")));
  EXPECT_THAT(PortPathFromPortDirName("usb3-port3"), Optional(Eq("3-3")));
  EXPECT_THAT(PortPathFromPortDirName("1-1-port2"), Optional(Eq("1-1.2")));
  EXPECT_THAT(PortPathFromPortDirName("2-1.4-port3"), Optional(Eq("2-1.4.3")));
  for (const char* bad : {"", "usb2", "port2", "usb-port2", "usbx-port1", "usb2-port", "usb2-port0",
                          "2-0:1.0", "x-1-port2", "1-1.2.3.4.5.6.7-port1"}) {
    EXPECT_EQ(PortPathFromPortDirName(bad), std::nullopt) << bad;
  }
}

TEST_F(FixtureTest, PeerPortsGiveTheSameIdFromBothSides) {
  EXPECT_THAT(superspeed_.PeerPortPath("2-2"), Optional(Eq("3-3")));
  EXPECT_THAT(highspeed_.PeerPortPath("3-3"), Optional(Eq("2-2")));
  EXPECT_EQ(superspeed_.StableAdapterId("2-2"), "port-2-2");
  EXPECT_EQ(highspeed_.StableAdapterId("3-3"), "port-2-2");
}

TEST_F(FixtureTest, HubPortsFollowTheirPeers) {
  // 2-1.4 sits on port 4 of the SuperSpeed half of a USB 3 hub whose high-speed half is 3-1.
  EXPECT_THAT(superspeed_.PeerPortPath("2-1.4"), Optional(Eq("3-1.4")));
  EXPECT_EQ(superspeed_.StableAdapterId("2-1.4"), "port-2-1.4");
}

TEST_F(FixtureTest, WithoutPeerTheOwnPathIsTheId) {
  // Port 2 of the hub has no companion; bus 1 is a USB 2-only controller.
  EXPECT_EQ(superspeed_.PeerPortPath("3-1.2"), std::nullopt);
  EXPECT_EQ(superspeed_.StableAdapterId("3-1.2"), "port-3-1.2");
  EXPECT_EQ(superspeed_.PeerPortPath("1-3"), std::nullopt);
  EXPECT_EQ(superspeed_.StableAdapterId("1-3"), "port-1-3");
  // No `port` link at all.
  EXPECT_EQ(superspeed_.StableAdapterId("1-4"), "port-1-4");
  // Device not present.
  EXPECT_EQ(superspeed_.StableAdapterId("4-1"), "port-4-1");
}

TEST_F(FixtureTest, NetdevWithDriverAndStatistics) {
  const std::optional<UsbSysfs::NetdevInfo> netdev = superspeed_.Netdev("2-2");
  ASSERT_TRUE(netdev.has_value());
  EXPECT_EQ(netdev->name, "wlp0s13f0u2");
  EXPECT_EQ(netdev->driver, "rtw89_8922au_git");
  EXPECT_EQ(netdev->statistics_dir, Fixture("framework13-superspeed") +
                                        "/bus/usb/devices/2-2:1.0/net/wlp0s13f0u2/statistics");
  EXPECT_TRUE(fs::exists(fs::path(netdev->statistics_dir) / "rx_bytes"));

  const std::optional<UsbSysfs::NetdevInfo> hub_port = superspeed_.Netdev("2-1.4");
  ASSERT_TRUE(hub_port.has_value());
  EXPECT_EQ(hub_port->name, "wlp0s13f0u1u4");
  EXPECT_EQ(hub_port->driver, "rtw89_8852cu");
}

TEST_F(FixtureTest, NoNetdevWhileTheDriverIsBindingOrAbsent) {
  EXPECT_EQ(highspeed_.Netdev("3-3"), std::nullopt);     // driver bound, no netdev yet
  EXPECT_EQ(superspeed_.Netdev("3-1.2"), std::nullopt);  // no driver
  EXPECT_EQ(superspeed_.Netdev("1-4"), std::nullopt);    // no interface directory
  EXPECT_EQ(superspeed_.Netdev("9-9"), std::nullopt);    // no device
}

TEST_F(FixtureTest, ReadsTrimmedAttributes) {
  EXPECT_THAT(superspeed_.ReadAttribute("2-2", "speed"), Optional(Eq("5000")));
  EXPECT_THAT(superspeed_.ReadAttribute("2-2", "version"), Optional(Eq("3.20")));
  EXPECT_THAT(superspeed_.ReadAttribute("2-2", "product"), Optional(Eq("802.11be WLAN Adapter")));
  EXPECT_THAT(highspeed_.ReadAttribute("3-3", "speed"), Optional(Eq("480")));
  EXPECT_EQ(superspeed_.ReadAttribute("2-2", "no_such_attribute"), std::nullopt);
  EXPECT_EQ(superspeed_.ReadAttribute("9-9", "speed"), std::nullopt);
}

TEST_F(FixtureTest, RefusesNamesThatEscapeTheDeviceDirectory) {
  EXPECT_EQ(superspeed_.ReadAttribute("2-2", "../2-1.4/serial"), std::nullopt);
  EXPECT_EQ(superspeed_.ReadAttribute("..", "usb/devices/2-2/speed"), std::nullopt);
  EXPECT_EQ(superspeed_.ReadAttribute("", "speed"), std::nullopt);
  EXPECT_EQ(superspeed_.ReadAttribute("2-2", ""), std::nullopt);
  EXPECT_EQ(superspeed_.Netdev("../devices"), std::nullopt);
  EXPECT_EQ(superspeed_.PeerPortPath("2-2/.."), std::nullopt);
}

// Odd trees built at test time: what a half-written or unusual sysfs may show.
class BuiltTreeTest : public ::testing::Test {
 protected:
  fs::path Device(const std::string& name) {
    const fs::path dir = tmp_.path() / "devices" / name;
    fs::create_directories(dir);
    fs::create_directories(tmp_.path() / "bus/usb/devices");
    fs::create_symlink(dir, tmp_.path() / "bus/usb/devices" / name);
    return dir;
  }

  rxfleet::testing::TempDir tmp_{"usb-sysfs-test"};
};

TEST_F(BuiltTreeTest, MalformedPeerNameFallsBackToOwnPath) {
  const fs::path dev = Device("5-1");
  fs::create_directories(tmp_.path() / "ports/usb5-port1");
  fs::create_directories(tmp_.path() / "ports/strange-name");
  fs::create_directory_symlink(tmp_.path() / "ports/usb5-port1", dev / "port");
  fs::create_directory_symlink(tmp_.path() / "ports/strange-name",
                               tmp_.path() / "ports/usb5-port1/peer");
  const UsbSysfs sysfs(tmp_.path().string());
  EXPECT_EQ(sysfs.PeerPortPath("5-1"), std::nullopt);
  EXPECT_EQ(sysfs.StableAdapterId("5-1"), "port-5-1");
}

TEST_F(BuiltTreeTest, DanglingPeerLinkStillNamesThePeer) {
  // The peer's directory need not be readable: only the link's name matters.
  const fs::path dev = Device("4-2");
  fs::create_directories(tmp_.path() / "ports/usb4-port2");
  fs::create_directory_symlink(tmp_.path() / "ports/usb4-port2", dev / "port");
  fs::create_symlink("../gone/usb1-port7", tmp_.path() / "ports/usb4-port2/peer");
  const UsbSysfs sysfs(tmp_.path().string());
  EXPECT_THAT(sysfs.PeerPortPath("4-2"), Optional(Eq("1-7")));
  EXPECT_EQ(sysfs.StableAdapterId("4-2"), "port-1-7");
}

TEST_F(BuiltTreeTest, SeveralNetdevsPickTheFirstByName) {
  const fs::path dev = Device("6-1");
  fs::create_directories(dev.parent_path() / "6-1:1.0/net/wlan1/statistics");
  fs::create_directories(dev.parent_path() / "6-1:1.0/net/wlan0/statistics");
  fs::create_directory_symlink(dev.parent_path() / "6-1:1.0",
                               tmp_.path() / "bus/usb/devices/6-1:1.0");
  const UsbSysfs sysfs(tmp_.path().string());
  const std::optional<UsbSysfs::NetdevInfo> netdev = sysfs.Netdev("6-1");
  ASSERT_TRUE(netdev.has_value());
  EXPECT_EQ(netdev->name, "wlan0");
  EXPECT_EQ(netdev->driver, "");  // no driver link
}

// Linux 6.1 on a host without ACPI _PLD (Debian 12's kernel on qemu-xhci, measured): port
// uevent empty, connect_type "unknown", location 0x00000000, removable "unknown", version
// " 3.20". None of it may change the id or the attributes the agent reads.
TEST_F(BuiltTreeTest, RealKernelPortAttributesWithoutFirmwareDescription) {
  const fs::path dev = Device("2-2");
  for (const auto& [port, peer] :
       {std::pair{"usb2-port2", "usb1-port2"}, std::pair{"usb1-port2", "usb2-port2"}}) {
    const fs::path dir = tmp_.path() / "ports" / port;
    fs::create_directories(dir);
    ASSERT_TRUE(rxfleet::testing::WriteTextFile(dir / "uevent", "").ok());
    ASSERT_TRUE(rxfleet::testing::WriteTextFile(dir / "connect_type", "unknown\n").ok());
    ASSERT_TRUE(rxfleet::testing::WriteTextFile(dir / "location", "0x00000000\n").ok());
    fs::create_symlink(std::string("../") + peer, dir / "peer");
  }
  fs::create_directory_symlink(tmp_.path() / "ports/usb2-port2", dev / "port");
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(dev / "version", " 3.20\n").ok());
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(dev / "removable", "unknown\n").ok());
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(dev / "speed", "5000\n").ok());
  const UsbSysfs sysfs(tmp_.path().string());
  EXPECT_THAT(sysfs.PeerPortPath("2-2"), Optional(Eq("1-2")));
  EXPECT_EQ(sysfs.StableAdapterId("2-2"), "port-1-2");
  EXPECT_THAT(sysfs.ReadAttribute("2-2", "version"), Optional(Eq("3.20")));
  EXPECT_THAT(sysfs.ReadAttribute("2-2", "speed"), Optional(Eq("5000")));
  EXPECT_THAT(sysfs.ReadAttribute("2-2", "removable"), Optional(Eq("unknown")));
}

TEST(UsbSysfsTest, DefaultRootIsSys) { EXPECT_EQ(UsbSysfs().root(), "/sys"); }

}  // namespace
}  // namespace rxfleet::agent
