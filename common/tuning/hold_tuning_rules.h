#pragma once

// The rules of a HoldTuning document, shared by the parser (which adds positions) and
// ValidateHoldTuning. Internal to rxfleet_common_tuning.

#include "common/experiment/experiment_rules.h"
#include "common/tuning/hold_tuning.h"

namespace rxfleet::tuning {

/// Every rule of the document in document order (maxWindows' minimum last); the first broken
/// rule, or nullopt.
experiments::CheckResult CheckHoldTuning(const HoldTuning& tuning);

}  // namespace rxfleet::tuning
