#pragma once

// absl::Time / absl::Duration <-> google.protobuf.Timestamp / Duration.

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace rxfleet::common {

/// absl::Time -> Timestamp with nanosecond precision. absl::InfinitePast/InfiniteFuture and
/// times outside the Timestamp range (years 0001..9999) are clamped to that range.
google::protobuf::Timestamp TimeToProto(absl::Time time);

/// Timestamp -> absl::Time. An unset (all-zero) Timestamp yields absl::UnixEpoch().
absl::Time TimeFromProto(const google::protobuf::Timestamp& timestamp);

/// absl::Duration -> Duration (nanosecond precision; infinite durations clamp to +-10,000
/// years, the Duration range).
google::protobuf::Duration DurationToProto(absl::Duration duration);

/// Duration -> absl::Duration.
absl::Duration DurationFromProto(const google::protobuf::Duration& duration);

}  // namespace rxfleet::common
