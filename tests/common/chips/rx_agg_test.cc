#include "common/chips/rx_agg.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace rxfleet::common {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RxAggSettings Hold(uint32_t hold_us) {
  RxAggSettings settings;
  settings.hold_us = hold_us;
  return settings;
}

uint32_t MustApply(RxAggLayout layout, uint32_t word, const RxAggSettings& settings) {
  absl::StatusOr<uint32_t> result = ApplyRxAggSettings(layout, word, settings);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.value_or(0);
}

TEST(RxAggLayoutSpecTest, RegisterFacts) {
  const RxAggLayoutSpec& v1 = GetRxAggLayoutSpec(RxAggLayout::kV1);
  EXPECT_EQ(v1.reg0_address, 0x8900u);
  EXPECT_EQ(v1.reg1_address, std::nullopt);
  EXPECT_EQ(v1.buffer_unit_bytes, 4096u);
  EXPECT_EQ(v1.driver_default_reg0, 0x80002005u);
  EXPECT_EQ(v1.driver_default_reg1, std::nullopt);
  for (RxAggLayout layout : {RxAggLayout::kV2, RxAggLayout::kV3}) {
    const RxAggLayoutSpec& spec = GetRxAggLayoutSpec(layout);
    EXPECT_EQ(spec.layout, layout);
    EXPECT_EQ(spec.reg0_address, 0x6000u);
    EXPECT_EQ(spec.reg1_address, 0x6004u);
    EXPECT_EQ(spec.buffer_unit_bytes, 1024u);
    EXPECT_EQ(spec.driver_default_reg0, 0x80FF2014u);
    EXPECT_EQ(spec.driver_default_reg1, 0x1Fu);
  }
  EXPECT_THAT(RxAggRegisterAddresses(RxAggLayout::kV1), ElementsAre(0x8900u));
  EXPECT_THAT(RxAggRegisterAddresses(RxAggLayout::kV2), ElementsAre(0x6000u, 0x6004u));
  EXPECT_THAT(RxAggRegisterAddresses(RxAggLayout::kV3), ElementsAre(0x6000u, 0x6004u));
}

TEST(DecodeRxAggTest, DriverDefaults) {
  const RxAggFields v1 = DecodeRxAgg(RxAggLayout::kV1, 0x80002005);
  EXPECT_TRUE(v1.enable);
  EXPECT_EQ(v1.count_threshold, 0u);
  EXPECT_EQ(v1.hold_us, 1024u);
  EXPECT_EQ(v1.buffer_kib, 20u);
  EXPECT_EQ(v1.other_bits, 0u);

  const RxAggFields v3 = DecodeRxAgg(RxAggLayout::kV3, 0x80FF2014);
  EXPECT_TRUE(v3.enable);
  EXPECT_EQ(v3.count_threshold, 255u);
  EXPECT_EQ(v3.hold_us, 1024u);
  EXPECT_EQ(v3.buffer_kib, 20u);

  const RxAggFields short_hold = DecodeRxAgg(RxAggLayout::kV3, 0x80FF0114);
  EXPECT_EQ(short_hold.hold_us, 32u);

  const RxAggFields other = DecodeRxAgg(RxAggLayout::kV2, 0x20FF2014);
  EXPECT_FALSE(other.enable);
  EXPECT_EQ(other.other_bits, 0x20000000u);
}

TEST(ApplyRxAggSettingsTest, ShortHoldExamples) {
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x80FF2014, Hold(32)), 0x80FF0114u);
  EXPECT_EQ(MustApply(RxAggLayout::kV1, 0x80002005, Hold(32)), 0x80000105u);
  EXPECT_EQ(MustApply(RxAggLayout::kV2, 0x80FF2014, Hold(32)), 0x80FF0114u);
}

TEST(ApplyRxAggSettingsTest, DefaultHoldLeavesWordUnchanged) {
  for (RxAggLayout layout : {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3}) {
    const uint32_t word = GetRxAggLayoutSpec(layout).driver_default_reg0;
    EXPECT_EQ(MustApply(layout, word, Hold(1024)), word);
  }
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x80FF2014, RxAggSettings{}), 0x80FF2014u);
}

TEST(ApplyRxAggSettingsTest, KeepsBitsOutsideTheFieldsSet) {
  // Bit 29 (vendor SW enable) and bit 30 (DMA store) stay as they are.
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0xA0FF2014, Hold(32)), 0xA0FF0114u);
  EXPECT_EQ(MustApply(RxAggLayout::kV1, 0xFF002005, Hold(32)), 0xFF000105u);
  // Every bit except the hold field is preserved for an arbitrary word.
  const uint32_t word = 0xFB5A3CC3;
  const uint32_t out = MustApply(RxAggLayout::kV2, word, Hold(8160));
  EXPECT_EQ(out & ~kRxAggHoldMask, word & ~kRxAggHoldMask);
  EXPECT_EQ(out & kRxAggHoldMask, 0xFF00u);
}

