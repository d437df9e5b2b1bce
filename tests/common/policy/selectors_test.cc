#include "common/policy/selectors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

AdapterAttributes Pi1Adapter() {
  AdapterAttributes a;
  a.adapter_id = "pi1/1-1.2";
  a.chip = "rtl8922au";
  a.vid = 0x0bda;
  a.pid = 0x8912;
  a.usb_speed = UsbSpeed::kHigh;
  a.host_labels = {{"board", "pi1"}, {"arch", "armv6"}};
  a.host = "pi1";
  return a;
}

TEST(SelectorMatchesTest, EmptySelectsEverything) {
  EXPECT_TRUE(Matches(Selector{}, Pi1Adapter()));
  EXPECT_TRUE(Matches(Selector{}, AdapterAttributes{}));
}

TEST(SelectorMatchesTest, EachTerm) {
  const AdapterAttributes a = Pi1Adapter();
  Selector s;
  s.match_labels = {{"board", "pi1"}};
  EXPECT_TRUE(Matches(s, a));
  s.match_labels = {{"board", "pi1"}, {"arch", "arm64"}};
  EXPECT_FALSE(Matches(s, a));
  s = {};
  s.usb_speeds = {UsbSpeed::kSuper, UsbSpeed::kHigh};
  EXPECT_TRUE(Matches(s, a));
  s.usb_speeds = {UsbSpeed::kSuper};
  EXPECT_FALSE(Matches(s, a));
  s = {};
  s.chips = {"rtl8852cu"};
  EXPECT_FALSE(Matches(s, a));
  s.chips.push_back("rtl8922au");
  EXPECT_TRUE(Matches(s, a));
  s = {};
  s.vid_pids = {{0x0bda, 0x8912}};
  EXPECT_TRUE(Matches(s, a));
  s.vid_pids = {{0x0bda, 0x8913}};
  EXPECT_FALSE(Matches(s, a));
  s = {};
  s.adapters = {"pi1/1-1.2"};
  EXPECT_TRUE(Matches(s, a));
  s.adapters = {"pi2/1-1.2"};
  EXPECT_FALSE(Matches(s, a));
}

TEST(SelectorMatchesTest, AllTermsMustMatch) {
  Selector s;
  s.match_labels = {{"board", "pi1"}};
  s.usb_speeds = {UsbSpeed::kHigh};
  s.chips = {"rtl8922au"};
  EXPECT_TRUE(Matches(s, Pi1Adapter()));
  AdapterAttributes usb3 = Pi1Adapter();
  usb3.usb_speed = UsbSpeed::kSuper;
  EXPECT_FALSE(Matches(s, usb3));
}

TEST(LabelSelectorTest, ParseAndMatch) {
  const std::map<std::string, std::string> labels = {{"board", "pi1"}, {"arch", "arm64"}};
  auto matches = [&](const std::string& text) {
    absl::StatusOr<LabelSelector> selector = ParseLabelSelector(text);
    EXPECT_TRUE(selector.ok()) << text << ": " << selector.status();
    return selector.ok() && selector->Matches(labels);
  };
  EXPECT_TRUE(matches(""));
  EXPECT_TRUE(matches("board=pi1,arch=arm64"));
  EXPECT_TRUE(matches(" board == pi1 "));
  EXPECT_FALSE(matches("board=pi5"));
  EXPECT_TRUE(matches("board!=pi5"));
  EXPECT_FALSE(matches("board!=pi1"));
  EXPECT_TRUE(matches("team!=edge"));
  EXPECT_TRUE(matches("board"));
  EXPECT_FALSE(matches("team"));
  EXPECT_TRUE(matches("!team"));
  EXPECT_FALSE(matches("!board"));
  EXPECT_FALSE(matches("board=pi1,team"));
}

TEST(LabelSelectorTest, Errors) {
  EXPECT_THAT(std::string(ParseLabelSelector("board=pi1,,arch=x").status().message()),
              HasSubstr("empty term"));
  EXPECT_THAT(std::string(ParseLabelSelector("bo ard=pi1").status().message()),
              HasSubstr("label selector term 'bo ard=pi1'"));
  EXPECT_FALSE(ParseLabelSelector("board=pi 1").ok());
  EXPECT_FALSE(ParseLabelSelector("=pi1").ok());
}

TEST(FieldSelectorTest, ParseAndMatch) {
  const AdapterAttributes a = Pi1Adapter();
  auto matches = [&](const std::string& text) {
    absl::StatusOr<FieldSelector> selector = ParseFieldSelector(text);
    EXPECT_TRUE(selector.ok()) << text << ": " << selector.status();
    return selector.ok() && selector->Matches(a);
  };
  EXPECT_TRUE(matches(""));
  EXPECT_TRUE(matches("usb_speed=high,chip=rtl8922au,vid_pid=0bda:8912,host=pi1"));
  EXPECT_TRUE(matches("vid_pid=0BDA:8912"));
  EXPECT_TRUE(matches("chip=RTL8922AU"));
  EXPECT_FALSE(matches("usb_speed=super"));
  EXPECT_TRUE(matches("usb_speed!=super"));
  EXPECT_FALSE(matches("host=h1"));
  EXPECT_TRUE(matches("adapter=pi1/1-1.2"));
  EXPECT_FALSE(matches("adapter!=pi1/1-1.2"));
  EXPECT_FALSE(matches("usb_speed=high,host=h1"));
}

TEST(FieldSelectorTest, Errors) {
  EXPECT_THAT(std::string(ParseFieldSelector("speed=high").status().message()),
              HasSubstr("unknown field 'speed'"));
  EXPECT_THAT(std::string(ParseFieldSelector("usb_speed=warp").status().message()),
              HasSubstr("unknown USB speed 'warp'"));
  EXPECT_THAT(std::string(ParseFieldSelector("vid_pid=0bda").status().message()),
              HasSubstr("not a USB ID"));
  EXPECT_THAT(std::string(ParseFieldSelector("host").status().message()), HasSubstr("field=value"));
  EXPECT_THAT(std::string(ParseFieldSelector("host=").status().message()),
              HasSubstr("must not be empty"));
}

}  // namespace
}  // namespace rxfleet::common
