#include "common/policy/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/policy/selectors.h"
#include "tests/common/fixture_path.h"

namespace rxfleet::common {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::PolicyFixture;
using testing::ReadFile;
using ::testing::StartsWith;

// A minimal valid document with `settings_yaml` (indented 4) and optional extra spec lines.
std::string Doc(const std::string& name, const std::string& settings_yaml,
                const std::string& spec_extra = "") {
  return "apiVersion: rxfleet/v1\nkind: RxAggPolicy\nmetadata:\n  name: " + name + "\nspec:\n" +
         spec_extra + "  settings:\n" + settings_yaml;
}

std::vector<Policy> MustParse(const std::string& text, const std::string& source = "t.yaml") {
  absl::StatusOr<std::vector<Policy>> policies = ParsePolicyDocuments(text, source);
  EXPECT_TRUE(policies.ok()) << policies.status();
  return policies.ok() ? *policies : std::vector<Policy>{};
}

std::string ParseError(const std::string& text, const std::string& source = "t.yaml") {
  absl::StatusOr<std::vector<Policy>> policies = ParsePolicyDocuments(text, source);
  EXPECT_FALSE(policies.ok()) << "parsed unexpectedly:\n" << text;
  if (policies.ok()) return "";
  EXPECT_EQ(policies.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(policies.status().message());
}

std::string FixtureError(const std::string& file) {
  return ParseError(ReadFile(PolicyFixture(file)), file);
}

TEST(ParsePolicyTest, ValidMultiDocument) {
  const std::vector<Policy> policies =
      MustParse(ReadFile(PolicyFixture("valid-multi.yaml")), "valid-multi.yaml");
  ASSERT_EQ(policies.size(), 2u);

  const Policy& pi = policies[0];
  EXPECT_EQ(pi.name, "pi1-long-hold");
  EXPECT_EQ(pi.labels, (std::map<std::string, std::string>{{"team", "edge"}}));
  EXPECT_EQ(pi.priority, 100);
  EXPECT_EQ(pi.selector.match_labels, (std::map<std::string, std::string>{{"board", "pi1"}}));
  EXPECT_THAT(pi.selector.usb_speeds, ElementsAre(UsbSpeed::kHigh));
  EXPECT_THAT(pi.selector.chips, ElementsAre("rtl8922au"));
  ASSERT_EQ(pi.selector.vid_pids.size(), 1u);
  EXPECT_EQ(pi.selector.vid_pids[0], (VidPid{0x0bda, 0x8912}));
  EXPECT_TRUE(pi.selector.adapters.empty());
  EXPECT_EQ(pi.settings.hold_us, 1024u);
  EXPECT_EQ(pi.settings.count_threshold, 255u);
  EXPECT_EQ(pi.settings.buffer_kib, 20u);
  EXPECT_EQ(pi.settings.enable, true);
  EXPECT_FALSE(pi.settings.force_enable);
  EXPECT_EQ(pi.source, "valid-multi.yaml:2");

  const Policy& usb3 = policies[1];
  EXPECT_EQ(usb3.name, "usb3-short-hold");
  EXPECT_EQ(usb3.priority, 0);
  EXPECT_THAT(usb3.selector.usb_speeds, ElementsAre(UsbSpeed::kSuper, UsbSpeed::kSuperPlus));
  EXPECT_EQ(usb3.settings.hold_us, 32u);
  EXPECT_EQ(usb3.settings.count_threshold, std::nullopt);
  EXPECT_EQ(usb3.source, "valid-multi.yaml:21");
  for (const Policy& policy : policies) EXPECT_TRUE(ValidatePolicy(policy).ok());
}

TEST(ParsePolicyTest, Json) {
  const std::vector<Policy> policies = MustParse(ReadFile(PolicyFixture("valid.json")));
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_EQ(policies[0].name, "json-policy");
  EXPECT_EQ(policies[0].priority, -5);
  EXPECT_EQ(policies[0].settings.hold_us, 64u);
  EXPECT_EQ(policies[0].settings.buffer_kib, 18u);
}

TEST(ParsePolicyTest, UnknownFieldIsNamedWithPosition) {
  EXPECT_EQ(FixtureError("unknown-field.yaml"),
            "unknown-field.yaml:8:5: spec.settings: unknown field 'holdMs' (allowed: hold, "
            "holdUs, countThreshold, bufferKiB, enable, forceEnable)");
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  prio: 1\n")),
              StartsWith("t.yaml:6:3: spec: unknown field 'prio'"));
  EXPECT_THAT(ParseError("apiVersion: rxfleet/v1\nkind: RxAggPolicy\nmetadata: {name: a, "
                         "annotations: {}}\nspec: {settings: {hold: 32us}}\n"),
              HasSubstr("t.yaml:3:21: metadata: unknown field 'annotations'"));
}

TEST(ParsePolicyTest, FamiliesSelectChipFamilies) {
  const std::vector<Policy> p =
      MustParse(Doc("rtw89-only", "    hold: 32us\n", "  selector:\n    families: [rtw89]\n"));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].selector.families, std::vector<std::string>{"rtw89"});
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector:\n    families: [ath9k]\n")),
              HasSubstr("unknown chip family 'ath9k' (expected rtw89, rtw88 or mt76)"));
  AdapterAttributes mt76;
  mt76.family = "mt76";
  EXPECT_FALSE(Matches(p[0].selector, mt76));
  mt76.family = "rtw89";
  EXPECT_TRUE(Matches(p[0].selector, mt76));
}

