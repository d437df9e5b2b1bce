// Unit tests of the USB judgements: BOS parsing, why an adapter is at USB 2, and chip
// identification beyond the shipped table.

#include "agent/usb/speed_diagnosis.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "agent/usb/bos.h"
#include "agent/usb/chip_identity.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

// BOS of a USB 3 device: header, USB 2.0 Extension (LPM), SuperSpeed USB Device Capability
// with wSpeedsSupported 0x000e (full, high, 5 Gbit/s) (USB 3.2 spec 9.6.2).
const std::vector<uint8_t> kUsb3Bos = {0x05, 0x0f, 0x16, 0x00, 0x02,                    //
                                       0x07, 0x10, 0x02, 0x02, 0x00, 0x00, 0x00,        //
                                       0x0a, 0x10, 0x03, 0x00, 0x0e, 0x00, 0x01, 0x0a,  //
                                       0xff, 0x07};

TEST(BosTest, FindsTheSuperSpeedCapability) {
  EXPECT_THAT(ParseBosDescriptor(kUsb3Bos), absl::StatusOr<BosSpeeds>(BosSpeeds{true, false}));
}

TEST(BosTest, Usb2ExtensionAloneIsNotSuperSpeed) {
  const std::vector<uint8_t> usb2 = {0x05, 0x0f, 0x0c, 0x00, 0x01, 0x07,
                                     0x10, 0x02, 0x02, 0x00, 0x00, 0x00};
  EXPECT_THAT(ParseBosDescriptor(usb2), absl::StatusOr<BosSpeeds>(BosSpeeds{false, false}));
}

TEST(BosTest, RefusesMalformedDescriptors) {
  EXPECT_FALSE(ParseBosDescriptor(std::vector<uint8_t>{0x05, 0x0f}).ok());
  std::vector<uint8_t> wrong_type = kUsb3Bos;
  wrong_type[1] = 0x02;
  EXPECT_FALSE(ParseBosDescriptor(wrong_type).ok());
  std::vector<uint8_t> too_long = kUsb3Bos;
  too_long[2] = 0x40;  // wTotalLength past the buffer
  EXPECT_FALSE(ParseBosDescriptor(too_long).ok());
  std::vector<uint8_t> bad_cap = kUsb3Bos;
  bad_cap[5] = 0x01;  // capability bLength < 3
  EXPECT_FALSE(ParseBosDescriptor(bad_cap).ok());
}

SpeedFacts HighSpeedBe6500() {
  // BrosTrend BE6500 (RTL8922AU) on its first plug: 3-3 at high-speed, peer 2-2.
  SpeedFacts f;
  f.device.vid = 0x0bda;
  f.device.pid = 0x8912;
  f.device.bcd_usb = 0x0210;
  f.device.port_path = "3-3";
  f.device.speed = common::UsbSpeed::kHigh;
  f.chip = "rtl8922au";
  f.bos = BosSpeeds{true, false};
  f.topology.port_path = "3-3";
  f.topology.bus = 3;
  f.topology.root_speed = common::UsbSpeed::kHigh;
  f.topology.peer_port_path = "2-2";
  f.settle = absl::Seconds(5);
  return f;
}

TEST(SpeedDiagnosisTest, PendingWhileSettlingThenFailed) {
  SpeedFacts f = HighSpeedBe6500();
  f.at_speed_for = absl::Seconds(1);
  EXPECT_TRUE(Usb3SwitchPending(f));
  std::optional<Diagnosis> d = DiagnoseSpeed(f);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->code, "usb3_switch_pending");
  f.at_speed_for = absl::Seconds(5);
  EXPECT_FALSE(Usb3SwitchPending(f));
  d = DiagnoseSpeed(f);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->code, "usb3_switch_failed");
  EXPECT_THAT(d->message, HasSubstr("2-2"));
}

