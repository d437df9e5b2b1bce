#include "common/chips/family.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/chips/family_data.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

// ---- protocols ----

// rtw89 usb.h RTW89_USB_VENQT 0x05, _READ 0xC0, _WRITE 0x40; usb.c: wValue addr[15:0],
// wIndex addr[23:16], 500 ms.
constexpr RegisterProtocol kRtw89Protocol{0x05,       0xC0, 0x05, 0x40, AddressEncoding::kRtw89,
                                          0x00FFFFFF, 500,  true};
// rtw88 usb.h:15-19 RTW_USB_CMD_REQ 0x05, RTW_USB_CMD_READ 0xC0 / _WRITE 0x40,
// RTW_USB_VENQT_CMD_IDX 0; usb.c:90-92 wValue = addr; read timeout 1000 ms (usb.c:92).
constexpr RegisterProtocol kRtw88Protocol{0x05,   0xC0, 0x05, 0x40, AddressEncoding::kRtw88,
                                          0xFFFF, 1000, false};
// mt76 mt76.h:631-644, usb.c:81-138: plain addresses MULTI_READ 0x07 / MULTI_WRITE 0x06,
// bmRequestType 0xC0 / 0x40; 300 ms per try (usb.c:11-12). Bits 31/30 of an mt76 address are
// type flags, so addresses stay below 0x40000000.
constexpr RegisterProtocol kMt76x0uProtocol{0x07,       0xC0, 0x06, 0x40, AddressEncoding::kMt76,
                                            0x3FFFFFFF, 300,  false};
// CFG space: READ_CFG 0x47 / WRITE_CFG 0x46 (MT_USB_U3DMA_CFG is a CFG address).
constexpr RegisterProtocol kMt76x2uProtocol{0x47,       0xC0, 0x46, 0x40, AddressEncoding::kMt76,
                                            0x3FFFFFFF, 300,  false};
// mt792x.h:515, mt792x_usb.c:89-122: READ_EXT 0x63 / WRITE_EXT 0x66 with
// USB_TYPE_VENDOR | 0x1f (0xDF in, 0x5F out).
constexpr RegisterProtocol kMt792xProtocol{0x63,       0xDF, 0x66, 0x5F, AddressEncoding::kMt76,
                                           0xFFFFFFFF, 300,  false};
// mt7615/usb.c:24-30: mt7663u uses READ_EXT / WRITE_EXT with plain USB_TYPE_VENDOR.
constexpr RegisterProtocol kMt7663uProtocol{0x63,       0xC0, 0x66, 0x40, AddressEncoding::kMt76,
                                            0xFFFFFFFF, 300,  false};

// ---- fields ----

// rtw88 reg.h:242-250, 362-365, 207: REG_RXDMA_AGG_PG_TH 0x0280 (size [7:0], timeout [15:8],
// BIT_EN_PRE_CALC 29, bit 31 DMA/USB aggregation mode), REG_TXDMA_PQ_MAP 0x010C
// BIT_RXDMA_AGG_EN bit 2, REG_SYS_CFG2+3 = byte 0x00FF (0x20: USB 3 mode), read as the top
// byte of the word at 0x00FC.
constexpr RegisterField kRtw88Fields[] = {
    {"rx_agg_size", 0x0280, 0x000000FF, 0}, {"rx_agg_timeout", 0x0280, 0x0000FF00, 8},
    {"en_pre_calc", 0x0280, 1u << 29, 29},  {"dma_agg_mode", 0x0280, 1u << 31, 31},
    {"rx_agg_en", 0x010C, 1u << 2, 2},      {"sys_cfg2_byte3", 0x00FC, 0xFF000000, 24},
};
// mt76x02_regs.h:77-90, 161: MT_USB_DMA_CFG 0x0238 (mt76x0u) / MT_USB_U3DMA_CFG 0x9018 CFG
// (mt76x2u), one layout.
constexpr RegisterField kMt76x0uFields[] = {
    {"rx_agg_timeout", 0x0238, 0x000000FF, 0}, {"rx_agg_limit", 0x0238, 0x0000FF00, 8},
    {"rx_agg_en", 0x0238, 1u << 21, 21},       {"rx_bulk_en", 0x0238, 1u << 22, 22},
    {"tx_bulk_en", 0x0238, 1u << 23, 23},
};
constexpr RegisterField kMt76x2uFields[] = {
    {"rx_agg_timeout", 0x9018, 0x000000FF, 0}, {"rx_agg_limit", 0x9018, 0x0000FF00, 8},
    {"rx_agg_en", 0x9018, 1u << 21, 21},       {"rx_bulk_en", 0x9018, 1u << 22, 22},
    {"tx_bulk_en", 0x9018, 1u << 23, 23},
};
// mt792x_regs.h:449-469: MT_UDMA_WLCFG_0 0x74000018, MT_UDMA_WLCFG_1 0x7400000C.
constexpr RegisterField kMt792xFields[] = {
    {"rx_agg_timeout", 0x74000018, 0x000000FF, 0}, {"rx_agg_limit", 0x74000018, 0x0000FF00, 8},
    {"rx_agg_en", 0x74000018, 1u << 21, 21},       {"rx_en", 0x74000018, 1u << 22, 22},
    {"tx_en", 0x74000018, 1u << 23, 23},           {"rx_agg_pkt_limit", 0x7400000C, 0x000000FF, 0},
};