TEST(ParsePolicyTest, WrongKindAndApiVersion) {
  EXPECT_EQ(FixtureError("wrong-kind.yaml"),
            "wrong-kind.yaml:2:7: kind: unsupported kind 'RxAggregationPolicy' (expected "
            "'RxAggPolicy')");
  EXPECT_THAT(ParseError("apiVersion: rxfleet/v2\nkind: RxAggPolicy\n"),
              HasSubstr("t.yaml:1:13: apiVersion: unsupported apiVersion 'rxfleet/v2'"));
  EXPECT_THAT(ParseError("kind: RxAggPolicy\n"), HasSubstr("missing required field 'apiVersion'"));
  // Another kind of document is named by its kind, not by its first unfamiliar field.
  EXPECT_THAT(ParseError("apiVersion: v1\nkind: ConfigMap\ndata: {}\n"),
              HasSubstr("t.yaml:1:13: apiVersion: unsupported apiVersion 'v1'"));
}

TEST(ParsePolicyTest, DuplicateName) {
  EXPECT_EQ(FixtureError("duplicate-name.yaml"),
            "duplicate-name.yaml:12:9: metadata.name: duplicate policy name 'twice' (first "
            "defined at duplicate-name.yaml:1)");
}

TEST(ParsePolicyTest, HoldOutOfRange) {
  EXPECT_EQ(FixtureError("hold-out-of-range.yaml"),
            "hold-out-of-range.yaml:7:11: spec.settings.hold: hold 9600us is out of range "
            "0..8160us (the register field holds 255 units of 32 µs)");
  EXPECT_THAT(ParseError(Doc("x", "    holdUs: 8192\n")),
              HasSubstr("spec.settings.holdUs: hold 8192us is out of range"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 33us\n")),
              HasSubstr("t.yaml:7:11: spec.settings.hold: hold 33us must be a multiple of 32 µs "
                        "(nearest: 32us or 64us)"));
}

TEST(ParsePolicyTest, MalformedYamlHasLine) {
  EXPECT_THAT(FixtureError("malformed.yaml"), StartsWith("malformed.yaml:7:1: malformed YAML: "));
  EXPECT_THAT(ParseError("a: [1, 2\nb: c\n"), StartsWith("t.yaml:"));
}

TEST(ParsePolicyTest, SettingsRules) {
  EXPECT_THAT(ParseError(Doc("x", "    {}\n")),
              HasSubstr("spec.settings must set at least one of"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n    holdUs: 32\n")),
              HasSubstr("set either 'hold' or 'holdUs', not both"));
  EXPECT_THAT(ParseError(Doc("x", "    countThreshold: 300\n")),
              HasSubstr("countThreshold 300 is out of range 0..255"));
  EXPECT_THAT(ParseError(Doc("x", "    bufferKiB: 21\n")),
              HasSubstr("bufferKiB 21 is out of range 1..20"));
  EXPECT_THAT(ParseError(Doc("x", "    enable: yes-please\n")),
              HasSubstr("spec.settings.enable: must be true or false, found 'yes-please'"));
  EXPECT_THAT(ParseError(Doc("x", "    forceEnable: true\n")),
              HasSubstr("forceEnable requires enable: true"));
  EXPECT_THAT(ParseError(Doc("x", "    countThreshold: [1]\n")),
              HasSubstr("must be an integer, found a list"));
  // v1 chips count the buffer in 4 KiB: 18 KiB is refused unless the selector excludes them.
  EXPECT_THAT(ParseError(Doc("x", "    bufferKiB: 18\n")),
              HasSubstr("not a multiple of 4 KiB, the buffer unit of RX aggregation layout v1"));
  EXPECT_EQ(MustParse(Doc("x", "    bufferKiB: 18\n", "  selector: {chips: [rtl8922au]}\n")).size(),
            1u);
  EXPECT_THAT(
      ParseError(Doc("x", "    bufferKiB: 18\n", "  selector: {vidPids: [\"0bda:b851\"]}\n")),
      HasSubstr("layout v1"));
  const std::vector<Policy> forced =
      MustParse(Doc("x", "    enable: true\n    forceEnable: true\n"));
  ASSERT_EQ(forced.size(), 1u);
  EXPECT_TRUE(forced[0].settings.force_enable);
}

TEST(ParsePolicyTest, SelectorRules) {
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector: {chips: [rtl8812au]}\n")),
              HasSubstr("spec.selector.chips: unknown chip 'rtl8812au' (known chips: rtl8851bu, "
                        "rtl8852au, rtl8852bu, rtl8852cu, rtl8922au)"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector: {usbSpeeds: [warp]}\n")),
              HasSubstr("spec.selector.usbSpeeds: unknown USB speed 'warp'"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector: {usbSpeeds: [unknown]}\n")),
              HasSubstr("cannot be selected"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector: {vidPids: [\"0bda-8912\"]}\n")),
              HasSubstr("spec.selector.vidPids: '0bda-8912' is not a USB ID"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector: {matchLabels: {\"a b\": c}}\n")),
              HasSubstr("spec.selector.matchLabels: label key 'a b'"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  selector: {adapters: [\"\"]}\n")),
              HasSubstr("adapter id '' must be 1..128 characters"));
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n", "  priority: 1001\n")),
              HasSubstr("t.yaml:6:13: spec.priority: priority 1001 is out of range -1000..1000"));
}

TEST(ParsePolicyTest, NameRules) {
  EXPECT_THAT(ParseError(Doc("Pi1", "    hold: 32us\n")),
              HasSubstr("t.yaml:4:9: metadata.name: name 'Pi1' may contain only"));
  EXPECT_THAT(ParseError(Doc("-pi", "    hold: 32us\n")), HasSubstr("start and end"));
  EXPECT_THAT(ParseError(Doc(std::string(64, 'a'), "    hold: 32us\n")), HasSubstr("1..63"));
  EXPECT_THAT(ParseError(Doc("builtin-default", "    hold: 32us\n")), HasSubstr("reserved"));
  EXPECT_THAT(ParseError("apiVersion: rxfleet/v1\nkind: RxAggPolicy\nmetadata: {}\nspec: {}\n"),
              HasSubstr("metadata: missing required field 'name'"));
}

TEST(ParsePolicyTest, DuplicateKeysAndShapes) {
  EXPECT_THAT(ParseError(Doc("x", "    hold: 32us\n    hold: 64us\n")),
              HasSubstr("t.yaml:8:5: spec.settings: duplicate field 'hold'"));
  EXPECT_THAT(ParseError("- a\n- b\n"), HasSubstr("document: must be a map, found a list"));
}

TEST(ParsePolicyTest, EmptyAndLimits) {
  EXPECT_TRUE(MustParse("").empty());
  EXPECT_TRUE(MustParse("# only a comment\n---\n").empty());
  const std::string big(kMaxPolicyInputBytes + 1, ' ');
  EXPECT_THAT(ParseError(big), HasSubstr("exceeds the 1 MiB policy input limit"));
  std::string many;
  for (size_t i = 0; i <= kMaxPolicyDocuments; ++i) many += "--- {}\n";
  EXPECT_THAT(ParseError(many), HasSubstr("documents exceed the limit of 1000"));
}

TEST(ValidatePolicyTest, SameRulesAsParser) {
  Policy policy;
  policy.name = "from-server";
  policy.source = "server";
  policy.settings.hold_us = 32;
  EXPECT_TRUE(ValidatePolicy(policy).ok());

  Policy bad = policy;
  bad.settings = {};
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()),
              HasSubstr("policy 'from-server': spec.settings must set at least one of"));
  bad = policy;
  bad.settings.hold_us = 33;
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()), HasSubstr("multiple of 32"));
  bad = policy;
  bad.name = "Bad_Name";
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()), HasSubstr("metadata.name"));
  bad = policy;
  bad.priority = -1001;
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()), HasSubstr("spec.priority"));
  bad = policy;
  bad.selector.chips = {"rtl9999"};
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()), HasSubstr("unknown chip"));
  bad = policy;
  bad.selector.usb_speeds = {UsbSpeed::kUnknown};
  EXPECT_FALSE(ValidatePolicy(bad).ok());
  bad = policy;
  bad.labels = {{"ok", "not ok"}};
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()), HasSubstr("metadata.labels"));
  bad = policy;
  bad.settings.buffer_kib = 10;
  EXPECT_THAT(std::string(ValidatePolicy(bad).message()), HasSubstr("layout v1"));
}

