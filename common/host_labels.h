#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rxfleet::common {

/// Host labels are key/value pairs describing a host (e.g. board=pi1, arch=arm64), set on the
/// agent with --label key=value and matched by policy selectors. The syntax follows Kubernetes
/// labels so the same habits apply.

/// A label key is an optional prefix and a name: "[prefix/]name".
///  - name: 1..63 characters of [A-Za-z0-9._-], starting and ending with [A-Za-z0-9];
///  - prefix: 1..253 characters, dot-separated DNS labels of [a-z0-9-] (e.g. "rxfleet.io").
/// Returns InvalidArgument naming the key and the rule it breaks.
absl::Status ValidateLabelKey(std::string_view key);

/// A label value is empty or 1..63 characters of [A-Za-z0-9._-], starting and ending with
/// [A-Za-z0-9]. Returns InvalidArgument naming the value and the rule it breaks.
absl::Status ValidateLabelValue(std::string_view value);

/// Parses a "key=value" flag (value may be empty: "key="); both sides are validated.
/// Returns InvalidArgument for a missing '=' or an invalid key or value.
absl::StatusOr<std::pair<std::string, std::string>> ParseLabelFlag(std::string_view flag);

}  // namespace rxfleet::common
