#pragma once

#include "absl/types/span.h"
#include "common/chips/chip_table.h"

namespace rxfleet::common::internal {

/// The rows of common/chips/rtw89-usb-devices.tsv, in file order. Defined in the .cc that
/// common/chips/generate_chip_table.cmake writes into the build tree. Use AllChips() instead.
absl::Span<const ChipId> GeneratedChipTable();

}  // namespace rxfleet::common::internal