TEST(PolicyToYamlTest, RoundTrips) {
  for (const std::string file : {"valid-multi.yaml", "valid.json"}) {
    for (const Policy& policy : MustParse(ReadFile(PolicyFixture(file)))) {
      const std::string yaml = PolicyToYaml(policy);
      const std::vector<Policy> again = MustParse(yaml);
      ASSERT_EQ(again.size(), 1u) << yaml;
      Policy expected = policy;
      expected.source = again[0].source;
      EXPECT_EQ(again[0], expected) << yaml;
    }
  }
  Policy full;
  full.name = "full";
  full.labels = {{"rxfleet.io/experiment", "hold-ab"}, {"n", "123"}, {"t", "true"}};
  full.priority = -7;
  full.selector.match_labels = {{"board", "pi5"}};
  full.selector.usb_speeds = {UsbSpeed::kHigh, UsbSpeed::kSuperPlus};
  full.selector.chips = {"rtl8852cu"};
  full.selector.vid_pids = {{0x0bda, 0xc832}};
  full.selector.adapters = {"h1/1-1.2", "no"};
  full.settings = {
      .hold_us = 0, .count_threshold = 0, .buffer_kib = 1, .enable = true, .force_enable = true};
  full.resource_version = "42";
  ASSERT_TRUE(ValidatePolicy(full).ok()) << ValidatePolicy(full);
  const std::string yaml = PolicyToYaml(full);
  const std::vector<Policy> again = MustParse(yaml);
  ASSERT_EQ(again.size(), 1u) << yaml;
  full.source = again[0].source;
  EXPECT_EQ(again[0], full) << yaml;
  EXPECT_THAT(yaml, HasSubstr("hold: 0us"));
}

