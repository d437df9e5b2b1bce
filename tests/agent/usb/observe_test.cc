// Judging read-only passes of rtw88 and mt76 adapters: which words are trusted, which
// diagnoses follow, and that implausible reads are never judged.

#include "agent/usb/observe.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ObservationInput Rtl8822bu(uint32_t reg0280, common::UsbSpeed speed, std::string kernel) {
  ObservationInput in;
  in.chip = common::LookupObservedChip(0x0bda, 0xb812);
  in.speed = speed;
  in.netdev_up = true;
  in.kernel_release = std::move(kernel);
  in.words = {{0x0280, reg0280}, {0x010C, 0x0000F5F4}, {0x00FC, 0x20000000}};
  return in;
}

TEST(ObserveTest, AggregationOffOnAnOldKernelIsDiagnosedWithBothVersions) {
  const Observation o =
      AssessObservation(Rtl8822bu(0x00000100, common::UsbSpeed::kSuper, "6.6.31-v8+"));
  ASSERT_TRUE(o.judged) << o.not_judged_reason;
  EXPECT_THAT(o.diagnoses, ElementsAre(Field(&Diagnosis::code, "rx_agg_off_old_kernel")));
  EXPECT_THAT(o.diagnoses[0].message, HasSubstr("kernel 6.6.31-v8+ predates 6.12"));
  EXPECT_THAT(o.diagnoses[0].message, HasSubstr("002a5db9a52a"));
  EXPECT_THAT(o.diagnoses[0].message, HasSubstr("Action: upgrade the kernel to 6.12"));
  EXPECT_THAT(o.fields, Contains(common::FieldValue{"rx_agg_timeout", 1}));
}

TEST(ObserveTest, AggregationOffOnANewKernelIsNotAnOldKernelProblem) {
  // 6.12+ turns aggregation off below ~1 Mbit/s itself (size 0, timeout 1).
  const Observation o =
      AssessObservation(Rtl8822bu(0x00000100, common::UsbSpeed::kSuper, "6.12.25"));
  ASSERT_TRUE(o.judged);
  EXPECT_THAT(o.diagnoses, IsEmpty());
  // The 8814AU got it only in 6.16.
  ObservationInput in = Rtl8822bu(0x00000100, common::UsbSpeed::kSuper, "6.12.25");
  in.chip = common::LookupObservedChip(0x0bda, 0x8813);
  ASSERT_NE(in.chip, nullptr);
  ASSERT_EQ(in.chip->layout->driver, "rtw_8814au");
  const Observation o8814 = AssessObservation(in);
  EXPECT_THAT(o8814.diagnoses, ElementsAre(Field(&Diagnosis::code, "rx_agg_off_old_kernel")));
  EXPECT_THAT(o8814.diagnoses[0].message, HasSubstr("predates 6.16"));
}

TEST(ObserveTest, PreCalcAtUsb3OnRtl8822buIsDiagnosed) {
  const Observation o =
      AssessObservation(Rtl8822bu(0x20002005, common::UsbSpeed::kSuper, "6.12.1"));
  EXPECT_THAT(o.diagnoses, ElementsAre(Field(&Diagnosis::code, "rtw88_pre_calc_usb3")));
  EXPECT_THAT(o.diagnoses[0].message, HasSubstr("4aefde403da7"));
  EXPECT_THAT(o.diagnoses[0].message, HasSubstr("switch_usb_mode=N"));
  // At high-speed with 0x00FF != 0x20 there is no such bug.
  ObservationInput usb2 = Rtl8822bu(0x20002005, common::UsbSpeed::kHigh, "6.12.1");
  usb2.words[0x00FC] = 0x00000000;
  EXPECT_THAT(AssessObservation(usb2).diagnoses, IsEmpty());
  // 0x00FF == 0x20 says USB 3 mode even when the link speed is unknown.
  ObservationInput chip_says = Rtl8822bu(0x20002005, common::UsbSpeed::kUnknown, "6.12.1");
  EXPECT_THAT(AssessObservation(chip_says).diagnoses,
              ElementsAre(Field(&Diagnosis::code, "rtw88_pre_calc_usb3")));
}

TEST(ObserveTest, NetdevDownOrImplausibleReadsAreNeverJudged) {
  ObservationInput down = Rtl8822bu(0x20000100, common::UsbSpeed::kSuper, "6.6.1");
  down.netdev_up = false;
  const Observation o = AssessObservation(down);
  EXPECT_FALSE(o.judged);
  EXPECT_THAT(o.not_judged_reason, HasSubstr("netdev down"));
  EXPECT_THAT(o.diagnoses, IsEmpty());
  EXPECT_THAT(o.fields, IsEmpty());

  ObservationInput ones = Rtl8822bu(0xFFFFFFFF, common::UsbSpeed::kSuper, "6.6.1");
  const Observation o2 = AssessObservation(ones);
  EXPECT_FALSE(o2.judged);
  EXPECT_THAT(o2.not_judged_reason, HasSubstr("0x0280 read 0xffffffff"));
  EXPECT_THAT(o2.diagnoses, IsEmpty());

  ObservationInput failed = Rtl8822bu(0x00000100, common::UsbSpeed::kSuper, "6.6.1");
  failed.words.erase(0x0280);
  failed.read_errors = {"read of register 0x0280: timeout"};
  EXPECT_FALSE(AssessObservation(failed).judged);
}

TEST(ObserveTest, Mt76HoldIsNotControllableEvenWhenUnreadable) {
  ObservationInput in;
  in.chip = common::LookupObservedChip(0x0e8d, 0x7961);
  in.netdev_up = true;
  in.words = {{0x74000018, 0x00D40000}, {0x7400000C, 0x00000000}};
  const Observation o = AssessObservation(in);
  ASSERT_TRUE(o.judged);
  EXPECT_THAT(o.diagnoses, ElementsAre(Field(&Diagnosis::code, "hold_not_controllable")));
  EXPECT_THAT(o.diagnoses[0].message, HasSubstr("one frame per URB"));
  EXPECT_THAT(o.fields, Contains(common::FieldValue{"rx_en", 1}));
  in.words[0x74000018] = 0xFFFFFFFF;  // mt76's failed read
  const Observation bad = AssessObservation(in);
  EXPECT_FALSE(bad.judged);
  EXPECT_THAT(bad.fields, IsEmpty());
  EXPECT_THAT(bad.diagnoses, ElementsAre(Field(&Diagnosis::code, "hold_not_controllable")));
}

}  // namespace
}  // namespace rxfleet::agent
