#include "common/units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const absl::StatusOr<uint32_t>& result) {
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(result.status().message());
}

TEST(ParseHoldUsTest, AcceptsUnitsAndPlainIntegers) {
  EXPECT_EQ(*ParseHoldUs("32us"), 32u);
  EXPECT_EQ(*ParseHoldUs("32µs"), 32u);
  EXPECT_EQ(*ParseHoldUs("1024us"), 1024u);
  EXPECT_EQ(*ParseHoldUs("1024"), 1024u);
  EXPECT_EQ(*ParseHoldUs(" 64 us "), 64u);
  EXPECT_EQ(*ParseHoldUs("0"), 0u);
  EXPECT_EQ(*ParseHoldUs("8160us"), 8160u);
  EXPECT_EQ(*ParseHoldUs("0.992ms"), 992u);
  EXPECT_EQ(*ParseHoldUs("8.16ms"), 8160u);
}

TEST(ParseHoldUsTest, NonMultipleNamesNearestValues) {
  EXPECT_EQ(ErrorOf(ParseHoldUs("33us")),
            "hold 33us must be a multiple of 32 µs (nearest: 32us or 64us)");
  // 1 ms is 1000 µs, not a multiple of 32 µs.
  EXPECT_THAT(ErrorOf(ParseHoldUs("1ms")), HasSubstr("nearest: 992us or 1024us"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("8170")), HasSubstr("hold 8170us is out of range 0..8160us"));
}

TEST(ParseHoldUsTest, RejectsOutOfRangeAndGarbage) {
  EXPECT_THAT(ErrorOf(ParseHoldUs("8192us")), HasSubstr("out of range 0..8160us"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("-32us")), HasSubstr("not a duration"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("32s")), HasSubstr("not a duration"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("")), HasSubstr("not a duration"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("us")), HasSubstr("not a duration"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("1.2345ms")), HasSubstr("not a duration"));
  EXPECT_THAT(ErrorOf(ParseHoldUs("99999999999999999999")), HasSubstr("not a duration"));
}

TEST(FormatHoldTest, TableAndYamlForms) {
  EXPECT_EQ(FormatHoldUs(32), "32µs");
  EXPECT_EQ(FormatHoldUs(1024), "1024µs");
  EXPECT_EQ(FormatHoldYaml(32), "32us");
  EXPECT_EQ(*ParseHoldUs(FormatHoldYaml(4096)), 4096u);
  EXPECT_EQ(*ParseHoldUs(FormatHoldUs(4096)), 4096u);
}

TEST(ParseKiBTest, AcceptsSuffixAndPlain) {
  EXPECT_EQ(*ParseKiB("20KiB"), 20u);
  EXPECT_EQ(*ParseKiB("20 KiB"), 20u);
  EXPECT_EQ(*ParseKiB("20"), 20u);
  EXPECT_THAT(ErrorOf(ParseKiB("20MiB")), HasSubstr("'20MiB'"));
  EXPECT_THAT(ErrorOf(ParseKiB("KiB")), HasSubstr("not a size"));
  EXPECT_THAT(ErrorOf(ParseKiB("-1")), HasSubstr("not a size"));
}

}  // namespace
}  // namespace rxfleet::common
