#pragma once

// google.protobuf.Duration values from the network, checked before use (common/proto/time.h
// converts values this program produced, without checks).

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"

namespace rxfleet::common {

/// Duration -> absl::Duration for values from clients and agents: InvalidArgument naming
/// `field` unless the value is a valid google.protobuf.Duration — nanos in
/// [-999999999, 999999999] with the sign of seconds (a value such as {seconds: 1, nanos:
/// -500000000} is refused, not folded into 0.5 s) and seconds within +-315,576,000,000.
absl::StatusOr<absl::Duration> CheckedDurationFromProto(const google::protobuf::Duration& duration,
                                                        std::string_view field);

}  // namespace rxfleet::common
