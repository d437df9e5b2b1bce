#pragma once

// The statistics of hold tuning, on the experiments' machinery: a segment's holds are analysed
// as the arms of a switchback Experiment (ComparisonExperiment) whose control is the incumbent,
// so windows are aggregated to adapter-level values (aggregate.h), compared by the paired
// t-test and the mSPRT (stats.h), tabulated by the experiment report (report.h) and guarded by
// EvaluateGuardrail(s) (guardrails.h) exactly as in experiments.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/tuning/hold_tuning.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/guardrails.h"
#include "server/experiments/report.h"
#include "server/experiments/stats.h"

namespace rxfleet::tuning {

/// Whole `period`s in `d` (truncated toward zero); period > 0.
int64_t WholePeriods(absl::Duration d, absl::Duration period);

/// The arm name of a hold in windows and reports: 128 -> "hold-128us".
std::string HoldArmName(uint32_t hold_us);

/// The switchback experiment through which a segment's windows are read: arms
/// [control_hold_us, challengers_us...] named HoldArmName with weight 1 (control first); the
/// tuning's selector, windowLength, periodLength, burnIn, guardrails, segments and minima;
/// primary metric the objective, secondary metrics the guardrail metrics other than it; name
/// the tuning's and seed StableHash64 of the segment values (so segments switch independently).
/// duration = max(`covered` rounded up to whole periods, periodLength * arms), which must not
/// exceed 90 days. Errors: InvalidArgument when the result fails ValidateExperiment (e.g. a
/// challenger equal to the control or a duration over 90 days).
absl::StatusOr<experiments::Experiment> ComparisonExperiment(
    const HoldTuning& tuning, const std::vector<std::string>& segment, uint32_t control_hold_us,
    std::span<const uint32_t> challengers_us, absl::Duration covered);

/// The always-valid interval of a relative difference: the mSPRT of stats.h (AlwaysValid) on
/// the delta-method estimate `relative` with its variance std_error^2 and mixture variance
/// kMixtureRelativeEffect^2 (the relative analogue of the experiments' tau = 10 % of the control
/// mean), at 95 %. nullopt when the estimate has no relative part or no spread.
std::optional<experiments::AlwaysValidEstimate> AlwaysValidRelative(
    const experiments::DifferenceEstimate& estimate);

/// True when `relative_ci` lies entirely beyond min_effect in the objective's direction:
/// maximize: low >= min_effect; minimize: high <= -min_effect.
bool ClearsMinEffect(Direction direction, const experiments::Interval& relative_ci,
                     double min_effect);

/// One guardrail's state for one candidate.
struct GuardrailStatus {
  experiments::Guardrail guardrail;
  experiments::GuardrailCheck check;
};

/// One row of the comparison table: a challenger against the incumbent.
struct CandidateEvidence {
  uint32_t hold_us = 0;
  std::string arm;
  std::string status;    ///< CandidateStatusName of the planner (planner.h), or "" if unknown
  std::string message;   ///< why it was eliminated, if it was
  size_t pairs = 0;      ///< adapters with values on the challenger and the incumbent
  uint64_t windows = 0;  ///< valid challenger windows with an objective value
  uint64_t incumbent_windows = 0;  ///< valid incumbent windows with an objective value
  double mean = 0;                 ///< challenger mean of adapter-level values (0 if none)
  double incumbent_mean = 0;       ///< incumbent mean over the same report (0 if none)
  /// The paired comparison (report.h), when it could be computed.
  std::optional<experiments::DifferenceEstimate> estimate;
  bool conclusive = false;  ///< as the report's Comparison::conclusive
  /// AlwaysValidRelative(*estimate): interval and p of the relative difference.
  std::optional<experiments::AlwaysValidEstimate> always_valid_relative;
  std::vector<GuardrailStatus> guardrails;  ///< document order
};

/// Evidence on one segment: the comparison table and where its windows came from. The planner
/// fills each row from the windows paired with that challenger (planner_internal.h) and the
/// report from all windows.
struct Evidence {
  std::vector<std::string> segment;
  uint32_t incumbent_hold_us = 0;
  absl::Time epoch_start;
  uint32_t first_period = 0;  ///< the periods whose windows were used: [first, end)
  uint32_t end_period = 0;
  std::vector<CandidateEvidence> candidates;  ///< challenger order
  experiments::Report report;                 ///< the full table (RenderReportText)
};

/// A challenger as the evidence names it.
struct ChallengerInfo {
  uint32_t hold_us = 0;
  std::string status;
  std::string message;
};

/// Computes the evidence of `challengers` against `incumbent_hold_us` from the windows of
/// periods [first_period, end_period) of the epoch starting at `epoch_start` (other windows are
/// left out before aggregation), as of `now`. Windows of other segments are ignored. The
/// report's unbalanced-arms note is dropped: tuning is unbalanced by design (most adapters stay
/// on the incumbent). Errors: those of ComparisonExperiment and ComputeReportFromAggregate.
absl::StatusOr<Evidence> ComputeEvidence(
    const HoldTuning& tuning, const std::vector<std::string>& segment, uint32_t incumbent_hold_us,
    std::span<const ChallengerInfo> challengers, absl::Time epoch_start, uint32_t first_period,
    uint32_t end_period, std::span<const experiments::Window> windows, absl::Time now);

/// Plain-text evidence: a line per challenger (hold, status, pairs, windows, means, relative
/// difference with its always-valid interval and p, guardrail states) followed by the report's
/// rendering. Deterministic.
std::string RenderEvidenceText(const HoldTuning& tuning, const Evidence& evidence);

}  // namespace rxfleet::tuning