// ---- driver layouts ----
// rx_agg_since: rtw88 002a5db9a52a "Enable USB RX aggregation for 8822c/8822b/8821c" (first in
// Linux 6.12; its USB 3 fix 4aefde403da7 went into v6.12-rc5); ce5dea83ee8f for 8821au/8812au
// (pull rtw-next-2024-12-12, the 6.14 merge window: derived); dcbb7bb3a364 for 8814au ("rtw-next
// patches for v6.16"); 8723du never aggregates ("Doesn't like aggregation", usb.c:960-965).
constexpr DriverLayout kLayouts[] = {
    {"rtw_8822bu", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, KernelVersion{6, 12},
     "002a5db9a52a"},
    {"rtw_8822cu", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, KernelVersion{6, 12},
     "002a5db9a52a"},
    {"rtw_8821cu", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, KernelVersion{6, 12},
     "002a5db9a52a"},
    {"rtw_8821au", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, KernelVersion{6, 14},
     "ce5dea83ee8f"},
    {"rtw_8812au", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, KernelVersion{6, 14},
     "ce5dea83ee8f"},
    {"rtw_8814au", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, KernelVersion{6, 16},
     "dcbb7bb3a364"},
    {"rtw_8723du", ChipFamily::kRtw88, kRtw88Protocol, kRtw88Fields, std::nullopt, ""},
    {"mt76x0u", ChipFamily::kMt76, kMt76x0uProtocol, kMt76x0uFields, std::nullopt, ""},
    {"mt76x2u", ChipFamily::kMt76, kMt76x2uProtocol, kMt76x2uFields, std::nullopt, ""},
    {"mt7921u", ChipFamily::kMt76, kMt792xProtocol, kMt792xFields, std::nullopt, ""},
    {"mt7925u", ChipFamily::kMt76, kMt792xProtocol, kMt792xFields, std::nullopt, ""},
    {"mt7663u", ChipFamily::kMt76, kMt7663uProtocol, kMt792xFields, std::nullopt, ""},
};

const DriverLayout* LayoutForDriver(std::string_view driver) {
  for (const DriverLayout& layout : kLayouts) {
    if (layout.driver == driver) return &layout;
  }
  return nullptr;
}

std::vector<ObservedChip> BuildTable() {
  std::vector<ObservedChip> chips;
  for (auto rows : {internal::Generated_rtw88_Table(), internal::Generated_mt76_Table()}) {
    for (const internal::ObservedChipRow& row : rows) {
      // Every driver of the TSVs has a layout (family_test checks it); a row without one would
      // be left out rather than guessed.
      if (const DriverLayout* layout = LayoutForDriver(row.driver); layout != nullptr) {
        chips.push_back({row.vid, row.pid, row.names, layout});
      }
    }
  }
  return chips;
}

const std::vector<ObservedChip>& Table() {
  static const std::vector<ObservedChip>* table = new std::vector<ObservedChip>(BuildTable());
  return *table;
}

}  // namespace

