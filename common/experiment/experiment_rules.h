#pragma once

// The rules of an Experiment document, shared by the parser (which adds positions) and
// ValidateExperiment (common/experiment/experiment.cc). Internal to rxfleet_common_experiment.

#include <optional>
#include <string>

#include "common/experiment/experiment.h"

namespace rxfleet::experiments {

/// A rule broken by an experiment: the field path ("spec.arms[1].weight") and the message.
struct FieldError {
  std::string field;
  std::string message;
};

using CheckResult = std::optional<FieldError>;

/// Every rule of the document, in document order; the first broken rule, or nullopt.
CheckResult CheckExperiment(const Experiment& e);

}  // namespace rxfleet::experiments
