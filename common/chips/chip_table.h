#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace rxfleet::common {

/// RX aggregation register layout families of rtw89 USB chips (rtw89 usb.h; dispatch by chip in
/// rtw89_usb_rx_agg_cfg, usb.c). See common/chips/rx_agg.h for the register facts.
///  - kV1: RTL8851B, RTL8852A, RTL8852B — R_AX_RXAGG_0 = 0x8900, buffer in 4 KiB units.
///  - kV2: RTL8852C — R_AX_RXAGG_0_V1 = 0x6000 / R_AX_RXAGG_1_V1 = 0x6004, 1 KiB units.
///  - kV3: RTL8922A — R_BE_RXAGG_0_V1 = 0x6000 / R_BE_RXAGG_1_V1 = 0x6004, 1 KiB units.
enum class RxAggLayout : uint8_t { kV1 = 1, kV2 = 2, kV3 = 3 };

/// One USB ID bound by the upstream rtw89 driver.
/// `chip` is the lower-case driver module stem ("rtl8851bu", "rtl8852au", "rtl8852bu",
/// "rtl8852cu", "rtl8922au") and points to static storage.
struct ChipId {
  uint16_t vid;
  uint16_t pid;
  std::string_view chip;
  RxAggLayout layout;
};

/// Returns the entry for vid:pid, or nullptr if the ID is not an upstream rtw89 USB ID.
/// The table is generated at build time from common/chips/rtw89-usb-devices.tsv (62 IDs from
/// torvalds/linux and pkshih/rtw rtw89 rtw88*u.c/rtw8922au.c id tables; fork-only and pending
/// IDs are excluded).
const ChipId* LookupChip(uint16_t vid, uint16_t pid);

/// All entries of the generated table, in TSV order.
absl::Span<const ChipId> AllChips();

/// Distinct chip names of the table, sorted ("rtl8851bu", ..., "rtl8922au").
std::vector<std::string_view> KnownChipNames();

/// The layout of a chip name from the table, or nullopt if the name is unknown.
std::optional<RxAggLayout> LayoutForChip(std::string_view chip);

/// True for 0bda:1a2b, the Realtek virtual CD-ROM (usb-storage) many rtw89 adapters enumerate
/// as before a mode switch (usb_modeswitch or the driver's eject) re-enumerates them as the Wi-Fi
/// device. Field evidence: dmesg "idVendor=0bda, idProduct=1a2b" before the Wi-Fi ID appears.
bool IsRealtekStorageMode(uint16_t vid, uint16_t pid);

/// "v1", "v2", "v3".
std::string_view RxAggLayoutName(RxAggLayout layout);

/// Parses "v1".."v3" (InvalidArgument otherwise).
absl::StatusOr<RxAggLayout> ParseRxAggLayout(std::string_view name);

/// A USB vendor/product ID pair.
struct VidPid {
  uint16_t vid = 0;
  uint16_t pid = 0;
  friend auto operator<=>(const VidPid&, const VidPid&) = default;
};

/// Parses "xxxx:xxxx" (exactly four hex digits each side, either case).
/// Returns InvalidArgument naming the input otherwise.
absl::StatusOr<VidPid> ParseVidPid(std::string_view text);

/// Formats as lower-case "xxxx:xxxx", e.g. "0bda:8912".
std::string FormatVidPid(uint16_t vid, uint16_t pid);

}  // namespace rxfleet::common
