#include "common/proto/time.h"

#include <algorithm>
#include <cstdint>

namespace rxfleet::common {
namespace {

// Timestamp range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z.
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;
// Duration range: +-315,576,000,000 s (about 10,000 years).
constexpr int64_t kMaxDurationSeconds = 315576000000;

}  // namespace

google::protobuf::Timestamp TimeToProto(absl::Time time) {
  google::protobuf::Timestamp out;
  const absl::Time min = absl::FromUnixSeconds(kMinTimestampSeconds);
  const absl::Time max = absl::FromUnixSeconds(kMaxTimestampSeconds) + absl::Nanoseconds(999999999);
  time = std::clamp(time, min, max);
  const int64_t seconds = absl::ToUnixSeconds(time);  // rounds towards negative infinity
  out.set_seconds(seconds);
  out.set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return out;
}

absl::Time TimeFromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

google::protobuf::Duration DurationToProto(absl::Duration duration) {
  google::protobuf::Duration out;
  const absl::Duration max = absl::Seconds(kMaxDurationSeconds);
  duration = std::clamp(duration, -max, max);
  const int64_t seconds = absl::IDivDuration(duration, absl::Seconds(1), &duration);
  out.set_seconds(seconds);
  // The remainder has the sign of the input, as Duration requires.
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(duration)));
  return out;
}

absl::Duration DurationFromProto(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
}

}  // namespace rxfleet::common
