#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rxfleet::common {

/// The RX aggregation hold is stored in the register field TIME_32US_TH (bits 15:8 of the
/// RXAGG_0 register), in units of 32 µs: 0..255 units = 0..8160 µs (rtw89 usb.h, see
/// common/chips/rx_agg.h).
inline constexpr uint32_t kHoldUnitUs = 32;
inline constexpr uint32_t kMaxHoldUs = 255 * kHoldUnitUs;  // 8160 µs

/// Parses a hold duration and returns microseconds.
/// Accepted forms: "32us", "32µs", "32 us", "1024" (plain integer = µs), "1ms", "0.5ms"
/// (milliseconds with up to 3 decimals, converted exactly to µs).
/// Errors (InvalidArgument):
///  - malformed text or unknown unit;
///  - a value that is not a multiple of 32 µs, naming the nearest valid values, e.g.
///    "hold 33us must be a multiple of 32 µs (nearest: 32us or 64us)"; note "1ms" is 1000 µs
///    and is rejected that way (nearest: 992us or 1024us);
///  - a value above 8160 µs.
absl::StatusOr<uint32_t> ParseHoldUs(std::string_view text);

/// Formats a hold for tables and messages: 32 -> "32µs" (always µs, no unit conversion).
std::string FormatHoldUs(uint32_t hold_us);

/// Formats a hold for YAML/JSON documents, ASCII only: 32 -> "32us". ParseHoldUs accepts it.
std::string FormatHoldYaml(uint32_t hold_us);

/// Parses a bit rate: a non-negative decimal number with an optional unit bit/s, kbit/s,
/// Mbit/s or Gbit/s (SI factors of 1000; no unit = bit/s), optionally separated by a space:
/// "50Mbit/s", "1.5 Gbit/s", "64000". Returns whole bit/s (rounded to nearest). Errors
/// (InvalidArgument naming the input): malformed text, an unknown unit, a negative or
/// non-finite value, a value above 1e12 bit/s.
absl::StatusOr<uint64_t> ParseBitRate(std::string_view text);

/// Parses a size in KiB: "20KiB", "20 KiB", "20" (plain integer = KiB). Range checks are the
/// caller's (see ValidateRxAggSettings); values above 1048576 KiB are rejected here.
/// Errors: InvalidArgument naming the input.
absl::StatusOr<uint32_t> ParseKiB(std::string_view text);

}  // namespace rxfleet::common
