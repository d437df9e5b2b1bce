// Value rules of the YAML documents (common/policy/document_reader.h).
#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/chips/chip_table.h"
#include "common/chips/family.h"
#include "common/policy/document_reader.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {

// ---------------------------------------------------------------------------------------------
// Value rules.

absl::Status CheckPriority(int64_t priority) {
  if (priority < kMinPolicyPriority || priority > kMaxPolicyPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority ", priority, " is out of range -1000..1000"));
  }
  return absl::OkStatus();
}

absl::Status CheckChipName(std::string_view chip) {
  if (LayoutForChip(chip)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chip '", ToAbslView(chip), "' (known chips: ",
                   absl::StrJoin(KnownChipNames(), ", ",
                                 [](std::string* out, std::string_view n) { out->append(n); }),
                   ")"));
}

absl::Status CheckFamilyName(std::string_view family) { return ParseChipFamily(family).status(); }

absl::Status CheckSelectableUsbSpeed(UsbSpeed speed) {
  if (speed == UsbSpeed::kUnknown) {
    return absl::InvalidArgumentError(
        "USB speed 'unknown' cannot be selected (expected low, full, high, super, super_plus)");
  }
  return absl::OkStatus();
}

std::set<RxAggLayout> PossibleLayouts(const Selector& selector) {
  std::set<RxAggLayout> layouts;
  if (!selector.chips.empty()) {
    for (const std::string& chip : selector.chips) {
      if (std::optional<RxAggLayout> layout = LayoutForChip(chip)) layouts.insert(*layout);
    }
    return layouts;
  }
  if (!selector.vid_pids.empty()) {
    bool all_known = true;
    for (const VidPid& id : selector.vid_pids) {
      if (const ChipId* chip = LookupChip(id.vid, id.pid)) {
        layouts.insert(chip->layout);
      } else {
        all_known = false;
      }
    }
    if (all_known) return layouts;
  }
  return {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3};
}

absl::Status CheckSettingsForSelector(const RxAggSettings& settings, const Selector& selector) {
  if (absl::Status s = ValidateRxAggSettings(settings); !s.ok()) return s;
  for (RxAggLayout layout : PossibleLayouts(selector)) {
    if (absl::Status s = ValidateRxAggSettingsForLayout(layout, settings); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.message(), "; the selector can match ", ToAbslView(RxAggLayoutName(layout)),
          " chips (narrow spec.selector.chips to avoid them)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::common
