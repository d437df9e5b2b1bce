#pragma once

// Bounds on the operator-chosen metadata of policies and experiments (labels and annotations),
// checked at ApplyPolicy and CreateExperiment before anything is stored: every stored byte of
// a resource is returned by Get/List calls and must stay far below the message limit.
// docs/SECURITY.md lists them.

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "rxfleet/v1/common.pb.h"

namespace rxfleet::server {

inline constexpr size_t kMaxObjectLabels = 64;
inline constexpr size_t kMaxAnnotations = 64;
inline constexpr size_t kMaxAnnotationValueLength = 4096;
/// Keys and values of one object's annotations together.
inline constexpr size_t kMaxAnnotationBytes = 16 << 10;

/// OK if `meta` of `object` (e.g. "policy 'p1'") has at most 64 labels, each with a valid key
/// and value (common/host_labels.h), and at most 64 annotations with valid keys (the label key
/// rule), values of at most 4096 characters and at most 16384 bytes of keys and values in all.
/// InvalidArgument otherwise, naming the object, the field and the bound, e.g.
/// "policy 'p1': metadata.annotations: 65 entries, at most 64 allowed".
absl::Status ValidateObjectMetadata(std::string_view object, const v1::ObjectMeta& meta);

}  // namespace rxfleet::server
