// Chip families as data: the generated rtw88/mt76 tables, their protocols and write permission,
// and the decoding of register words recorded in the fact sheet (data/usb-rx-agg-rtw88-mt76.md).

#include "common/chips/family.h"

#include <set>

#include "common/chips/chip_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::common {
namespace {

using ::testing::ElementsAre;

uint32_t Field(const std::vector<FieldValue>& fields, std::string_view name) {
  for (const FieldValue& f : fields) {
    if (f.name == name) return f.value;
  }
  ADD_FAILURE() << "no field " << name;
  return 0xDEAD;
}

const DriverLayout& LayoutOf(uint16_t vid, uint16_t pid) {
  const ObservedChip* chip = LookupObservedChip(vid, pid);
  EXPECT_NE(chip, nullptr);
  return *chip->layout;
}

TEST(FamilyTest, TablesHoldEveryUniqueIdOfTheTsvs) {
  // 134 rows / 133 unique (13b1:0043 twice) and 51 rows / 50 unique (7392:b711 twice).
  EXPECT_EQ(ObservedChips(ChipFamily::kRtw88).size(), 133u);
  EXPECT_EQ(ObservedChips(ChipFamily::kMt76).size(), 50u);
  EXPECT_TRUE(ObservedChips(ChipFamily::kRtw89).empty());
  std::set<std::pair<uint16_t, uint16_t>> ids;
  for (ChipFamily f : {ChipFamily::kRtw88, ChipFamily::kMt76}) {
    for (const ObservedChip* c : ObservedChips(f)) {
      EXPECT_TRUE(ids.insert({c->vid, c->pid}).second);
      EXPECT_EQ(LookupChip(c->vid, c->pid), nullptr) << "an id in two families";
    }
  }
  // The first row of a duplicated id wins: rtw8822bu.c:46 before rtw8822cu.c:22.
  EXPECT_EQ(LookupObservedChip(0x13b1, 0x0043)->layout->driver, "rtw_8822bu");
  EXPECT_EQ(LookupObservedChip(0x7392, 0xb711)->layout->driver, "mt76x0u");
}

TEST(FamilyTest, KnownIdsResolveToTheirDriverLayouts) {
  const ObservedChip* b812 = LookupObservedChip(0x0bda, 0xb812);
  ASSERT_NE(b812, nullptr);
  EXPECT_EQ(b812->names, "RTL8822BU/RTL8812BU");
  EXPECT_EQ(b812->layout->driver, "rtw_8822bu");
  EXPECT_EQ(b812->layout->family, ChipFamily::kRtw88);
  const ObservedChip* mt7921 = LookupObservedChip(0x0e8d, 0x7961);
  ASSERT_NE(mt7921, nullptr);
  EXPECT_EQ(mt7921->layout->driver, "mt7921u");
  EXPECT_EQ(mt7921->layout->family, ChipFamily::kMt76);
  EXPECT_EQ(LookupObservedChip(0x0bda, 0x8912), nullptr);  // rtw89
}

TEST(FamilyTest, OnlyRtw89IsWritable) {
  EXPECT_TRUE(Rtw89Protocol().writable);
  EXPECT_TRUE(FamilyManaged(ChipFamily::kRtw89));
  EXPECT_FALSE(FamilyManaged(ChipFamily::kRtw88));
  EXPECT_FALSE(FamilyManaged(ChipFamily::kMt76));
  for (ChipFamily f : {ChipFamily::kRtw88, ChipFamily::kMt76}) {
    for (const ObservedChip* c : ObservedChips(f)) {
      EXPECT_FALSE(c->layout->protocol.writable) << c->layout->driver;
    }
  }
}

TEST(FamilyTest, ProtocolsMatchTheDriverCode) {
  const RegisterProtocol& rtw88 = LayoutOf(0x0bda, 0xb812).protocol;
  EXPECT_EQ(rtw88.read_request, 0x05);
  EXPECT_EQ(rtw88.read_request_type, 0xC0);
  EXPECT_EQ(EncodeAddress(rtw88.encoding, 0x0280), (WireAddress{0x0280, 0}));
  const RegisterProtocol& x0u = LayoutOf(0x148f, 0x7610).protocol;
  EXPECT_EQ(x0u.read_request, 0x07);
  EXPECT_EQ(x0u.read_request_type, 0xC0);
  EXPECT_EQ(EncodeAddress(x0u.encoding, 0x0238), (WireAddress{0, 0x0238}));
  const RegisterProtocol& x2u = LayoutOf(0x0e8d, 0x7612).protocol;
  EXPECT_EQ(x2u.read_request, 0x47);
  EXPECT_EQ(EncodeAddress(x2u.encoding, 0x9018), (WireAddress{0, 0x9018}));
  const RegisterProtocol& mt7921 = LayoutOf(0x0e8d, 0x7961).protocol;
  EXPECT_EQ(mt7921.read_request, 0x63);
  EXPECT_EQ(mt7921.read_request_type, 0xDF);
  EXPECT_EQ(EncodeAddress(mt7921.encoding, 0x74000018), (WireAddress{0x7400, 0x0018}));
  EXPECT_EQ(DecodeAddress(mt7921.encoding, 0x7400, 0x0018), 0x74000018u);
  EXPECT_EQ(EncodeAddress(Rtw89Protocol().encoding, 0x8900), (WireAddress{0x8900, 0}));
  EXPECT_EQ(EncodeAddress(Rtw89Protocol().encoding, 0x10C), (WireAddress{0x10C, 0}));
}

TEST(FamilyTest, Rtw88WordsFromTheFactSheetDecode) {
  const DriverLayout& layout = LayoutOf(0x0bda, 0xb812);
  EXPECT_THAT(ReadAddresses(layout), ElementsAre(0x00FC, 0x010C, 0x0280));
  // v1 enabled: size 0x05, timeout 0x20 (0x2005); 0x010C with BIT_RXDMA_AGG_EN; 0x00FF = 0x20.
  auto on =
      DecodeFields(layout, {{0x0280, 0x00002005}, {0x010C, 0x0000F5F4}, {0x00FC, 0x20000000}});
  EXPECT_EQ(Field(on, "rx_agg_size"), 5u);
  EXPECT_EQ(Field(on, "rx_agg_timeout"), 0x20u);
  EXPECT_EQ(Field(on, "en_pre_calc"), 0u);
  EXPECT_EQ(Field(on, "dma_agg_mode"), 0u);
  EXPECT_EQ(Field(on, "rx_agg_en"), 1u);
  EXPECT_EQ(Field(on, "sys_cfg2_byte3"), 0x20u);
  // Disabled: size 0, timeout 1 (0x0100); the v1 path before 4aefde403da7 set BIT_EN_PRE_CALC.
  auto off = DecodeFields(layout, {{0x0280, 0x20000100}});
  EXPECT_EQ(Field(off, "rx_agg_size"), 0u);
  EXPECT_EQ(Field(off, "rx_agg_timeout"), 1u);
  EXPECT_EQ(Field(off, "en_pre_calc"), 1u);
  EXPECT_EQ(off.size(), 4u);  // only the fields of the words given
  // v2 (8812A) at USB 3: size 0x06, timeout 0x1A.
  auto v2 = DecodeFields(LayoutOf(0x0bda, 0x8812), {{0x0280, 0x00001A06}});
  EXPECT_EQ(Field(v2, "rx_agg_size"), 6u);
  EXPECT_EQ(Field(v2, "rx_agg_timeout"), 0x1Au);
}

TEST(FamilyTest, Mt76WordsFromTheFactSheetDecode) {
  // mt76x0u after firmware load and mt76x0_init_usb_dma: RX_BULK_EN | TX_BULK_EN, TOUT 0x20,
  // RX_BULK_AGG_EN cleared.
  const DriverLayout& x0u = LayoutOf(0x148f, 0x7610);
  EXPECT_THAT(ReadAddresses(x0u), ElementsAre(0x0238));
  auto x0 = DecodeFields(x0u, {{0x0238, 0x00C00020}});
  EXPECT_EQ(Field(x0, "rx_agg_timeout"), 0x20u);
  EXPECT_EQ(Field(x0, "rx_agg_limit"), 0u);
  EXPECT_EQ(Field(x0, "rx_agg_en"), 0u);
  EXPECT_EQ(Field(x0, "rx_bulk_en"), 1u);
  EXPECT_EQ(Field(x0, "tx_bulk_en"), 1u);
  // Pre-2018 mt76x0 at high-speed: AGG_EN with LMT 21, TOUT 0x80.
  auto old = DecodeFields(x0u, {{0x0238, 0x00E01580}});
  EXPECT_EQ(Field(old, "rx_agg_en"), 1u);
  EXPECT_EQ(Field(old, "rx_agg_limit"), 21u);
  EXPECT_EQ(Field(old, "rx_agg_timeout"), 0x80u);
  // mt792xu_dma_init: RX_EN | TX_EN | RX_MPSZ_PAD0 | TICK_1US_EN, AGG_TO/LMT cleared;
  // WLCFG_1 RX_AGG_PKT_LMT cleared.
  const DriverLayout& mt7921 = LayoutOf(0x0e8d, 0x7961);
  EXPECT_THAT(ReadAddresses(mt7921), ElementsAre(0x7400000C, 0x74000018));
  auto w = DecodeFields(mt7921, {{0x74000018, 0x00D40000}, {0x7400000C, 0x00000000}});
  EXPECT_EQ(Field(w, "rx_agg_timeout"), 0u);
  EXPECT_EQ(Field(w, "rx_agg_limit"), 0u);
  EXPECT_EQ(Field(w, "rx_agg_en"), 0u);
  EXPECT_EQ(Field(w, "rx_en"), 1u);
  EXPECT_EQ(Field(w, "tx_en"), 1u);
  EXPECT_EQ(Field(w, "rx_agg_pkt_limit"), 0u);
  // mt7663u for comparison: AGG_EN | RX_EN | TX_EN | ..., LMT 32, TO 100; PKT_LMT 1.
  auto m =
      DecodeFields(LayoutOf(0x0e8d, 0x7663), {{0x74000018, 0x00F52064}, {0x7400000C, 0x01388001}});
  EXPECT_EQ(Field(m, "rx_agg_en"), 1u);
  EXPECT_EQ(Field(m, "rx_agg_limit"), 32u);
  EXPECT_EQ(Field(m, "rx_agg_timeout"), 100u);
  EXPECT_EQ(Field(m, "rx_agg_pkt_limit"), 1u);
}

TEST(FamilyTest, ImplausibleWordsAndKernelVersions) {
  EXPECT_TRUE(IsImplausibleWord(0xFFFFFFFF));
  EXPECT_TRUE(IsImplausibleWord(0xDEADBEEF));
  EXPECT_FALSE(IsImplausibleWord(0x00002005));
  EXPECT_EQ(ParseKernelVersion("6.6.31-v8+"), (KernelVersion{6, 6}));
  EXPECT_EQ(ParseKernelVersion("6.12"), (KernelVersion{6, 12}));
  EXPECT_EQ(ParseKernelVersion("linux"), std::nullopt);
  EXPECT_EQ(ParseKernelVersion("6."), std::nullopt);
  EXPECT_LT((KernelVersion{6, 6}), (KernelVersion{6, 12}));
  EXPECT_EQ(ParseChipFamily("mt76").value(), ChipFamily::kMt76);
  EXPECT_FALSE(ParseChipFamily("ath9k").ok());
}

}  // namespace
}  // namespace rxfleet::common
