#include "common/chips/rx_agg.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"

namespace rxfleet::common {
namespace {

// Register facts, see rx_agg.h for sources (rtw89 usb.h:24-41, usb.c:829-859).
constexpr RxAggLayoutSpec kV1Spec{
    .layout = RxAggLayout::kV1,
    .reg0_address = 0x8900,  // R_AX_RXAGG_0
    .reg1_address = std::nullopt,
    .buffer_unit_bytes = 4096,  // B_AX_RXAGG_0_BUF_SZ_4K
    .driver_default_reg0 = 0x80002005,
    .driver_default_reg1 = std::nullopt,
};
constexpr RxAggLayoutSpec kV2Spec{
    .layout = RxAggLayout::kV2,
    .reg0_address = 0x6000,     // R_AX_RXAGG_0_V1
    .reg1_address = 0x6004,     // R_AX_RXAGG_1_V1
    .buffer_unit_bytes = 1024,  // B_AX_RXAGG_0_BUF_SZ_1K
    .driver_default_reg0 = 0x80FF2014,
    .driver_default_reg1 = 0x0000001F,
};
constexpr RxAggLayoutSpec kV3Spec{
    .layout = RxAggLayout::kV3,
    .reg0_address = 0x6000,     // R_BE_RXAGG_0_V1
    .reg1_address = 0x6004,     // R_BE_RXAGG_1_V1
    .buffer_unit_bytes = 1024,  // B_BE_RXAGG_0_BUF_SZ_1K
    .driver_default_reg0 = 0x80FF2014,
    .driver_default_reg1 = 0x0000001F,
};

// Words returned by reads of a clock-gated/asleep chip (rtw89 usb.c:83-107).
constexpr uint32_t kAsleepPatterns[] = {0xDEADBEEF, 0xEAEAEAEA};

uint32_t BufferUnitKiB(RxAggLayout layout) {
  return GetRxAggLayoutSpec(layout).buffer_unit_bytes / 1024;
}

}  // namespace

const RxAggLayoutSpec& GetRxAggLayoutSpec(RxAggLayout layout) {
  switch (layout) {
    case RxAggLayout::kV1:
      return kV1Spec;
    case RxAggLayout::kV2:
      return kV2Spec;
    case RxAggLayout::kV3:
      return kV3Spec;
  }
  return kV3Spec;  // Unreachable for valid enumerators.
}

std::vector<uint32_t> RxAggRegisterAddresses(RxAggLayout layout) {
  const RxAggLayoutSpec& spec = GetRxAggLayoutSpec(layout);
  std::vector<uint32_t> addresses = {spec.reg0_address};
  if (spec.reg1_address) addresses.push_back(*spec.reg1_address);
  return addresses;
}

RxAggFields DecodeRxAgg(RxAggLayout layout, uint32_t word) {
  return RxAggFields{
      .enable = (word & kRxAggEnableBit) != 0,
      .count_threshold = (word & kRxAggCountMask) >> kRxAggCountShift,
      .hold_us = ((word & kRxAggHoldMask) >> kRxAggHoldShift) * kHoldUnitUs,
      .buffer_kib = (word & kRxAggBufferMask) * BufferUnitKiB(layout),
      .other_bits = word & kRxAggOtherBitsMask,
  };
}

absl::Status ValidateRxAggSettings(const RxAggSettings& settings) {
  if (settings.hold_us) {
    const uint32_t hold = *settings.hold_us;
    if (hold > kMaxHoldUs) {
      return absl::InvalidArgumentError(
          absl::StrFormat("hold %dus is out of range 0..8160us", hold));
    }
    if (hold % kHoldUnitUs != 0) {
      const uint32_t lower = hold / kHoldUnitUs * kHoldUnitUs;
      return absl::InvalidArgumentError(
          absl::StrFormat("hold %dus must be a multiple of 32 µs (nearest: %dus or %dus)", hold,
                          lower, lower + kHoldUnitUs));
    }
  }
  if (settings.count_threshold && *settings.count_threshold > kMaxRxAggCountThreshold) {
    return absl::InvalidArgumentError(
        absl::StrFormat("countThreshold %d is out of range 0..255", *settings.count_threshold));
  }
  if (settings.buffer_kib &&
      (*settings.buffer_kib == 0 || *settings.buffer_kib > kMaxRxAggBufferKiB)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bufferKiB %d is out of range 1..20 (the driver's RX buffer is 20 KiB)",
                        *settings.buffer_kib));
  }
  if (settings.force_enable && settings.enable != true) {
    return absl::InvalidArgumentError("forceEnable requires enable: true");
  }
  return absl::OkStatus();
}

