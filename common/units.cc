#include "common/units.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

// Upper bound accepted while parsing, before range checks: keeps arithmetic far from overflow.
constexpr uint64_t kParseCeiling = 1'000'000'000;

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Parses an unsigned decimal integer of at most 10 digits.
bool ParseDigits(std::string_view s, uint64_t* out) {
  if (!AllDigits(s) || s.size() > 10) return false;
  uint64_t value = 0;
  for (char c : s) value = value * 10 + static_cast<uint64_t>(c - '0');
  *out = value;
  return true;
}

// Parses "<int>[.<up to 3 digits>]" milliseconds into microseconds.
bool ParseMilliseconds(std::string_view s, uint64_t* out_us) {
  std::string_view whole = s;
  std::string_view fraction;
  if (const size_t dot = s.find('.'); dot != std::string_view::npos) {
    whole = s.substr(0, dot);
    fraction = s.substr(dot + 1);
    if (fraction.empty() || fraction.size() > 3 || !AllDigits(fraction)) return false;
  }
  uint64_t ms = 0;
  if (!ParseDigits(whole, &ms)) return false;
  uint64_t frac_us = 0;
  if (!fraction.empty()) {
    ParseDigits(fraction, &frac_us);
    for (size_t i = fraction.size(); i < 3; ++i) frac_us *= 10;
  }
  *out_us = ms * 1000 + frac_us;
  return true;
}

}  // namespace

absl::StatusOr<uint32_t> ParseHoldUs(std::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(ToAbslView(text));
  uint64_t us = 0;
  bool parsed = false;
  if (absl::ConsumeSuffix(&s, "us") || absl::ConsumeSuffix(&s, "\xC2\xB5s") /* µs */ ||
      absl::ConsumeSuffix(&s, "\xCE\xBCs") /* μs, Greek mu */) {
    parsed = ParseDigits(ToStdView(absl::StripTrailingAsciiWhitespace(s)), &us);
  } else if (absl::ConsumeSuffix(&s, "ms")) {
    parsed = ParseMilliseconds(ToStdView(absl::StripTrailingAsciiWhitespace(s)), &us);
  } else {
    parsed = ParseDigits(ToStdView(s), &us);
  }
  if (!parsed || us > kParseCeiling) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold '", ToAbslView(text),
                     "' is not a duration (expected e.g. 32us, 1024us, 1024 or 0.992ms)"));
  }
  if (us > kMaxHoldUs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hold %dus is out of range 0..8160us (the register field holds 255 units of 32 µs)", us));
  }
  if (us % kHoldUnitUs != 0) {
    const uint64_t lower = us / kHoldUnitUs * kHoldUnitUs;
    return absl::InvalidArgumentError(
        absl::StrFormat("hold %dus must be a multiple of 32 µs (nearest: %dus or %dus)", us, lower,
                        lower + kHoldUnitUs));
  }
  return static_cast<uint32_t>(us);
}

std::string FormatHoldUs(uint32_t hold_us) { return absl::StrCat(hold_us, "\xC2\xB5s"); }

std::string FormatHoldYaml(uint32_t hold_us) { return absl::StrCat(hold_us, "us"); }

absl::StatusOr<uint32_t> ParseKiB(std::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(ToAbslView(text));
  if (absl::ConsumeSuffix(&s, "KiB")) s = absl::StripTrailingAsciiWhitespace(s);
  uint64_t value = 0;
  if (!ParseDigits(ToStdView(s), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "size '", ToAbslView(text), "' is not a size in KiB (expected e.g. 20KiB or 20)"));
  }
  if (value > (1u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("size '", ToAbslView(text), "' is too large"));
  }
  return static_cast<uint32_t>(value);
}

absl::StatusOr<uint64_t> ParseBitRate(std::string_view text) {
  const absl::string_view input = absl::StripAsciiWhitespace(ToAbslView(text));
  absl::string_view number = input;
  double factor = 1;
  // Longest suffixes first: "bit/s" is a suffix of the others.
  for (const auto& [unit, f] : {std::pair<absl::string_view, double>{"Gbit/s", 1e9},
                                {"Mbit/s", 1e6},
                                {"kbit/s", 1e3},
                                {"bit/s", 1.0}}) {
    if (absl::ConsumeSuffix(&number, unit)) {
      factor = f;
      break;
    }
  }
  number = absl::StripTrailingAsciiWhitespace(number);
  double value = 0;
  const bool plain = !number.empty() && std::all_of(number.begin(), number.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
  if (!plain || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate '", absl::CHexEscape(input),
                     "' must be a number with an optional unit bit/s, kbit/s, Mbit/s or Gbit/s "
                     "(e.g. 50Mbit/s)"));
  }
  const double bps = value * factor;
  if (!std::isfinite(bps) || bps > 1e12) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate '", absl::CHexEscape(input), "' is above 1e12 bit/s"));
  }
  return static_cast<uint64_t>(std::llround(bps));
}

}  // namespace rxfleet::common