TEST(SpeedDiagnosisTest, NoPeerMeansUsb2OnlyPort) {
  SpeedFacts f = HighSpeedBe6500();
  f.topology.peer_port_path.clear();
  EXPECT_FALSE(Usb3SwitchPending(f));
  EXPECT_EQ(DiagnoseSpeed(f)->code, "usb2_only_port");
  EXPECT_THAT(DiagnoseSpeed(f)->message, ::testing::Not(HasSubstr("replug")));
}

TEST(SpeedDiagnosisTest, HighSpeedHubOnAUsb3RootPortIsNamed) {
  SpeedFacts f = HighSpeedBe6500();
  f.device.port_path = f.topology.port_path = "3-1.2";
  f.topology.peer_port_path.clear();
  f.topology.hubs = {HubHop{"3-1", common::UsbSpeed::kHigh, "2-1"}};
  const std::optional<Diagnosis> d = DiagnoseSpeed(f);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->code, "hub_limits_speed");
  EXPECT_THAT(d->message, HasSubstr("hub 3-1, which runs at high-speed"));
}

TEST(SpeedDiagnosisTest, NothingForSuperSpeedOrUsb2Devices) {
  SpeedFacts f = HighSpeedBe6500();
  f.device.speed = common::UsbSpeed::kSuper;
  EXPECT_EQ(DiagnoseSpeed(f), std::nullopt);
  f = HighSpeedBe6500();
  f.bos = BosSpeeds{false, false};  // a USB 2 device at high-speed runs as designed
  EXPECT_EQ(DiagnoseSpeed(f), std::nullopt);
  f = HighSpeedBe6500();
  f.bos.reset();
  f.chip = "rtl8851bu";  // without a BOS the chip decides: the RTL8851BU is USB 2
  EXPECT_EQ(DiagnoseSpeed(f), std::nullopt);
  f.chip = "rtl8922au";
  f.at_speed_for = absl::Seconds(1);
  EXPECT_EQ(DiagnoseSpeed(f)->code, "usb3_switch_pending");
}

TEST(SpeedDiagnosisTest, Usb3BcdUsbCountsWithoutABosCapability) {
  SpeedFacts f = HighSpeedBe6500();
  f.bos = BosSpeeds{false, false};
  f.device.bcd_usb = 0x0320;
  f.at_speed_for = absl::Seconds(10);
  EXPECT_EQ(DiagnoseSpeed(f)->code, "usb3_switch_failed");
}

TEST(SpeedDiagnosisTest, ObserveOnlyAdaptersNeverWaitAndNeedAUsb3Proof) {
  // An RTL8822BU (rtw88, observe-only) at high-speed on a connector with a USB 3 partner.
  SpeedFacts f = HighSpeedBe6500();
  f.chip = "rtl8822bu";
  f.managed = false;
  f.at_speed_for = absl::Seconds(1);
  EXPECT_FALSE(Usb3SwitchPending(f));
  std::optional<Diagnosis> d = DiagnoseSpeed(f);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->code, "usb3_switch_failed");
  EXPECT_THAT(d->message, HasSubstr("cable"));
  EXPECT_THAT(d->message, ::testing::Not(HasSubstr("0xc4")));
  // Without a BOS and with bcdUSB 2.10 nothing says it is a USB 3 device: no finding.
  f.bos.reset();
  EXPECT_EQ(DiagnoseSpeed(f), std::nullopt);
  f.device.bcd_usb = 0x0300;
  EXPECT_EQ(DiagnoseSpeed(f)->code, "usb3_switch_failed");
  f.topology.peer_port_path.clear();
  EXPECT_EQ(DiagnoseSpeed(f)->code, "usb2_only_port");
}

TEST(ChipIdentityTest, DriverNamesGiveChips) {
  EXPECT_THAT(ChipFromDriverName("rtw89_8922au"), Optional(std::string_view("rtl8922au")));
  EXPECT_THAT(ChipFromDriverName("rtw89_8852au_git"), Optional(std::string_view("rtl8852au")));
  EXPECT_EQ(ChipFromDriverName("rtw89_usb"), std::nullopt);
  EXPECT_EQ(ChipFromDriverName("mt7921u"), std::nullopt);
  EXPECT_EQ(ChipFromDriverName(""), std::nullopt);
}