absl::Status ValidateRxAggSettingsForLayout(RxAggLayout layout, const RxAggSettings& settings) {
  if (absl::Status status = ValidateRxAggSettings(settings); !status.ok()) return status;
  const uint32_t unit_kib = BufferUnitKiB(layout);
  if (settings.buffer_kib && *settings.buffer_kib % unit_kib != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bufferKiB %d is not a multiple of %d KiB, the buffer unit of RX aggregation layout %s",
        *settings.buffer_kib, unit_kib, RxAggLayoutName(layout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ApplyRxAggSettings(RxAggLayout layout, uint32_t current_word,
                                            const RxAggSettings& settings) {
  if (absl::Status status = ValidateRxAggSettingsForLayout(layout, settings); !status.ok()) {
    return status;
  }
  const bool currently_enabled = (current_word & kRxAggEnableBit) != 0;
  if (!currently_enabled && settings.enable != false &&
      !(settings.enable == true && settings.force_enable)) {
    return absl::FailedPreconditionError(
        "RX aggregation is disabled by the driver; not enabling it (older drivers cannot split "
        "aggregated transfers); set forceEnable to override");
  }
  uint32_t word = current_word;
  if (settings.enable) {
    word = *settings.enable ? (word | kRxAggEnableBit) : (word & ~kRxAggEnableBit);
  }
  if (settings.count_threshold) {
    word = (word & ~kRxAggCountMask) | (*settings.count_threshold << kRxAggCountShift);
  }
  if (settings.hold_us) {
    word = (word & ~kRxAggHoldMask) | ((*settings.hold_us / kHoldUnitUs) << kRxAggHoldShift);
  }
  if (settings.buffer_kib) {
    word = (word & ~kRxAggBufferMask) | (*settings.buffer_kib / BufferUnitKiB(layout));
  }
  return word;
}

absl::StatusOr<uint32_t> EncodeRxAgg(RxAggLayout layout, const RxAggFields& fields) {
  if ((fields.other_bits & ~kRxAggOtherBitsMask) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("other_bits 0x%08x lie outside bits 30:24", fields.other_bits));
  }
  RxAggSettings settings{.hold_us = fields.hold_us,
                         .count_threshold = fields.count_threshold,
                         .buffer_kib = std::nullopt,
                         .enable = fields.enable,
                         .force_enable = fields.enable};
  // buffer_kib 0 is a valid register value (e.g. vendor small-packet mode on v1) but not a
  // valid setting; encode it directly after validating the rest.
  if (fields.buffer_kib != 0) settings.buffer_kib = fields.buffer_kib;
  const uint32_t base = fields.other_bits | (fields.enable ? kRxAggEnableBit : 0);
  absl::StatusOr<uint32_t> word = ApplyRxAggSettings(layout, base, settings);
  if (!word.ok()) return word.status();
  if (fields.buffer_kib == 0) return *word & ~kRxAggBufferMask;
  return *word;
}

bool IsAsleepPattern(uint32_t word) {
  for (uint32_t pattern : kAsleepPatterns) {
    if (word == pattern) return true;
  }
  return false;
}

}  // namespace rxfleet::common
