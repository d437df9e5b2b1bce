#pragma once

// Promotion: turn an experiment arm's settings into an ordinary server policy, for the whole
// experiment selector or for one segment of it (rxfleet.v1.PromoteExperimentRequest).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/experiment/experiment.h"
#include "common/policy/policy.h"

namespace rxfleet::experiments {

/// Label keys promotion puts on the policy so its origin stays visible.
inline constexpr std::string_view kPromotedFromExperimentLabel = "rxfleet.io/experiment";
inline constexpr std::string_view kPromotedFromArmLabel = "rxfleet.io/arm";

/// What to promote.
struct PromotionRequest {
  std::string arm;
  /// Segment values aligned with Experiment::segment_keys; nullopt for a key not named (the
  /// policy does not narrow by it); empty = the whole selector.
  std::vector<std::optional<std::string>> segment;
  /// Policy name; empty = "<experiment>-<arm>".
  std::string policy_name;
  /// Policy priority; unset = the experiment's priority.
  std::optional<int> priority;
};

/// The policy that applies `request.arm`'s settings where the experiment (or the segment)
/// applied. Each named segment key narrows the experiment's selector: usb_speed -> usbSpeeds =
/// {value}, chip -> chips = {value}, any other key -> matchLabels[key] = value; a key left
/// unnamed keeps the selector as it is for that key. The policy carries the
/// labels rxfleet.io/experiment and rxfleet.io/arm.
/// Errors (InvalidArgument): unknown arm; a segment with the wrong number of values; a
/// segment on `host` (policies cannot select hosts) or with an empty value (hosts without the
/// label cannot be selected); a segment value outside the experiment's selector; and every
/// ValidatePolicy failure (e.g. a default name longer than 63 characters).
absl::StatusOr<common::Policy> BuildPromotionPolicy(const Experiment& experiment,
                                                    const PromotionRequest& request);

}  // namespace rxfleet::experiments