UsbDeviceInfo Tbe400u() {
  // TP-Link TBE400U, RTL8922AU, added to the driver in morrownr/rtw89 PR#123.
  UsbDeviceInfo d;
  d.vid = 0x37ad;
  d.pid = 0x0104;
  d.speed = common::UsbSpeed::kSuper;
  return d;
}

TEST(ChipIdentityTest, UnknownIdBoundToRtw89IsManaged) {
  const IdentifiedDevice id = IdentifyDevice(Tbe400u(), ChipCatalog(), "rtw89_8922au");
  EXPECT_EQ(id.assessment.device_class, DeviceClass::kSupported);
  ASSERT_NE(id.assessment.chip, nullptr);
  EXPECT_EQ(id.assessment.chip->chip, "rtl8922au");
  EXPECT_EQ(id.assessment.chip->layout, common::RxAggLayout::kV3);
  EXPECT_EQ(id.source, ChipSource::kDriver);
  ASSERT_EQ(id.assessment.diagnoses.size(), 1u);
  EXPECT_EQ(id.assessment.diagnoses[0].code, "chip_from_driver");
}

TEST(ChipIdentityTest, UnknownUnboundIdIsLeftAloneWithAReason) {
  const IdentifiedDevice id = IdentifyDevice(Tbe400u(), ChipCatalog(), "");
  EXPECT_EQ(id.assessment.device_class, DeviceClass::kOtherVendor);
  EXPECT_EQ(id.source, ChipSource::kNone);
  ASSERT_EQ(id.assessment.diagnoses.size(), 1u);
  EXPECT_EQ(id.assessment.diagnoses[0].code, "unknown_id_unbound");
  // Bound to a driver of no Wi-Fi family: an ordinary other-vendor device.
  EXPECT_EQ(IdentifyDevice(Tbe400u(), ChipCatalog(), "cdc_ether").assessment.diagnoses[0].code,
            "other_vendor");
}

TEST(ChipIdentityTest, UnknownIdBoundToAnObserveOnlyDriverIsObserved) {
  // An id of no table bound to mt7921u (MediaTek MT7921AU): observed with that driver's
  // layout, never managed.
  const IdentifiedDevice mt = IdentifyDevice(Tbe400u(), ChipCatalog(), "mt7921u");
  EXPECT_EQ(mt.assessment.device_class, DeviceClass::kObserved);
  EXPECT_EQ(mt.assessment.chip, nullptr);
  ASSERT_NE(mt.assessment.observed, nullptr);
  EXPECT_EQ(mt.assessment.observed->layout->driver, "mt7921u");
  EXPECT_EQ(mt.assessment.observed->layout->family, common::ChipFamily::kMt76);
  EXPECT_EQ(mt.source, ChipSource::kDriver);
  EXPECT_EQ(mt.origin, "mt7921u");
  ASSERT_EQ(mt.assessment.diagnoses.size(), 1u);
  EXPECT_EQ(mt.assessment.diagnoses[0].code, "chip_from_driver");
  EXPECT_THAT(mt.assessment.diagnoses[0].message, HasSubstr("never written"));
  // rtw88: the in-kernel module name (rtw88_8822bu) and the out-of-tree one (rtw_8822bu).
  for (const char* driver : {"rtw88_8822bu", "rtw_8822bu"}) {
    const IdentifiedDevice bu = IdentifyDevice(Tbe400u(), ChipCatalog(), driver);
    EXPECT_EQ(bu.assessment.device_class, DeviceClass::kObserved) << driver;
    ASSERT_NE(bu.assessment.observed, nullptr) << driver;
    EXPECT_EQ(bu.assessment.observed->layout->driver, "rtw_8822bu");
  }
  EXPECT_EQ(common::LookupObservedChipByDriver("rtw88_usb"), nullptr);
  EXPECT_EQ(common::LookupObservedChipByDriver(""), nullptr);
}

