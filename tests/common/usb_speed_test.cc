#include "common/usb_speed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rxfleet::common {
namespace {

constexpr UsbSpeed kAll[] = {UsbSpeed::kUnknown, UsbSpeed::kLow,   UsbSpeed::kFull,
                             UsbSpeed::kHigh,    UsbSpeed::kSuper, UsbSpeed::kSuperPlus};

TEST(UsbSpeedTest, Names) {
  EXPECT_EQ(UsbSpeedName(UsbSpeed::kUnknown), "unknown");
  EXPECT_EQ(UsbSpeedName(UsbSpeed::kLow), "low");
  EXPECT_EQ(UsbSpeedName(UsbSpeed::kFull), "full");
  EXPECT_EQ(UsbSpeedName(UsbSpeed::kHigh), "high");
  EXPECT_EQ(UsbSpeedName(UsbSpeed::kSuper), "super");
  EXPECT_EQ(UsbSpeedName(UsbSpeed::kSuperPlus), "super_plus");
}

TEST(UsbSpeedTest, DisplayNames) {
  EXPECT_EQ(UsbSpeedDisplayName(UsbSpeed::kUnknown), "unknown speed");
  EXPECT_EQ(UsbSpeedDisplayName(UsbSpeed::kLow), "low-speed");
  EXPECT_EQ(UsbSpeedDisplayName(UsbSpeed::kFull), "full-speed");
  EXPECT_EQ(UsbSpeedDisplayName(UsbSpeed::kHigh), "high-speed");
  EXPECT_EQ(UsbSpeedDisplayName(UsbSpeed::kSuper), "SuperSpeed");
  EXPECT_EQ(UsbSpeedDisplayName(UsbSpeed::kSuperPlus), "SuperSpeed+");
}

TEST(UsbSpeedTest, ParseRoundTripsNames) {
  for (UsbSpeed speed : kAll) {
    absl::StatusOr<UsbSpeed> parsed = ParseUsbSpeed(UsbSpeedName(speed));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, speed);
  }
  EXPECT_EQ(*ParseUsbSpeed("SUPER"), UsbSpeed::kSuper);
  EXPECT_EQ(*ParseUsbSpeed("super-plus"), UsbSpeed::kSuperPlus);
}

TEST(UsbSpeedTest, ParseRejectsUnknownNamesWithTheInput) {
  absl::StatusOr<UsbSpeed> parsed = ParseUsbSpeed("hyper");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()), ::testing::HasSubstr("'hyper'"));
}

TEST(UsbSpeedTest, FromSysfs) {
  EXPECT_EQ(UsbSpeedFromSysfs("1.5"), UsbSpeed::kLow);
  EXPECT_EQ(UsbSpeedFromSysfs("12"), UsbSpeed::kFull);
  EXPECT_EQ(UsbSpeedFromSysfs("480\n"), UsbSpeed::kHigh);
  EXPECT_EQ(UsbSpeedFromSysfs("5000"), UsbSpeed::kSuper);
  EXPECT_EQ(UsbSpeedFromSysfs("10000"), UsbSpeed::kSuperPlus);
  EXPECT_EQ(UsbSpeedFromSysfs("20000"), UsbSpeed::kSuperPlus);
  EXPECT_EQ(UsbSpeedFromSysfs("481"), UsbSpeed::kUnknown);
  EXPECT_EQ(UsbSpeedFromSysfs(""), UsbSpeed::kUnknown);
}

TEST(UsbSpeedTest, IsUsb3) {
  EXPECT_TRUE(IsUsb3(UsbSpeed::kSuper));
  EXPECT_TRUE(IsUsb3(UsbSpeed::kSuperPlus));
  EXPECT_FALSE(IsUsb3(UsbSpeed::kHigh));
  EXPECT_FALSE(IsUsb3(UsbSpeed::kFull));
  EXPECT_FALSE(IsUsb3(UsbSpeed::kLow));
  EXPECT_FALSE(IsUsb3(UsbSpeed::kUnknown));
}

}  // namespace
}  // namespace rxfleet::common
