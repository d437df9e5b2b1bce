#pragma once

// Guardrails: stop an arm in a segment when the data credibly shows it breaks a limit.
//
// A guardrail `metric op threshold` (e.g. rx_drop_ratio <= 0.05) states what must stay true.
// For every segment and every non-control arm not already stopped there, it is evaluated on
// the adapter-level values of that arm (aggregate.h) and trips only with enough evidence:
//  1. at least minAdapters adapters (guardrail's own, else minAdaptersPerArm) have a value;
//  2. at least minWindows valid windows (guardrail's own, else minWindowsPerArm) have a value;
//  3. the one-sided 95 % t confidence bound of the arm's mean lies beyond the threshold:
//     for "<=" the lower bound mean - t(0.95, n - 1) * se exceeds the threshold; for ">=" the
//     upper bound mean + t(0.95, n - 1) * se is below it.
// So a noisy or small segment never trips on a few bad windows, while an arm that is clearly
// harmful (the seed case: 85.7 % UDP loss with a 32 µs hold on a Pi 1 over USB 2) is stopped
// in that segment only. The control arm is never stopped: stopping means "send these adapters
// to control".

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"

namespace rxfleet::experiments {

/// StoppedArm::reason of guardrail stops.
inline constexpr std::string_view kReasonGuardrailTripped = "GuardrailTripped";

/// A decision to stop one arm in one segment.
struct GuardrailDecision {
  std::string arm;
  std::vector<std::string> segment;  ///< aligned with Experiment::segment_keys
  Metric metric = Metric::kRxDropRatio;
  GuardrailOp op = GuardrailOp::kAtMost;
  double threshold = 0;
  double observed = 0;  ///< mean of the adapter-level values
  double bound = 0;     ///< the one-sided 95 % bound that crossed the threshold
  size_t adapters = 0;
  uint64_t windows = 0;
  std::string reason = std::string(kReasonGuardrailTripped);
  /// e.g. "rx_drop_ratio 85.70 % (95 % lower bound 84.9 %) breaks <= 5.000 % over 4 adapters,
  /// 480 windows"
  std::string message;
};

/// Where one guardrail stands for one arm in one segment.
enum class GuardrailState : uint8_t {
  kNotEnoughData,  ///< fewer adapters or windows than the guardrail needs, or no bound
  kHolds,          ///< enough data and the one-sided bound does not cross the threshold
  kBreached,       ///< enough data and the bound crosses the threshold (rule 3 above)
};

/// The evaluation of one guardrail for one arm in one segment.
struct GuardrailCheck {
  GuardrailState state = GuardrailState::kNotEnoughData;
  double observed = 0;          ///< mean of the adapter-level values; 0 without values
  std::optional<double> bound;  ///< the one-sided 95 % bound, when it could be computed
  size_t adapters = 0;          ///< adapters with a value
  uint64_t windows = 0;         ///< valid windows with a value
};

/// Evaluates `guardrail` on arm `arm` of `segment` with rules 1-3 of the file comment (the
/// minima from `experiment`). Does not look at stops or at which arm is control.
/// Errors: InvalidArgument when `arm` is not an arm of the segment's data.
absl::StatusOr<GuardrailCheck> EvaluateGuardrail(const Experiment& experiment,
                                                 const SegmentData& segment, size_t arm,
                                                 const Guardrail& guardrail);

/// Evaluates every guardrail in every segment (see the file comment). Decisions come in
/// segment order, then arm order, then guardrail order; at most one decision per (arm,
/// segment): the first guardrail that trips. Pairs already in `stopped` (for that segment or
/// every segment) are skipped. Errors: InvalidArgument when the experiment is invalid.
absl::StatusOr<std::vector<GuardrailDecision>> EvaluateGuardrails(
    const Experiment& experiment, const Aggregate& aggregate, std::span<const StoppedArm> stopped);

/// Same from windows (AggregateWindows, then the above). Errors: those of AggregateWindows.
absl::StatusOr<std::vector<GuardrailDecision>> EvaluateGuardrails(
    const Experiment& experiment, absl::Time start, std::span<const Window> windows,
    std::span<const StoppedArm> stopped);

/// The StoppedArm to record for a decision taken at `time`.
StoppedArm ToStoppedArm(const GuardrailDecision& decision, absl::Time time);

}  // namespace rxfleet::experiments