std::string_view ChipFamilyName(ChipFamily family) {
  switch (family) {
    case ChipFamily::kRtw89:
      return "rtw89";
    case ChipFamily::kRtw88:
      return "rtw88";
    case ChipFamily::kMt76:
      return "mt76";
  }
  return "rtw89";
}

absl::StatusOr<ChipFamily> ParseChipFamily(std::string_view name) {
  for (ChipFamily f : {ChipFamily::kRtw89, ChipFamily::kRtw88, ChipFamily::kMt76}) {
    if (ChipFamilyName(f) == name) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chip family '", ToAbslView(name), "' (expected rtw89, rtw88 or mt76)"));
}

bool FamilyManaged(ChipFamily family) { return family == ChipFamily::kRtw89; }

WireAddress EncodeAddress(AddressEncoding encoding, uint32_t address) {
  switch (encoding) {
    case AddressEncoding::kRtw89:
      return {static_cast<uint16_t>(address & 0xFFFF),
              static_cast<uint16_t>((address >> 16) & 0xFF)};
    case AddressEncoding::kRtw88:
      return {static_cast<uint16_t>(address & 0xFFFF), 0};
    case AddressEncoding::kMt76:
      return {static_cast<uint16_t>(address >> 16), static_cast<uint16_t>(address & 0xFFFF)};
  }
  return {};
}

uint32_t DecodeAddress(AddressEncoding encoding, uint16_t value, uint16_t index) {
  switch (encoding) {
    case AddressEncoding::kRtw89:
      return static_cast<uint32_t>(index) << 16 | value;
    case AddressEncoding::kRtw88:
      return value;
    case AddressEncoding::kMt76:
      return static_cast<uint32_t>(value) << 16 | index;
  }
  return 0;
}

const RegisterProtocol& Rtw89Protocol() { return kRtw89Protocol; }

std::optional<KernelVersion> ParseKernelVersion(std::string_view release) {
  const size_t dot = release.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  size_t end = dot + 1;
  while (end < release.size() && release[end] >= '0' && release[end] <= '9') ++end;
  KernelVersion v;
  if (end == dot + 1 || !absl::SimpleAtoi(ToAbslView(release.substr(0, dot)), &v.major) ||
      !absl::SimpleAtoi(ToAbslView(release.substr(dot + 1, end - dot - 1)), &v.minor)) {
    return std::nullopt;
  }
  return v;
}

const ObservedChip* LookupObservedChip(uint16_t vid, uint16_t pid) {
  for (const ObservedChip& chip : Table()) {
    if (chip.vid == vid && chip.pid == pid) return &chip;
  }
  return nullptr;
}

const ObservedChip* LookupObservedChipByDriver(std::string_view driver) {
  if (driver.empty()) return nullptr;
  std::string name(driver);
  if (name.starts_with("rtw88_")) name = "rtw_" + name.substr(6);
  for (const ObservedChip& chip : Table()) {
    if (chip.layout->driver == name) return &chip;
  }
  return nullptr;
}

std::vector<const ObservedChip*> ObservedChips(ChipFamily family) {
  std::vector<const ObservedChip*> out;
  for (const ObservedChip& chip : Table()) {
    if (chip.layout->family == family) out.push_back(&chip);
  }
  return out;
}

std::vector<uint32_t> ReadAddresses(const DriverLayout& layout) {
  std::vector<uint32_t> addresses;
  for (const RegisterField& f : layout.fields) addresses.push_back(f.address);
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  return addresses;
}

std::vector<FieldValue> DecodeFields(const DriverLayout& layout,
                                     const std::map<uint32_t, uint32_t>& words) {
  std::vector<FieldValue> out;
  for (const RegisterField& f : layout.fields) {
    auto it = words.find(f.address);
    if (it == words.end()) continue;
    out.push_back({std::string(f.name), (it->second & f.mask) >> f.shift});
  }
  return out;
}

bool IsImplausibleWord(uint32_t word) {
  return word == 0xFFFFFFFF || word == 0xDEADBEEF || word == 0xEAEAEAEA;
}

}  // namespace rxfleet::common
