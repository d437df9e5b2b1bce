#include "common/chips/chip_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/fixture_path.h"

namespace rxfleet::common {
namespace {

using ::testing::ElementsAre;

TEST(ChipTableTest, HasAllUpstreamIds) {
  EXPECT_EQ(AllChips().size(), 62u);
  std::set<std::pair<uint16_t, uint16_t>> ids;
  for (const ChipId& chip : AllChips()) ids.emplace(chip.vid, chip.pid);
  EXPECT_EQ(ids.size(), 62u) << "duplicate IDs in the generated table";
}

TEST(ChipTableTest, SpotChecks) {
  const ChipId* be = LookupChip(0x0bda, 0x8912);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->chip, "rtl8922au");
  EXPECT_EQ(be->layout, RxAggLayout::kV3);

  const ChipId* ax_v1 = LookupChip(0x0bda, 0xb851);
  ASSERT_NE(ax_v1, nullptr);
  EXPECT_EQ(ax_v1->chip, "rtl8851bu");
  EXPECT_EQ(ax_v1->layout, RxAggLayout::kV1);

  const ChipId* ax_v2 = LookupChip(0x0bda, 0xc832);
  ASSERT_NE(ax_v2, nullptr);
  EXPECT_EQ(ax_v2->chip, "rtl8852cu");
  EXPECT_EQ(ax_v2->layout, RxAggLayout::kV2);

  const ChipId* rtl8852au = LookupChip(0x2357, 0x0141);
  ASSERT_NE(rtl8852au, nullptr);
  EXPECT_EQ(rtl8852au->chip, "rtl8852au");
  EXPECT_EQ(rtl8852au->layout, RxAggLayout::kV1);
}

TEST(ChipTableTest, NonRtw89IdsAreAbsent) {
  EXPECT_EQ(LookupChip(0x0e8d, 0x7961), nullptr);  // MediaTek MT7921AU
  EXPECT_EQ(LookupChip(0x0bda, 0x1a2b), nullptr);  // Realtek storage mode
  EXPECT_EQ(LookupChip(0x2c4e, 0x0127), nullptr);  // pending upstream, excluded
}

TEST(ChipTableTest, StorageMode) {
  EXPECT_TRUE(IsRealtekStorageMode(0x0bda, 0x1a2b));
  EXPECT_FALSE(IsRealtekStorageMode(0x0bda, 0x8912));
  EXPECT_FALSE(IsRealtekStorageMode(0x0e8d, 0x1a2b));
}

// The generated table equals the TSV in the repository, row for row.
TEST(ChipTableTest, MatchesTheTsv) {
  std::istringstream tsv(
      testing::ReadFile(testing::SourceDir() + "/common/chips/rtw89-usb-devices.tsv"));
  std::string line;
  ASSERT_TRUE(std::getline(tsv, line));  // header
  size_t row = 0;
  while (std::getline(tsv, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string vid, pid, chip, layout;
    std::getline(fields, vid, '\t');
    std::getline(fields, pid, '\t');
    std::getline(fields, chip, '\t');
    std::getline(fields, layout, '\t');
    ASSERT_LT(row, AllChips().size());
    const ChipId& entry = AllChips()[row];
    EXPECT_EQ(FormatVidPid(entry.vid, entry.pid), vid + ":" + pid) << "row " << row;
    EXPECT_EQ(entry.chip, chip) << "row " << row;
    EXPECT_EQ(RxAggLayoutName(entry.layout), layout) << "row " << row;
    ++row;
  }
  EXPECT_EQ(row, AllChips().size());
}

TEST(ChipTableTest, ChipNamesAndLayouts) {
  EXPECT_THAT(KnownChipNames(),
              ElementsAre("rtl8851bu", "rtl8852au", "rtl8852bu", "rtl8852cu", "rtl8922au"));
  EXPECT_EQ(LayoutForChip("rtl8852bu"), RxAggLayout::kV1);
  EXPECT_EQ(LayoutForChip("rtl8852cu"), RxAggLayout::kV2);
  EXPECT_EQ(LayoutForChip("rtl8922au"), RxAggLayout::kV3);
  EXPECT_EQ(LayoutForChip("mt7921au"), std::nullopt);
}

TEST(ChipTableTest, LayoutNames) {
  EXPECT_EQ(RxAggLayoutName(RxAggLayout::kV1), "v1");
  EXPECT_EQ(RxAggLayoutName(RxAggLayout::kV2), "v2");
  EXPECT_EQ(RxAggLayoutName(RxAggLayout::kV3), "v3");
  EXPECT_EQ(*ParseRxAggLayout("v2"), RxAggLayout::kV2);
  EXPECT_FALSE(ParseRxAggLayout("v4").ok());
}

TEST(ChipTableTest, VidPid) {
  absl::StatusOr<VidPid> id = ParseVidPid("0BDA:8912");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->vid, 0x0bda);
  EXPECT_EQ(id->pid, 0x8912);
  EXPECT_EQ(FormatVidPid(0x0bda, 0x8912), "0bda:8912");
  EXPECT_EQ(FormatVidPid(0x0b05, 0x1cb6), "0b05:1cb6");
  for (const char* bad : {"0bda8912", "bda:8912", "0bda:89123", "0bdg:8912", "0bda-8912", ""}) {
    EXPECT_FALSE(ParseVidPid(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rxfleet::common