TEST(ApplyRxAggSettingsTest, EachField) {
  RxAggSettings settings;
  settings.count_threshold = 8;
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x80FF2014, settings), 0x80082014u);
  settings = {};
  settings.buffer_kib = 16;
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x80FF2014, settings), 0x80FF2010u);
  EXPECT_EQ(MustApply(RxAggLayout::kV1, 0x80002005, settings), 0x80002004u);
  settings = {};
  settings.enable = false;
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x80FF2014, settings), 0x00FF2014u);
  settings.hold_us = 32;
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x00FF2014, settings), 0x00FF0114u)
      << "explicit enable=false is allowed on a disabled register";
}

TEST(ApplyRxAggSettingsTest, RejectsOutOfRange) {
  struct Case {
    RxAggSettings settings;
    const char* message;
  };
  RxAggSettings hold_33 = Hold(33);
  RxAggSettings hold_big = Hold(8192);
  RxAggSettings count;
  count.count_threshold = 256;
  RxAggSettings buffer_zero;
  buffer_zero.buffer_kib = 0;
  RxAggSettings buffer_big;
  buffer_big.buffer_kib = 21;
  RxAggSettings force_without_enable;
  force_without_enable.force_enable = true;
  for (const Case& c :
       {Case{hold_33, "nearest: 32us or 64us"}, Case{hold_big, "out of range 0..8160us"},
        Case{count, "countThreshold 256 is out of range 0..255"},
        Case{buffer_zero, "bufferKiB 0 is out of range 1..20"},
        Case{buffer_big, "bufferKiB 21 is out of range 1..20"},
        Case{force_without_enable, "forceEnable requires enable: true"}}) {
    absl::StatusOr<uint32_t> result = ApplyRxAggSettings(RxAggLayout::kV3, 0x80FF2014, c.settings);
    ASSERT_FALSE(result.ok()) << c.message;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.message));
    EXPECT_FALSE(ValidateRxAggSettings(c.settings).ok()) << c.message;
  }
}

TEST(ApplyRxAggSettingsTest, V1BufferMustBeAMultipleOf4KiB) {
  RxAggSettings settings;
  settings.buffer_kib = 18;
  EXPECT_TRUE(ValidateRxAggSettings(settings).ok());
  EXPECT_TRUE(ValidateRxAggSettingsForLayout(RxAggLayout::kV3, settings).ok());
  EXPECT_TRUE(ValidateRxAggSettingsForLayout(RxAggLayout::kV2, settings).ok());
  absl::Status v1 = ValidateRxAggSettingsForLayout(RxAggLayout::kV1, settings);
  EXPECT_EQ(v1.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v1.message()), HasSubstr("multiple of 4 KiB"));
  EXPECT_FALSE(ApplyRxAggSettings(RxAggLayout::kV1, 0x80002005, settings).ok());
  EXPECT_EQ(MustApply(RxAggLayout::kV3, 0x80FF2014, settings), 0x80FF2012u);
}

TEST(ApplyRxAggSettingsTest, DriverDisabledAggregationIsNotEnabled) {
  const uint32_t disabled = 0x00FF2014;
  for (const RxAggSettings& settings : {Hold(32), RxAggSettings{}, [] {
                                          RxAggSettings s;
                                          s.enable = true;
                                          return s;
                                        }()}) {
    absl::StatusOr<uint32_t> result = ApplyRxAggSettings(RxAggLayout::kV3, disabled, settings);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(result.status().message(),
              "RX aggregation is disabled by the driver; not enabling it (older drivers cannot "
              "split aggregated transfers); set forceEnable to override");
  }
  RxAggSettings forced = Hold(32);
  forced.enable = true;
  forced.force_enable = true;
  EXPECT_EQ(MustApply(RxAggLayout::kV3, disabled, forced), 0x80FF0114u);
}

TEST(EncodeRxAggTest, RoundTripsDecode) {
  const std::pair<RxAggLayout, uint32_t> cases[] = {
      {RxAggLayout::kV1, 0x80002005}, {RxAggLayout::kV1, 0x80000105},
      {RxAggLayout::kV1, 0x80000100},  // vendor small-packet mode: size field 0
      {RxAggLayout::kV3, 0xA0FF0114}, {RxAggLayout::kV2, 0x00FF2014},
  };
  for (const auto& [layout, word] : cases) {
    absl::StatusOr<uint32_t> encoded = EncodeRxAgg(layout, DecodeRxAgg(layout, word));
    ASSERT_TRUE(encoded.ok()) << encoded.status();
    EXPECT_EQ(*encoded, word);
  }
  RxAggFields bad = DecodeRxAgg(RxAggLayout::kV3, 0x80FF2014);
  bad.other_bits = 1;
  EXPECT_FALSE(EncodeRxAgg(RxAggLayout::kV3, bad).ok());
}

TEST(AsleepPatternTest, KnownPatterns) {
  EXPECT_TRUE(IsAsleepPattern(0xDEADBEEF));
  EXPECT_TRUE(IsAsleepPattern(0xEAEAEAEA));
  EXPECT_FALSE(IsAsleepPattern(0x80FF2014));
  EXPECT_FALSE(IsAsleepPattern(0));
  EXPECT_FALSE(IsAsleepPattern(0xFFFFFFFF));
}

}  // namespace
}  // namespace rxfleet::common
