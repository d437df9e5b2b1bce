#include "common/retry_after.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {

std::string FormatRetryAfter(absl::Duration delay) {
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(delay, absl::Milliseconds(1)));
  return absl::StrCat(std::clamp<int64_t>(ms, 1, absl::ToInt64Milliseconds(kMaxRetryAfter)));
}

absl::Duration ReconnectDelay(absl::Duration backoff, std::optional<absl::Duration> hint,
                              double hint_jitter) {
  if (!hint.has_value()) return backoff;
  const absl::Duration bounded = std::clamp(*hint, absl::ZeroDuration(), kMaxRetryAfter);
  return std::max(backoff, bounded * (1.0 + std::clamp(hint_jitter, 0.0, kRetryHintJitter)));
}

absl::StatusOr<absl::Duration> ParseRetryAfter(std::string_view value) {
  const bool digits =
      !value.empty() && value.size() <= 10 && std::all_of(value.begin(), value.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  if (!digits) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbslView(kRetryAfterMetadataKey), " must be 1 to 10 decimal digits (milliseconds), not '",
        ToAbslView(value.substr(0, 32)), value.size() > 32 ? "...'" : "'"));
  }
  int64_t ms = 0;
  for (char c : value) ms = ms * 10 + (c - '0');
  return std::min(absl::Milliseconds(ms), kMaxRetryAfter);
}

}  // namespace rxfleet::common
