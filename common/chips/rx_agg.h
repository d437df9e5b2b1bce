#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chips/chip_table.h"

namespace rxfleet::common {

// RX aggregation register facts of rtw89 USB chips. Sources (line numbers from the
// morrownr/rtw89 mirror of rtw-next @08b8d326, same code as pkshih/rtw @b1827227):
//  - register addresses and field masks: rtw89 usb.h:24-41;
//  - driver defaults written once in rtw89_usb_ops_mac_post_init: usb.c:829-859;
//  - per-chip dispatch: rtw89_usb_rx_agg_cfg, usb.c:861-879;
//  - aggregate buffer: RTW89_USB_RECVBUF_SZ 20480 bytes, usb.h:14.
//
// Reg 0 bit fields (same positions at 0x8900 and 0x6000):
//   31     B_*_RXAGG_0_EN          enable
//   30:24  not used upstream       (vendor: 30 DMA store, 29 SW enable, 28 SW trigger) — kept
//                                   verbatim by every write here
//   23:16  B_*_RXAGG_0_NUM_TH      packet-count threshold, 0..255
//   15:8   B_*_RXAGG_0_TIME_32US_TH hold, units of 32 µs
//   7:0    B_*_RXAGG_0_BUF_SZ_4K / _1K  size threshold, 4 KiB (v1) or 1 KiB (v2, v3) units

/// Register addresses and driver defaults of one layout.
struct RxAggLayoutSpec {
  RxAggLayout layout;
  /// R_AX_RXAGG_0 = 0x8900 (v1); R_AX_RXAGG_0_V1 = 0x6000 (v2); R_BE_RXAGG_0_V1 = 0x6000 (v3).
  uint32_t reg0_address;
  /// R_AX_RXAGG_1_V1 / R_BE_RXAGG_1_V1 = 0x6004 for v2/v3; none for v1 (the driver writes no
  /// second register there).
  std::optional<uint32_t> reg1_address;
  /// Unit of BUF_SZ: 4096 bytes (v1, B_AX_RXAGG_0_BUF_SZ_4K) or 1024 bytes (v2/v3, *_BUF_SZ_1K).
  uint32_t buffer_unit_bytes;
  /// Reg 0 word the upstream driver writes: v1 0x80002005 (EN, NUM_TH 0, 1024 µs, 5 x 4 KiB);
  /// v2/v3 0x80FF2014 (EN, NUM_TH 255, 1024 µs, 20 x 1 KiB). rtw89 usb.c:829-859.
  uint32_t driver_default_reg0;
  /// Reg 1 word the upstream driver writes: 0x0000001F (SML_PKTNUM_TH 31) for v2/v3.
  std::optional<uint32_t> driver_default_reg1;
};

/// The spec of a layout (static storage; valid for the program's lifetime).
const RxAggLayoutSpec& GetRxAggLayoutSpec(RxAggLayout layout);

/// The register addresses the RX aggregation feature may touch for a layout: reg 0 and, for
/// v2/v3, reg 1. This is the allow-list for register access: v1 {0x8900}; v2/v3 {0x6000, 0x6004}.
std::vector<uint32_t> RxAggRegisterAddresses(RxAggLayout layout);

/// Field masks and shifts of reg 0.
inline constexpr uint32_t kRxAggEnableBit = 1u << 31;
inline constexpr uint32_t kRxAggOtherBitsMask = 0x7F000000u;  // bits 30:24
inline constexpr uint32_t kRxAggCountMask = 0x00FF0000u;      // bits 23:16
inline constexpr uint32_t kRxAggCountShift = 16;
inline constexpr uint32_t kRxAggHoldMask = 0x0000FF00u;  // bits 15:8
inline constexpr uint32_t kRxAggHoldShift = 8;
inline constexpr uint32_t kRxAggBufferMask = 0x000000FFu;  // bits 7:0

/// Largest aggregate the driver can receive: RTW89_USB_RECVBUF_SZ 20480 bytes = 20 KiB
/// (rtw89 usb.h:14). A larger size threshold would overflow the URB buffer.
inline constexpr uint32_t kMaxRxAggBufferKiB = 20;
inline constexpr uint32_t kMaxRxAggCountThreshold = 255;

/// Reg 0 decoded into physical units.
struct RxAggFields {
  bool enable;               ///< bit 31
  uint32_t count_threshold;  ///< bits 23:16, 0..255 frames
  uint32_t hold_us;          ///< bits 15:8 times 32 µs, 0..8160
  uint32_t buffer_kib;       ///< bits 7:0 times the layout's unit (4 KiB v1, 1 KiB v2/v3)
  uint32_t other_bits;       ///< bits 30:24 in place (word & 0x7F000000), kept verbatim
};

/// Decodes a reg 0 word. Never fails: every 32-bit word has a decoding.
RxAggFields DecodeRxAgg(RxAggLayout layout, uint32_t word);

/// A partial desired state of reg 0: unset fields are left as they are in the register.
struct RxAggSettings {
  std::optional<uint32_t> hold_us;          ///< multiple of 32, 0..8160 µs
  std::optional<uint32_t> count_threshold;  ///< 0..255 frames
  std::optional<uint32_t> buffer_kib;       ///< 1..20 KiB (v1: multiple of 4)
  std::optional<bool> enable;               ///< set/clear bit 31
  /// Needed together with enable=true to turn on aggregation the driver left disabled.
  bool force_enable = false;

