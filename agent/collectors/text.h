#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

// Small text helpers shared by the collectors' /proc and sysfs parsers. They work on
// std::string_view directly (Debian's Abseil has a distinct absl::string_view).
namespace rxfleet::agent::text {

/// Splits on runs of spaces and tabs; no empty fields.
std::vector<std::string_view> Fields(std::string_view line);

/// Splits on '\n'; a trailing newline does not produce an empty last line.
std::vector<std::string_view> Lines(std::string_view text);

/// Removes leading and trailing ASCII whitespace.
std::string_view Trim(std::string_view s);

/// Parses a whole string of decimal digits (no sign, no whitespace) into `out`. False on empty
/// input, other characters or overflow.
bool ParseDecimal(std::string_view s, uint64_t* out);

/// Same for hexadecimal digits (either case, no "0x").
bool ParseHex(std::string_view s, uint64_t* out);

/// Reads a small file (sysfs attribute, /proc file) completely. NotFound if it or its directory
/// does not exist (or the device behind a sysfs file is gone: ENODEV); Internal for other errors,
/// with the path and errno text.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

}  // namespace rxfleet::agent::text
