// Unit tests of rxfleetctl's small formatters: display width, table alignment, ages, YAML
// quoting, line diffs, adapter references and exit codes.
#include <sstream>

#include "cli/commands/command.h"
#include "cli/exit_code.h"
#include "cli/output/changes.h"
#include "cli/output/format.h"
#include "cli/output/structured.h"
#include "cli/output/table.h"
#include "gtest/gtest.h"

namespace rxfleet::cli {
namespace {

TEST(DisplayWidthTest, CountsCodePointsNotBytes) {
  EXPECT_EQ(DisplayWidth("32us"), 4u);
  EXPECT_EQ(DisplayWidth("32\xC2\xB5s"), 4u);  // "32µs" is 5 bytes
  EXPECT_EQ(DisplayWidth(""), 0u);
}

TEST(TableTest, AlignsByDisplayWidthWithoutTrailingSpaces) {
  Table table({"HOLD", "STATE", "NOTE"});
  table.AddRow({"32\xC2\xB5s/32\xC2\xB5s", "applied", ""});
  table.AddRow({"-/1024\xC2\xB5s", "drifted", "x"});
  std::ostringstream out;
  table.Print(out);
  EXPECT_EQ(out.str(),
            "HOLD        STATE     NOTE\n"
            "32\xC2\xB5s/32\xC2\xB5s   applied\n"
            "-/1024\xC2\xB5s    drifted   x\n");
}

TEST(FormatAgeTest, KubectlStyle) {
  const absl::Time now = absl::FromUnixSeconds(1000000);
  EXPECT_EQ(FormatAge(now - absl::Seconds(45), now), "45s");
  EXPECT_EQ(FormatAge(now - absl::Seconds(119), now), "119s");
  EXPECT_EQ(FormatAge(now - absl::Minutes(12), now), "12m");
  EXPECT_EQ(FormatAge(now - absl::Hours(5), now), "5h");
  EXPECT_EQ(FormatAge(now - absl::Hours(24 * 3), now), "3d");
  EXPECT_EQ(FormatAge(now + absl::Seconds(5), now), "0s");
  EXPECT_EQ(FormatAge(absl::InfinitePast(), now), "<unknown>");
}

TEST(FormatTimeWithAgeTest, PastTimesSayAgoFutureTimesSayIn) {
  const absl::Time now = absl::FromUnixSeconds(1796221355);  // 2026-12-02T14:22:35Z
  google::protobuf::Timestamp at;
  at.set_seconds(1796221355 + 26);
  EXPECT_EQ(FormatTimeWithAge(at, now), "2026-12-02T14:23:01Z (in 26s)");
  at.set_seconds(1796221355 + 3 * 60);
  EXPECT_EQ(FormatTimeWithAge(at, now), "2026-12-02T14:25:35Z (in 3m)");
  at.set_seconds(1796221355 - 5 * 60);
  EXPECT_EQ(FormatTimeWithAge(at, now), "2026-12-02T14:17:35Z (5m ago)");
  at.set_seconds(1796221355);
  EXPECT_EQ(FormatTimeWithAge(at, now), "2026-12-02T14:22:35Z (0s ago)");
  EXPECT_EQ(FormatTimeWithAge(google::protobuf::Timestamp(), now), "<none>");
}

TEST(FormatTest, SettingsAndSelectors) {
  v1::RxAggSettings settings;
  settings.set_hold_us(1024);
  settings.set_buffer_kib(16);
  settings.set_enable(false);
  EXPECT_EQ(FormatSettings(settings), "hold=1024\xC2\xB5s,buffer=16KiB,enable=false");
  EXPECT_EQ(FormatSettings(v1::RxAggSettings()), "<none>");
  v1::AdapterSelector selector;
  EXPECT_EQ(FormatSelector(selector), "<all>");
  (*selector.mutable_match_labels())["board"] = "pi1";
  selector.add_usb_speeds(v1::USB_SPEED_SUPER_PLUS);
  selector.add_chips("rtl8922au");
  EXPECT_EQ(FormatSelector(selector), "board=pi1,usb=super_plus,chip=rtl8922au");
  EXPECT_EQ(AdapterStateWord(v1::ADAPTER_STATE_DISABLED_BY_DRIVER), "disabled_by_driver");
  EXPECT_EQ(UsbSpeedWord(v1::USB_SPEED_UNSPECIFIED), "unknown");
  EXPECT_EQ(FormatVidPid(0x0bda, 0x8912), "0bda:8912");
}

TEST(ProvenanceTest, NamesTheLayer) {
  v1::Provenance p;
  p.set_source(v1::SETTING_SOURCE_SERVER_POLICY);
  p.set_name("usb3-short");
  p.set_priority(100);
  p.set_bundle_version(7);
  EXPECT_EQ(ProvenanceShort(p), "usb3-short");
  EXPECT_EQ(ProvenanceLong(p), "server policy usb3-short (priority 100, bundle 7)");
  p.set_source(v1::SETTING_SOURCE_EXPERIMENT);
  p.set_arm("short");
  EXPECT_EQ(ProvenanceShort(p), "experiment:usb3-short/short");
  v1::Provenance builtin;
  builtin.set_source(v1::SETTING_SOURCE_BUILT_IN_DEFAULT);
  EXPECT_EQ(ProvenanceLong(builtin), "built-in default");
}

TEST(JsonToYamlTest, QuotesStringsThatWouldChangeType) {
  auto yaml = JsonToYaml(
      R"({"resourceVersion": "7", "name": "pi1", "flag": "true", "empty": "", "port": "2-2",)"
      R"( "holdUs": 32, "enable": true, "list": [], "map": {}})");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml,
            "resourceVersion: \"7\"\nname: pi1\nflag: \"true\"\nempty: \"\"\nport: \"2-2\"\n"
            "holdUs: 32\nenable: true\nlist: []\nmap: {}\n");
  EXPECT_FALSE(JsonToYaml("{not json").ok());
}

TEST(OutputFormatTest, ParsesKnownNames) {
  EXPECT_EQ(*ParseOutputFormat("wide"), OutputFormat::kWide);
  auto bad = ParseOutputFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("table, wide, json, yaml, name"), absl::string_view::npos);
}