  bool Empty() const {
    return !hold_us && !count_threshold && !buffer_kib && !enable && !force_enable;
  }
  friend bool operator==(const RxAggSettings&, const RxAggSettings&) = default;
};

/// Layout-independent checks. Returns InvalidArgument naming the field when:
///  - hold_us is not a multiple of 32 or above 8160 (field TIME_32US_TH is 8 bits of 32 µs);
///  - count_threshold is above 255 (field NUM_TH is 8 bits);
///  - buffer_kib is 0 or above 20 (RTW89_USB_RECVBUF_SZ 20480, rtw89 usb.h:14);
///  - force_enable is set without enable=true.
absl::Status ValidateRxAggSettings(const RxAggSettings& settings);

/// ValidateRxAggSettings plus the layout's own rule: v1 counts the buffer in 4 KiB units
/// (B_AX_RXAGG_0_BUF_SZ_4K), so buffer_kib must be a multiple of 4 there.
absl::Status ValidateRxAggSettingsForLayout(RxAggLayout layout, const RxAggSettings& settings);

/// Read-modify-write of reg 0: returns current_word with only the fields set in `settings`
/// replaced; every other bit, in particular bits 30:24, is kept.
/// Errors:
///  - InvalidArgument: settings fail ValidateRxAggSettingsForLayout.
///  - FailedPrecondition: the enable bit of current_word is 0 and the settings do not say
///    enable=false; only enable=true with force_enable turns it on. Message: "RX aggregation is
///    disabled by the driver; not enabling it (older drivers cannot split aggregated transfers);
///    set forceEnable to override". (rtw89 USB before eef6d4449e8a / 32cee8a9bb66 parsed exactly
///    one frame per bulk-IN transfer, so enabling aggregation under it corrupts RX.)
/// enable=false clears bit 31 (other requested fields are still written).
/// Examples: v3 0x80FF2014 + hold 32 -> 0x80FF0114; v1 0x80002005 + hold 32 -> 0x80000105.
absl::StatusOr<uint32_t> ApplyRxAggSettings(RxAggLayout layout, uint32_t current_word,
                                            const RxAggSettings& settings);

/// Encodes a complete reg 0 word from fields, for tests and tools. Fields must be in range for
/// the layout (InvalidArgument otherwise); other_bits must lie within bits 30:24.
absl::StatusOr<uint32_t> EncodeRxAgg(RxAggLayout layout, const RxAggFields& fields);

/// True for words a register read returns while the chip is clock-gated or asleep instead of
/// a register value: RTW89_R32_DEAD 0xDEADBEEF and RTW89_R32_EA 0xEAEAEAEA (rtw89 mac.h, next to
/// MAC_REG_POOL_COUNT; rtw89_mac_check_mac_en treats both as "MAC not enabled", and usb.c:83-107
/// retries CMAC-range reads returning 0xDEADBEEF after setting R_AX_CK_EN). Such a read must not
/// be decoded or written back.
bool IsAsleepPattern(uint32_t word);

}  // namespace rxfleet::common
