#pragma once

// A guard for yaml-cpp's YAML::LoadAll on untrusted text. yaml-cpp 0.7 (Debian 12) can loop
// forever in LoadAll on some malformed input, appending an empty document per iteration until
// memory runs out (upstream jbeder/yaml-cpp#1319, fixed after 0.8; found here by
// tests/fuzz/policy_yaml). Counting documents with the event parser first stops at a limit.

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::common {

/// Walks `text` with YAML::Parser and a no-op event handler, counting documents. Returns
/// InvalidArgument "SOURCE: documents exceed the limit of MAX ..." as soon as the count exceeds
/// `max_documents`; OK otherwise, including for malformed YAML (the caller's LoadAll then
/// reports the error with its position). Call before YAML::LoadAll.
absl::Status CheckYamlDocumentCount(std::string_view text, size_t max_documents,
                                    std::string_view source_name);

}  // namespace rxfleet::common
