#pragma once

// The experiment layer of precedence as the server predicts it (common/policy/precedence.h):
// which running experiment's arm is in effect on an adapter now. Every server path that
// predicts an effect (ExplainAdapter, apply and delete reports and dry runs, policy statuses,
// promotion) resolves against it, so a prediction agrees with what the agent will apply.

#include <optional>
#include <string_view>
#include <vector>

#include "common/policy/policy.h"
#include "common/policy/precedence.h"
#include "common/policy/selectors.h"
#include "common/proto/convert.h"
#include "rxfleet/v1/agent_service.pb.h"

namespace rxfleet::server {

class ExperimentLayer {
 public:
  virtual ~ExperimentLayer() = default;

  /// The assignment of `adapter` now if the server's policies were `policies`: the oldest
  /// running experiment whose selector matches it and from which no policy keeps it
  /// (common::FieldsKeptFromExperiment), skipping experiment `ended` (empty: none), which is
  /// predicted as already over. Nullopt when no experiment takes the adapter.
  virtual std::optional<v1::ExperimentAssignment> AssignmentFor(
      const common::AdapterAttributes& adapter, const std::vector<common::Policy>& policies,
      std::string_view ended = {}) const = 0;

  /// The same as the experiment layer's entries (empty or one arm).
  std::vector<common::ArmInEffect> ArmsFor(const common::AdapterAttributes& adapter,
                                           const std::vector<common::Policy>& policies,
                                           std::string_view ended = {}) const {
    std::vector<common::ArmInEffect> out;
    if (std::optional<v1::ExperimentAssignment> a = AssignmentFor(adapter, policies, ended)) {
      out.push_back(ArmOf(*a));
    }
    return out;
  }

  /// An assignment as the experiment-layer entry it becomes.
  static common::ArmInEffect ArmOf(const v1::ExperimentAssignment& assignment) {
    return {assignment.experiment(), assignment.arm(), assignment.priority(),
            common::RxAggSettingsFromProto(assignment.settings())};
  }
};

}  // namespace rxfleet::server
