#include "common/host_labels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

TEST(HostLabelsTest, ValidKeys) {
  EXPECT_TRUE(ValidateLabelKey("board").ok());
  EXPECT_TRUE(ValidateLabelKey("Board_1.x-y").ok());
  EXPECT_TRUE(ValidateLabelKey("rxfleet.io/arm").ok());
  EXPECT_TRUE(ValidateLabelKey(std::string(63, 'a')).ok());
}

TEST(HostLabelsTest, InvalidKeysNameTheRule) {
  EXPECT_THAT(std::string(ValidateLabelKey("").message()), HasSubstr("must not be empty"));
  EXPECT_THAT(std::string(ValidateLabelKey(std::string(64, 'a')).message()),
              HasSubstr("at most 63"));
  EXPECT_THAT(std::string(ValidateLabelKey("bo ard").message()), HasSubstr("'bo ard'"));
  EXPECT_THAT(std::string(ValidateLabelKey("-board").message()), HasSubstr("start and end"));
  EXPECT_THAT(std::string(ValidateLabelKey("Example.COM/x").message()), HasSubstr("prefix"));
  EXPECT_THAT(std::string(ValidateLabelKey("/x").message()), HasSubstr("prefix"));
  EXPECT_FALSE(ValidateLabelKey("a.io/").ok());
}

TEST(HostLabelsTest, Values) {
  EXPECT_TRUE(ValidateLabelValue("").ok());
  EXPECT_TRUE(ValidateLabelValue("pi1").ok());
  EXPECT_TRUE(ValidateLabelValue("arm64").ok());
  EXPECT_FALSE(ValidateLabelValue("a/b").ok());
  EXPECT_FALSE(ValidateLabelValue("x-").ok());
  EXPECT_FALSE(ValidateLabelValue(std::string(64, 'v')).ok());
}

TEST(HostLabelsTest, ParseLabelFlag) {
  absl::StatusOr<std::pair<std::string, std::string>> label = ParseLabelFlag("board=pi1");
  ASSERT_TRUE(label.ok()) << label.status();
  EXPECT_EQ(label->first, "board");
  EXPECT_EQ(label->second, "pi1");
  EXPECT_EQ(ParseLabelFlag("empty=")->second, "");
  EXPECT_THAT(std::string(ParseLabelFlag("board").status().message()), HasSubstr("key=value"));
  EXPECT_FALSE(ParseLabelFlag("=pi1").ok());
  EXPECT_FALSE(ParseLabelFlag("board=pi 1").ok());
}

}  // namespace
}  // namespace rxfleet::common