class LoadPolicyFilesTest : public ::testing::Test {
 protected:
  std::string Fixture(const std::string& name) { return PolicyFixture(name); }
};

TEST_F(LoadPolicyFilesTest, DirectoryInSortedOrderSkippingOtherFiles) {
  absl::StatusOr<std::vector<Policy>> policies = LoadPolicyFiles({Fixture("dir")});
  ASSERT_TRUE(policies.ok()) << policies.status();
  ASSERT_EQ(policies->size(), 2u);
  EXPECT_EQ((*policies)[0].name, "base-count");
  EXPECT_EQ((*policies)[1].name, "pi-long-hold");
  EXPECT_THAT((*policies)[1].source, HasSubstr("20-pi.yml:1"));
}

TEST_F(LoadPolicyFilesTest, FilesAndDirectoriesTogether) {
  absl::StatusOr<std::vector<Policy>> policies =
      LoadPolicyFiles({Fixture("valid-multi.yaml"), Fixture("dir"), Fixture("valid.json")});
  ASSERT_TRUE(policies.ok()) << policies.status();
  EXPECT_EQ(policies->size(), 5u);
}

TEST_F(LoadPolicyFilesTest, OneBadFileFailsTheWholeLoad) {
  absl::StatusOr<std::vector<Policy>> policies = LoadPolicyFiles({Fixture("bad-dir")});
  ASSERT_FALSE(policies.ok());
  EXPECT_THAT(std::string(policies.status().message()),
              HasSubstr("20-bad.yaml:2:7: kind: unsupported kind"));
}

TEST_F(LoadPolicyFilesTest, DuplicateNamesAcrossFiles) {
  absl::StatusOr<std::vector<Policy>> policies =
      LoadPolicyFiles({Fixture("dir"), Fixture("dir/10-base.yaml")});
  ASSERT_FALSE(policies.ok());
  EXPECT_THAT(std::string(policies.status().message()),
              HasSubstr("duplicate policy name 'base-count'"));
}

TEST_F(LoadPolicyFilesTest, MissingDirectoryIsEmptyMissingFileIsNotFound) {
  absl::StatusOr<std::vector<Policy>> empty = LoadPolicyFiles({Fixture("no-such-dir")});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  absl::StatusOr<std::vector<Policy>> missing = LoadPolicyFiles({Fixture("no-such.yaml")});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rxfleet::common
