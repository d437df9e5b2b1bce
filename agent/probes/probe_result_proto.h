#pragma once

// ProbeResult (agent/probes/probe_result.h) -> rxfleet.v1.ProbeResult, for MetricWindow.probe.

#include "agent/probes/probe_result.h"
#include "rxfleet/v1/probe.pb.h"

namespace rxfleet::agent {

/// Every field of `result`; failure_reason is ProbeFailureName (empty when ok), the spec goes
/// through common::ProbeSpecToProto.
v1::ProbeResult ProbeResultToProto(const ProbeResult& result);

}  // namespace rxfleet::agent
