#include "tools/emulator/device_model.h"

#include <cerrno>

#include "gtest/gtest.h"

namespace rxfleet::emulator {
namespace {

DeviceSpec Spec() {
  DeviceSpec spec;
  spec.name = "a";
  spec.config.vid = 0x0bda;
  spec.config.pid = 0x8912;
  spec.config.speed_mbps = 5000;
  spec.config.bus = 2;
  spec.config.port = "2";
  spec.config.devnum = 10;
  spec.config.interfaces = DefaultInterfaces();
  spec.registers = {{0x6000, 0x80FF2014}};
  return spec;
}

ControlSetup Read(uint32_t address, uint16_t length) {
  return {0xC0, 0x05, static_cast<uint16_t>(address & 0xffff), static_cast<uint16_t>(address >> 16),
          length};
}

ControlSetup Write(uint32_t address, uint16_t length) {
  return {0x40, 0x05, static_cast<uint16_t>(address & 0xffff), static_cast<uint16_t>(address >> 16),
          length};
}

TEST(RegisterMapTest, ByteAddressedLittleEndian) {
  RegisterMap m({{0x6000, 0x80FF2014}});
  EXPECT_EQ(m.Read(0x6000, 4), (std::vector<uint8_t>{0x14, 0x20, 0xff, 0x80}));
  m.Write(0x6001, {0x01});
  EXPECT_EQ(m.Read32(0x6000), 0x80FF0114u);
  EXPECT_EQ(m.Read32(0x7000), 0u);
  m.Write(0x7002, {0xaa});
  EXPECT_EQ(m.Words().at(0x7000), 0x00aa0000u);
}

TEST(EmulatedDeviceTest, VendorReadWriteAndLog) {
  EmulatedDevice d(Spec(), HostClass::kX86);
  ControlOutcome r = d.HandleControl(1, Read(0x6000, 4), {}, 0.1);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.in_data, (std::vector<uint8_t>{0x14, 0x20, 0xff, 0x80}));
  r = d.HandleControl(1, Write(0x6000, 4), {0x14, 0x01, 0xff, 0x80}, 0.2);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(d.Register32(0x6000), 0x80FF0114u);
  ASSERT_EQ(d.transfers().size(), 2u);
  EXPECT_FALSE(d.transfers()[1].in);
  EXPECT_EQ(d.transfers()[1].address, 0x6000u);
  const nlohmann::json j = d.StateJson();
  EXPECT_EQ(j["transfers"][1]["value"], "0x80ff0114");
  EXPECT_EQ(j["registers"]["0x6000"], "0x80ff0114");
  EXPECT_EQ(j["hold_us"], 32);
}

TEST(EmulatedDeviceTest, OtherRequestsStall) {
  EmulatedDevice d(Spec(), HostClass::kX86);
  EXPECT_EQ(d.HandleControl(1, {0xC0, 0x06, 0x6000, 0, 4}, {}, 0).status, -EPIPE);
  EXPECT_EQ(d.HandleControl(1, Read(0x6000, 3), {}, 0).status, -EPIPE);
  EXPECT_EQ(d.HandleControl(1, {0x00, 0x09, 1, 0, 0}, {}, 0).status, -EPIPE);  // SET_CONFIG
  // SET_ISOCH_DELAY and SET_SEL are part of SuperSpeed enumeration: accepted.
  EXPECT_EQ(d.HandleControl(1, {0x00, 0x31, 40, 0, 0}, {}, 0).status, 0);
  EXPECT_EQ(d.HandleControl(1, {0x00, 0x30, 0, 0, 6}, {1, 2, 3, 4, 5, 6}, 0).status, 0);
  EXPECT_EQ(d.HandleControl(1, {0x00, 0x09, 1, 0, 0}, {}, 0).status, -EPIPE);
  EXPECT_EQ(d.transfers().back().result, TransferResult::kStall);
  ControlOutcome desc = d.HandleControl(1, {0x80, 0x06, 0x0300, 0, 255}, {}, 0);
  EXPECT_EQ(desc.status, 0);
  EXPECT_EQ(desc.in_data, (std::vector<uint8_t>{4, 3, 9, 4}));
}

// GET_DESCRIPTOR(BOS): a USB 3 adapter keeps its SuperSpeed USB Device Capability at
// high-speed, where it reports bcdUSB 0x0210 (USB 3.2 spec 9.6.2; hydrausb3/hydrausb3_fw#23).
TEST(EmulatedDeviceTest, BosCarriesTheSuperSpeedCapabilityAtHighSpeed) {
  DeviceSpec spec = Spec();
  spec.config.speed_mbps = 480;
  spec.config.bcd_usb = 0x0210;
  spec.config.superspeed_capable = true;
  EmulatedDevice d(spec, HostClass::kX86);
  const ControlSetup get_bos = {0x80, 0x06, 0x0f00, 0, 255};
  ControlOutcome bos = d.HandleControl(1, get_bos, {}, 0);
  ASSERT_EQ(bos.status, 0);
  EXPECT_EQ(bos.in_data,
            (std::vector<uint8_t>{5, 0x0f, 22,   0,    2, 7,    0x10, 0x02, 0,    0,    0,
                                  0, 10,   0x10, 0x03, 0, 0x0e, 0,    1,    0x0a, 0xff, 0x07}));
  // The header alone (the kernel reads 5 bytes first, then wTotalLength).
  EXPECT_EQ(d.HandleControl(1, {0x80, 0x06, 0x0f00, 0, 5}, {}, 0).in_data,
            (std::vector<uint8_t>{5, 0x0f, 22, 0, 2}));

  // A USB 2-only device with bcdUSB 2.10: only the USB 2.0 Extension.
  spec.config.superspeed_capable = false;
  EmulatedDevice usb2(spec, HostClass::kX86);
  EXPECT_EQ(usb2.HandleControl(1, get_bos, {}, 0).in_data,
            (std::vector<uint8_t>{5, 0x0f, 12, 0, 1, 7, 0x10, 0x02, 0, 0, 0, 0}));
  // bcdUSB 2.00: no BOS at all (STALL), as USB 2.0 devices without LPM answer.
  spec.config.bcd_usb = 0x0200;
  EmulatedDevice old(spec, HostClass::kX86);
  EXPECT_EQ(old.HandleControl(1, get_bos, {}, 0).status, -EPIPE);
}

TEST(EmulatedDeviceTest, ModesAsleepFailAndUnplug) {
  EmulatedDevice d(Spec(), HostClass::kX86);
  d.SetAsleep(true);
  EXPECT_EQ(d.HandleControl(1, Read(0x6000, 4), {}, 0).in_data,
            (std::vector<uint8_t>{0xef, 0xbe, 0xad, 0xde}));
  d.HandleControl(1, Write(0x6000, 4), {1, 2, 3, 4}, 0);
  EXPECT_EQ(d.Register32(0x6000), 0x80FF2014u);
  EXPECT_EQ(d.transfers().back().result, TransferResult::kAsleep);
  d.SetAsleep(false);
  d.FailNext(1, FailMode::kTimeout);
  EXPECT_TRUE(d.HandleControl(1, Read(0x6000, 4), {}, 0).pending);
  d.FailNext(1, FailMode::kProtocolError);
  EXPECT_EQ(d.HandleControl(1, Read(0x6000, 4), {}, 0).status, -EPROTO);
  EXPECT_EQ(d.HandleControl(1, Read(0x6000, 4), {}, 0).status, 0);
  d.Unplug();
  EXPECT_EQ(d.HandleControl(1, Read(0x6000, 4), {}, 0).submit_errno, ENODEV);
  DeviceConfig moved = d.config();
  moved.bus = 3;
  d.Plug(moved, false);
  EXPECT_EQ(d.incarnation(), 2u);
  EXPECT_EQ(d.HandleControl(1, Read(0x6000, 4), {}, 0).submit_errno, ENODEV);  // old handle
  EXPECT_EQ(d.HandleControl(2, Read(0x6000, 4), {}, 0).status, 0);
  EXPECT_EQ(d.transfers().back().result, TransferResult::kOk);
}

}  // namespace
}  // namespace rxfleet::emulator