TEST(LineDiffTest, MarksRemovedAndAddedLines) {
  EXPECT_EQ(LineDiff("a\nb\nc\n", "a\nB\nc\nd\n"), "  a\n- b\n+ B\n  c\n+ d\n");
  EXPECT_EQ(LineDiff("", "x\n"), "+ x\n");
  EXPECT_EQ(LineDiff("same\n", "same\n"), "  same\n");
}

TEST(SettingsChangeTest, ListsOnlyChangedFields) {
  v1::RxAggSettings before, after;
  before.set_hold_us(1024);
  after.set_hold_us(32);
  after.set_enable(true);
  EXPECT_EQ(DescribeSettingsChange(before, after),
            "hold_us 1024\xC2\xB5s -> 32\xC2\xB5s, enable <unset> -> true");
  EXPECT_EQ(DescribeSettingsChange(before, before), "");
}

TEST(AdapterRefTest, RequiresHostAndAdapter) {
  auto ref = ParseAdapterRef("pi1/port-2-2");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->first, "pi1");
  EXPECT_EQ(ref->second, "port-2-2");
  for (const char* bad : {"port-2-2", "/port-2-2", "pi1/", "a/b/c", "Pi1/port-2-2", "pi1/port 2"}) {
    EXPECT_EQ(ParseAdapterRef(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ExitCodeTest, MapsStatusCodesOnce) {
  EXPECT_EQ(ExitCodeForStatus(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeForStatus(absl::InvalidArgumentError("x")), 1);
  EXPECT_EQ(ExitCodeForStatus(absl::UnavailableError("x")), 1);
  EXPECT_EQ(ExitCodeForStatus(absl::DeadlineExceededError("x")), 1);
  EXPECT_EQ(ExitCodeForStatus(absl::NotFoundError("x")), 3);
  EXPECT_EQ(ExitCodeForStatus(absl::AbortedError("x")), 4);
  EXPECT_EQ(ExitCodeForStatus(absl::AlreadyExistsError("x")), 4);
  EXPECT_EQ(ExitCodeForStatus(absl::CancelledError("x")), 130);
}

}  // namespace
}  // namespace rxfleet::cli
