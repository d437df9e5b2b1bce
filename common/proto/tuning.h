#pragma once

// Conversions between the HoldTuning document (common/tuning/hold_tuning.h) and the v1 API
// (proto/rxfleet/v1/tuning.proto), shared by rxfleet-server and rxfleetctl.

#include <string_view>

#include "absl/status/statusor.h"
#include "common/tuning/hold_tuning.h"
#include "rxfleet/v1/tuning.pb.h"

namespace rxfleet::tuning {

/// The spec of a tuning: every field explicit (durations as google.protobuf.Duration, holds
/// in µs, the objective metric by its API name).
v1::HoldTuningSpec HoldTuningSpecToProto(const HoldTuning& tuning);

/// metadata (name, labels, resource_version) and spec; status left empty.
v1::HoldTuning HoldTuningToProto(const HoldTuning& tuning);

/// Reads and validates a v1::HoldTuning (metadata and spec; status ignored) with the rules of
/// ValidateHoldTuning; `source` names it in messages (e.g. "request"). Every field is taken as
/// given: proto3 cannot tell an unset number from 0, so there are no defaults here (rxfleetctl
/// sends the document's defaults explicitly) and e.g. adapter_share 0 is refused. Errors:
/// InvalidArgument "hold tuning 'name': spec.field: message" (unknown metric or direction,
/// negative or unrepresentable durations, every ValidateHoldTuning rule).
absl::StatusOr<HoldTuning> HoldTuningFromProto(const v1::HoldTuning& tuning,
                                               std::string_view source);

}  // namespace rxfleet::tuning
