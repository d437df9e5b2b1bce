#pragma once

#include <cstdint>
#include <string_view>

#include "absl/types/span.h"

namespace rxfleet::common::internal {

/// One row of an observe-only family's TSV as generate_observed_table.cmake writes it.
struct ObservedChipRow {
  uint16_t vid;
  uint16_t pid;
  std::string_view names;
  std::string_view driver;
};

/// The rows of common/chips/rtw88-usb-devices.tsv / mt76-usb-devices.tsv (first row of a
/// duplicated ID only), in file order. Defined in the generated .cc files. Use
/// common::ObservedChips instead.
absl::Span<const ObservedChipRow> Generated_rtw88_Table();
absl::Span<const ObservedChipRow> Generated_mt76_Table();

}  // namespace rxfleet::common::internal
