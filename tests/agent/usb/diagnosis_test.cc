#include "agent/usb/diagnosis.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

UsbDeviceInfo Device(uint16_t vid, uint16_t pid, uint16_t bcd_usb, common::UsbSpeed speed) {
  UsbDeviceInfo info;
  info.bus = 2;
  info.port_numbers = {2};
  info.port_path = "2-2";
  info.devnum = 10;
  info.vid = vid;
  info.pid = pid;
  info.bcd_usb = bcd_usb;
  info.speed = speed;
  return info;
}

TEST(DiagnosisTest, SupportedAtSuperSpeedHasNoFindings) {
  // BrosTrend BE6500, RTL8922AU, field log: "usb 2-2: new SuperSpeed USB device".
  const DeviceAssessment a = AssessDevice(Device(0x0bda, 0x8912, 0x0320, common::UsbSpeed::kSuper));
  EXPECT_EQ(a.device_class, DeviceClass::kSupported);
  ASSERT_NE(a.chip, nullptr);
  EXPECT_EQ(a.chip->chip, "rtl8922au");
  EXPECT_EQ(a.chip->layout, common::RxAggLayout::kV3);
  EXPECT_THAT(a.diagnoses, IsEmpty());
}

TEST(DiagnosisTest, SpeedIsNotJudgedFromBcdUsbAlone) {
  // A USB 3 adapter at high-speed reports bcdUSB 0x0210 (hydrausb3/hydrausb3_fw#23), so bcdUSB
  // says nothing; the speed findings come from DiagnoseSpeed (BOS + topology).
  EXPECT_THAT(AssessDevice(Device(0x0bda, 0x8912, 0x0210, common::UsbSpeed::kHigh)).diagnoses,
              IsEmpty());
  EXPECT_THAT(AssessDevice(Device(0x0bda, 0x8912, 0x0320, common::UsbSpeed::kHigh)).diagnoses,
              IsEmpty());
}

TEST(DiagnosisTest, OtherVendorIdsOfRtw89ChipsAreSupported) {
  // D-Link DWA-X1850 A1 (2001:3321, RTL8852AU), field log.
  const DeviceAssessment a = AssessDevice(Device(0x2001, 0x3321, 0x0210, common::UsbSpeed::kHigh));
  EXPECT_EQ(a.device_class, DeviceClass::kSupported);
  ASSERT_NE(a.chip, nullptr);
  EXPECT_EQ(a.chip->chip, "rtl8852au");
}

TEST(DiagnosisTest, StorageModeNeedsAModeSwitch) {
  const DeviceAssessment a = AssessDevice(Device(0x0bda, 0x1a2b, 0x0200, common::UsbSpeed::kHigh));
  EXPECT_EQ(a.device_class, DeviceClass::kStorageMode);
  EXPECT_EQ(a.chip, nullptr);
  ASSERT_EQ(a.diagnoses.size(), 1u);
  EXPECT_EQ(a.diagnoses[0].code, "storage_mode");
  EXPECT_THAT(a.diagnoses[0].message,
              HasSubstr("Realtek adapter in USB storage (virtual CD-ROM) mode; it needs a mode "
                        "switch (usb_modeswitch) before the Wi-Fi driver can bind"));
}

TEST(DiagnosisTest, UnknownRealtekIsLeftAlone) {
  // RTL8153 Ethernet (0bda:8153) is a Realtek USB device but no rtw89 adapter.
  const DeviceAssessment a = AssessDevice(Device(0x0bda, 0x8153, 0x0300, common::UsbSpeed::kSuper));
  EXPECT_EQ(a.device_class, DeviceClass::kUnknownRealtek);
  EXPECT_THAT(a.diagnoses, ElementsAre(Field(&Diagnosis::code, "unsupported_realtek")));
  EXPECT_THAT(a.diagnoses[0].message, HasSubstr("0bda:8153"));
}

TEST(DiagnosisTest, Mt76AndRtw88AdaptersAreObserved) {
  // Alfa AWUS036AXML (MediaTek MT7921AU), field sysfs sample.
  const DeviceAssessment a = AssessDevice(Device(0x0e8d, 0x7961, 0x0320, common::UsbSpeed::kSuper));
  EXPECT_EQ(a.device_class, DeviceClass::kObserved);
  ASSERT_NE(a.observed, nullptr);
  EXPECT_EQ(a.observed->layout->driver, "mt7921u");
  EXPECT_TRUE(a.diagnoses.empty());
  // RTL8822BU: a USB 3 device on a USB 2 link. Why it is at USB 2 needs the topology
  // (DiagnoseSpeed, speed_diagnosis_test.cc), so the id alone gives no finding.
  const DeviceAssessment b = AssessDevice(Device(0x0bda, 0xb812, 0x0300, common::UsbSpeed::kHigh));
  EXPECT_EQ(b.device_class, DeviceClass::kObserved);
  EXPECT_TRUE(b.diagnoses.empty());
}

TEST(DiagnosisTest, OtherVendorIsLeftAlone) {
  // Qualcomm Atheros AR9271 (ath9k_htc): in no chip table.
  const DeviceAssessment a = AssessDevice(Device(0x0cf3, 0x9271, 0x0200, common::UsbSpeed::kHigh));
  EXPECT_EQ(a.device_class, DeviceClass::kOtherVendor);
  EXPECT_EQ(a.chip, nullptr);
  ASSERT_EQ(a.diagnoses.size(), 1u);
  EXPECT_EQ(a.diagnoses[0].code, "other_vendor");
  EXPECT_THAT(a.diagnoses[0].message, HasSubstr("not an rtw89 adapter; left alone"));
}

TEST(DiagnosisTest, ClassNames) {
  EXPECT_EQ(DeviceClassName(DeviceClass::kSupported), "supported");
  EXPECT_EQ(DeviceClassName(DeviceClass::kObserved), "observed");
  EXPECT_EQ(DeviceClassName(DeviceClass::kStorageMode), "storage_mode");
  EXPECT_EQ(DeviceClassName(DeviceClass::kUnknownRealtek), "unknown_realtek");
  EXPECT_EQ(DeviceClassName(DeviceClass::kOtherVendor), "other_vendor");
  EXPECT_EQ(HotplugEventName(HotplugEvent::kArrived), "arrived");
  EXPECT_EQ(HotplugEventName(HotplugEvent::kLeft), "left");
}

}  // namespace
}  // namespace rxfleet::agent
