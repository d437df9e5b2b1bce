#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace rxfleet::common {

// The Debian build of Abseil (20220623) sets ABSL_OPTION_USE_STD_STRING_VIEW 0, so
// absl::string_view is a distinct type from std::string_view with no conversion either way.
// rxfleet's public APIs use std::string_view; these convert at calls into Abseil
// (absl::StrCat, absl::StrSplit, absl::Status messages ...). Both are O(1) and never copy.

/// std::string_view -> absl::string_view (same bytes).
inline absl::string_view ToAbslView(std::string_view s) { return {s.data(), s.size()}; }

/// absl::string_view -> std::string_view (same bytes), e.g. for absl::Status::message().
inline std::string_view ToStdView(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace rxfleet::common
