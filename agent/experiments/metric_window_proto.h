#pragma once

#include "agent/experiments/experiment_windows.h"
#include "rxfleet/v1/agent_service.pb.h"

namespace rxfleet::agent {

/// ExperimentWindow -> rxfleet.v1.MetricWindow: tags, traffic deltas (0 without traffic), RTT
/// summary with its cumulative histogram (+Inf as the largest double), probe counts, CPU ratios
/// (0 without two /proc/stat samples), validity and the observed register fields.
v1::MetricWindow MetricWindowToProto(const ExperimentWindow& window);

}  // namespace rxfleet::agent
