#pragma once

// Helpers shared by the files of ExperimentController (controller.h); not part of its API.

#include <string>
#include <vector>

#include "common/experiment/experiment.h"
#include "common/policy/policy.h"
#include "common/policy/precedence.h"
#include "common/policy/selectors.h"
#include "rxfleet/v1/experiment.pb.h"

namespace rxfleet::server::controller_internal {

/// "pending", "running", "completed", "stopped", "unspecified".
std::string PhaseName(v1::ExperimentPhase phase);

/// "board=pi1,usb_speed=high" for segment values aligned with e.segment_keys; "*" for none.
std::string SegmentLabel(const experiments::Experiment& e, const std::vector<std::string>& values);

/// The fields server `policies` keep from experiment `e` on `adapter`, over every arm of `e`
/// (common::FieldsKeptFromExperiment); empty: the adapter is eligible.
std::vector<common::KeptField> KeptFrom(const experiments::Experiment& e,
                                        const common::AdapterAttributes& adapter,
                                        const std::vector<common::Policy>& policies);

}  // namespace rxfleet::server::controller_internal
