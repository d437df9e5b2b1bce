#include "common/chips/chip_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/chips/chip_table_data.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

// Realtek's virtual CD-ROM (driver installer) ID, seen in field dmesg logs before the adapter
// re-enumerates as its Wi-Fi ID.
constexpr uint16_t kRealtekVid = 0x0bda;
constexpr uint16_t kRealtekStoragePid = 0x1a2b;

bool ParseHex4(std::string_view s, uint16_t* out) {
  if (s.size() != 4) return false;
  uint16_t value = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = static_cast<uint16_t>(value * 16 + digit);
  }
  *out = value;
  return true;
}

}  // namespace

const ChipId* LookupChip(uint16_t vid, uint16_t pid) {
  for (const ChipId& entry : internal::GeneratedChipTable()) {
    if (entry.vid == vid && entry.pid == pid) return &entry;
  }
  return nullptr;
}

absl::Span<const ChipId> AllChips() { return internal::GeneratedChipTable(); }

std::vector<std::string_view> KnownChipNames() {
  std::vector<std::string_view> names;
  for (const ChipId& entry : AllChips()) names.push_back(entry.chip);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::optional<RxAggLayout> LayoutForChip(std::string_view chip) {
  for (const ChipId& entry : AllChips()) {
    if (entry.chip == chip) return entry.layout;
  }
  return std::nullopt;
}

bool IsRealtekStorageMode(uint16_t vid, uint16_t pid) {
  return vid == kRealtekVid && pid == kRealtekStoragePid;
}

std::string_view RxAggLayoutName(RxAggLayout layout) {
  switch (layout) {
    case RxAggLayout::kV1:
      return "v1";
    case RxAggLayout::kV2:
      return "v2";
    case RxAggLayout::kV3:
      return "v3";
  }
  return "unknown";
}

absl::StatusOr<RxAggLayout> ParseRxAggLayout(std::string_view name) {
  if (name == "v1") return RxAggLayout::kV1;
  if (name == "v2") return RxAggLayout::kV2;
  if (name == "v3") return RxAggLayout::kV3;
  return absl::InvalidArgumentError(absl::StrCat("unknown RX aggregation layout '",
                                                 ToAbslView(name), "' (expected v1, v2 or v3)"));
}

absl::StatusOr<VidPid> ParseVidPid(std::string_view text) {
  VidPid id;
  if (text.size() != 9 || text[4] != ':' || !ParseHex4(text.substr(0, 4), &id.vid) ||
      !ParseHex4(text.substr(5), &id.pid)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", ToAbslView(text), "' is not a USB ID of the form xxxx:xxxx (hex vid:pid)"));
  }
  return id;
}

std::string FormatVidPid(uint16_t vid, uint16_t pid) {
  return absl::StrFormat("%04x:%04x", vid, pid);
}

}  // namespace rxfleet::common
