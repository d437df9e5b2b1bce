#include "server/experiments/guardrails.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "server/experiments/stats.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

}  // namespace

absl::StatusOr<GuardrailCheck> EvaluateGuardrail(const Experiment& e, const SegmentData& sd,
                                                 size_t arm, const Guardrail& g) {
  if (arm >= sd.means.size() || arm >= sd.metric_windows.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arm index ", arm, " is not an arm of the segment's data (", sd.means.size(), " arms)"));
  }
  GuardrailCheck check;
  const std::vector<double> values = sd.Values(arm, g.metric);
  check.adapters = values.size();
  check.windows = sd.metric_windows[arm][static_cast<size_t>(g.metric)];
  if (check.adapters < e.MinAdapters(g) || check.windows < e.MinWindows(g)) return check;
  absl::StatusOr<MeanEstimate> estimate = EstimateMean(values);
  if (!estimate.ok()) return estimate.status();
  check.observed = estimate->mean;
  check.bound = g.op == GuardrailOp::kAtMost ? LowerConfidenceBound(*estimate)
                                             : UpperConfidenceBound(*estimate);
  if (!check.bound) return check;
  const bool breached =
      g.op == GuardrailOp::kAtMost ? *check.bound > g.threshold : *check.bound < g.threshold;
  check.state = breached ? GuardrailState::kBreached : GuardrailState::kHolds;
  return check;
}

absl::StatusOr<std::vector<GuardrailDecision>> EvaluateGuardrails(
    const Experiment& e, const Aggregate& aggregate, std::span<const StoppedArm> stopped) {
  if (absl::Status s = ValidateExperiment(e); !s.ok()) return s;
  std::vector<GuardrailDecision> decisions;
  const size_t control = e.ControlIndex();
  for (const SegmentData& sd : aggregate.segments) {
    for (size_t arm = 0; arm < e.arms.size(); ++arm) {
      if (arm == control || IsStopped(stopped, e.arms[arm].name, sd.values)) continue;
      for (const Guardrail& g : e.guardrails) {
        absl::StatusOr<GuardrailCheck> check = EvaluateGuardrail(e, sd, arm, g);
        if (!check.ok()) return check.status();
        if (check->state != GuardrailState::kBreached) continue;
        GuardrailDecision d;
        d.arm = e.arms[arm].name;
        d.segment = sd.values;
        d.metric = g.metric;
        d.op = g.op;
        d.threshold = g.threshold;
        d.observed = check->observed;
        d.bound = *check->bound;
        d.adapters = check->adapters;
        d.windows = check->windows;
        d.message = absl::StrCat(
            ToAbslView(MetricName(g.metric)), " ", FormatMetricValue(g.metric, d.observed),
            " (95 % ", g.op == GuardrailOp::kAtMost ? "lower" : "upper", " bound ",
            FormatMetricValue(g.metric, d.bound), ") breaks ", ToAbslView(GuardrailOpSymbol(g.op)),
            " ", FormatMetricValue(g.metric, g.threshold), " over ", d.adapters, " adapters, ",
            d.windows, " windows");
        decisions.push_back(std::move(d));
        break;  // One decision per (arm, segment).
      }
    }
  }
  return decisions;
}

absl::StatusOr<std::vector<GuardrailDecision>> EvaluateGuardrails(
    const Experiment& experiment, absl::Time start, std::span<const Window> windows,
    std::span<const StoppedArm> stopped) {
  absl::StatusOr<Aggregate> aggregate = AggregateWindows(experiment, start, windows);
  if (!aggregate.ok()) return aggregate.status();
  return EvaluateGuardrails(experiment, *aggregate, stopped);
}

StoppedArm ToStoppedArm(const GuardrailDecision& decision, absl::Time time) {
  return StoppedArm{decision.arm, decision.segment, decision.reason, decision.message, time};
}

}  // namespace rxfleet::experiments