TEST(ChipIdentityTest, TableIdsNameTheirFamilyTable) {
  UsbDeviceInfo d = Tbe400u();
  d.vid = 0x0e8d;
  d.pid = 0x7961;  // MT7921AU
  const IdentifiedDevice id = IdentifyDevice(d, ChipCatalog(), "mt7921u");
  EXPECT_EQ(id.source, ChipSource::kTable);
  EXPECT_EQ(id.origin, "mt76-usb-devices.tsv");
  EXPECT_THAT(id.assessment.diagnoses, IsEmpty());
}

class ChipsDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(ChipsDirTest, ExtensionIdsAreManagedAndBadFilesNamed) {
  Write("tplink.tsv",
        "vid\tpid\tchip\trx_agg_layout\tsource\n37ad\t0104\trtl8922au\tv3\tmorrownr/rtw89 "
        "PR#123\n");
  Write("bad.tsv", "vid\tpid\tchip\trx_agg_layout\tsource\n37ad\t0105\trtl8922au\tv1\tx\n");
  Write("dup.tsv", "vid\tpid\tchip\trx_agg_layout\tsource\n0bda\t8912\trtl8922au\tv3\tx\n");
  Write("notes.txt", "ignored");
  std::vector<std::string> errors;
  const ChipCatalog catalog = ChipCatalog::Load(dir_.string(), &errors);
  EXPECT_EQ(catalog.extension_count(), 1u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0], HasSubstr("bad.tsv:2: layout v1 does not match rtl8922au"));
  EXPECT_THAT(errors[1], HasSubstr("dup.tsv:2: 0bda:8912 is already in the shipped table"));
  const IdentifiedDevice id = IdentifyDevice(Tbe400u(), catalog, "");
  EXPECT_EQ(id.source, ChipSource::kExtension);
  EXPECT_THAT(id.origin, HasSubstr("tplink.tsv:2"));
  EXPECT_EQ(id.assessment.diagnoses[0].code, "chip_from_extension");
}

TEST_F(ChipsDirTest, MissingDirectoryIsEmpty) {
  std::vector<std::string> errors;
  EXPECT_EQ(ChipCatalog::Load((dir_ / "none").string(), &errors).extension_count(), 0u);
  EXPECT_THAT(errors, IsEmpty());
}

// Regression: a FIFO or a directory named *.tsv was reported as "larger than 65536 bytes", an
// oversized file's real size was not named, and --chips-dir naming a file was silently empty.
TEST_F(ChipsDirTest, FilesThatAreNotSmallRegularFilesAreNamedWithTheirReason) {
  Write("good.tsv", "vid\tpid\tchip\trx_agg_layout\tsource\n37ad\t0104\trtl8922au\tv3\tx\n");
  ASSERT_EQ(::mkfifo((dir_ / "fifo.tsv").c_str(), 0600), 0);
  std::filesystem::create_directory(dir_ / "subdir.tsv");
  Write("huge.tsv", std::string(65 * 1024, '#'));
  std::vector<std::string> errors;
  const ChipCatalog catalog = ChipCatalog::Load(dir_.string(), &errors);
  EXPECT_EQ(catalog.extension_count(), 1u);  // the good file still loads; the FIFO never hangs
  ASSERT_EQ(errors.size(), 3u) << ::testing::PrintToString(errors);
  EXPECT_THAT(errors[0], AllOf(HasSubstr("fifo.tsv"), HasSubstr("not a regular file")));
  EXPECT_THAT(errors[1], AllOf(HasSubstr("huge.tsv"), HasSubstr("66560 bytes")));
  EXPECT_THAT(errors[2], AllOf(HasSubstr("subdir.tsv"), HasSubstr("not a regular file")));
}

TEST_F(ChipsDirTest, APathThatIsNotADirectoryIsNamed) {
  Write("chips.tsv", "vid\tpid\tchip\trx_agg_layout\tsource\n");
  std::vector<std::string> errors;
  EXPECT_EQ(ChipCatalog::Load((dir_ / "chips.tsv").string(), &errors).extension_count(), 0u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("chips.tsv: not a directory"));
}

}  // namespace
}  // namespace rxfleet::agent
