#include "common/proto/checked_duration.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

// The Duration range: +-315,576,000,000 s (about 10,000 years).
constexpr int64_t kMaxDurationSeconds = 315576000000;
constexpr int32_t kMaxNanos = 999999999;

}  // namespace

absl::StatusOr<absl::Duration> CheckedDurationFromProto(const google::protobuf::Duration& duration,
                                                        std::string_view field) {
  const int64_t seconds = duration.seconds();
  const int32_t nanos = duration.nanos();
  if (seconds > kMaxDurationSeconds || seconds < -kMaxDurationSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbslView(field), ": seconds ", seconds,
                                                   " is outside +-", kMaxDurationSeconds));
  }
  if (nanos > kMaxNanos || nanos < -kMaxNanos) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbslView(field), ": nanos ", nanos, " is outside +-", kMaxNanos));
  }
  if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbslView(field), ": seconds ", seconds,
                                                   " and nanos ", nanos, " have different signs"));
  }
  return DurationFromProto(duration);
}

}  // namespace rxfleet::common
