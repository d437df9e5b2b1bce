#pragma once

// v1::ProbeSpec <-> common::ProbeSpec (common/probe/probe_spec.h), for the server (policies and
// experiments it accepts), the agent (bundles it runs) and rxfleetctl.

#include <string_view>

#include "absl/status/statusor.h"
#include "common/probe/probe_spec.h"
#include "rxfleet/v1/probe.pb.h"

namespace rxfleet::common {

/// v1::ProbeSpec -> validated ProbeSpec with defaults applied (UNSPECIFIED protocol = TCP,
/// UNSPECIFIED direction = REVERSE, 0 streams = 1, unset duration = 10 s, unset interval =
/// 1 h). Errors: InvalidArgument starting with `field` (e.g. "spec.probe") for an enum value
/// outside the API, a malformed Duration (CheckedDurationFromProto) or any ValidateProbeSpec
/// failure.
absl::StatusOr<ProbeSpec> ProbeSpecFromProto(const v1::ProbeSpec& proto, std::string_view field);

/// ProbeSpec -> v1::ProbeSpec with every field written explicitly (enums, streams, duration,
/// interval), so ProbeSpecFromProto(ProbeSpecToProto(s)) == s.
v1::ProbeSpec ProbeSpecToProto(const ProbeSpec& spec);

}  // namespace rxfleet::common
