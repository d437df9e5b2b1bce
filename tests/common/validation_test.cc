#include "common/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/policy/policy.h"

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ValidateHostIdTest, AcceptsDnsNamesInLowerCase) {
  for (const char* id : {"pi1", "lab-3.example", "a", "0"}) {
    EXPECT_TRUE(ValidateHostId(id).ok()) << id;
  }
  EXPECT_TRUE(ValidateHostId(std::string(63, 'a')).ok());
}

TEST(ValidateHostIdTest, NamesTheRuleBroken) {
  EXPECT_THAT(Message(ValidateHostId("")), HasSubstr("host id '' must be 1..63 characters"));
  EXPECT_THAT(Message(ValidateHostId(std::string(64, 'a'))), HasSubstr("must be 1..63"));
  EXPECT_THAT(Message(ValidateHostId("Pi1")),
              HasSubstr("may contain only lower-case letters, digits, '-' and '.'"));
  EXPECT_THAT(Message(ValidateHostId("pi 1")), HasSubstr("may contain only"));
  EXPECT_THAT(Message(ValidateHostId("-pi1")), HasSubstr("must start and end"));
  EXPECT_THAT(Message(ValidateHostId("pi1.")), HasSubstr("must start and end"));
  EXPECT_THAT(Message(ValidateHostId("a\nb")), HasSubstr("'a\\nb'"));
}

TEST(ValidateAdapterIdTest, AcceptsTheIdsAgentsMake) {
  for (const char* id : {"port-2-2", "port-1-1.3", "port-10-1.2.3.4.5.6", "h1/1-1.2"}) {
    EXPECT_TRUE(ValidateAdapterId(id).ok()) << id;
  }
  EXPECT_TRUE(ValidateAdapterId(std::string(128, 'p')).ok());
}

// The policy rule used to take any id without control characters, the agent-message rule
// only printable ASCII without spaces up to 128 characters. Ids are "port-<port path>", so
// the second rule is the true one: what the first one let through could never match.
TEST(ValidateAdapterIdTest, RefusesWhatOnlyTheOldPolicyRuleAccepted) {
  EXPECT_THAT(Message(ValidateAdapterId("port 2-2")),
              HasSubstr("adapter id 'port 2-2' must be printable ASCII without spaces"));
  EXPECT_THAT(Message(ValidateAdapterId("port-\xC3\xA9")), HasSubstr("printable ASCII"));
  EXPECT_THAT(Message(ValidateAdapterId(std::string(129, 'p'))),
              HasSubstr("must be 1..128 characters"));
}

TEST(ValidateAdapterIdTest, RefusesWhatBothOldRulesRefused) {
  EXPECT_THAT(Message(ValidateAdapterId("")), HasSubstr("adapter id '' must be 1..128"));
  EXPECT_THAT(Message(ValidateAdapterId("port-1\x01")), HasSubstr("'port-1\\x01'"));
  EXPECT_FALSE(ValidateAdapterId("port-1\x7f").ok());
}

TEST(CheckObjectNameTest, NamesAndExperimentNames) {
  EXPECT_TRUE(CheckObjectName("name", "lab-hold-32").ok());
  EXPECT_THAT(Message(CheckObjectName("arm name", "A")),
              HasSubstr("arm name 'A' may contain only lower-case letters, digits and '-'"));
  EXPECT_THAT(Message(CheckObjectName("name", "")), HasSubstr("must be 1..63 characters"));
  EXPECT_THAT(Message(ValidateExperimentName("hold.32")),
              HasSubstr("experiment name 'hold.32' may contain only"));
  EXPECT_THAT(Message(ValidateExperimentName("-x")), HasSubstr("must start and end"));
}

TEST(FindSelectorProblemTest, PointsAtTheItem) {
  Selector selector;
  EXPECT_FALSE(FindSelectorProblem(selector, "spec.selector").has_value());
  selector.chips = {"rtl8922au", "rtl9999"};
  auto p = FindSelectorProblem(selector, "spec.selector");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "spec.selector.chips[1]");
  EXPECT_THAT(p->message, HasSubstr("unknown chip 'rtl9999'"));

  selector = {};
  selector.adapters = {"port-2-2", "port 2"};
  p = FindSelectorProblem(selector, "spec.selector");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "spec.selector.adapters[1]");

  selector = {};
  selector.match_labels = {{"board", "not ok"}};
  p = FindSelectorProblem(selector, "spec.selector");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "spec.selector.matchLabels.board");

  selector = {};
  selector.usb_speeds = {UsbSpeed::kHigh, UsbSpeed::kUnknown};
  p = FindSelectorProblem(selector, "spec.selector");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "spec.selector.usbSpeeds[1]");
}

TEST(FindSelectorProblemTest, PolicyAndExperimentShareTheRule) {
  Policy policy;
  policy.name = "p";
  policy.settings.hold_us = 32;
  policy.selector.adapters = {"port 2-2"};
  EXPECT_THAT(Message(ValidatePolicy(policy)),
              HasSubstr("spec.selector.adapters[0]: adapter id 'port 2-2' must be printable"));
}

}  // namespace
}  // namespace rxfleet::common
