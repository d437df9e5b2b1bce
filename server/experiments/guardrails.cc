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

absl::StatusOr<std::vector<GuardrailDecision>> EvaluateGuardrails(
    const Experiment& e, const Aggregate& aggregate, std::span<const StoppedArm> stopped) {
  if (absl::Status s = ValidateExperiment(e); !s.ok()) return s;
  std::vector<GuardrailDecision> decisions;
  const size_t control = e.ControlIndex();
  for (const SegmentData& sd : aggregate.segments) {
    for (size_t arm = 0; arm < e.arms.size(); ++arm) {
      if (arm == control || IsStopped(stopped, e.arms[arm].name, sd.values)) continue;
      for (const Guardrail& g : e.guardrails) {
        const size_t m = static_cast<size_t>(g.metric);
        const std::vector<double> values = sd.Values(arm, g.metric);
        const uint64_t windows = sd.metric_windows[arm][m];
        if (values.size() < e.MinAdapters(g) || windows < e.MinWindows(g)) continue;
        absl::StatusOr<MeanEstimate> estimate = EstimateMean(values);
        if (!estimate.ok()) return estimate.status();
        const std::optional<double> bound = g.op == GuardrailOp::kAtMost
                                                ? LowerConfidenceBound(*estimate)
                                                : UpperConfidenceBound(*estimate);
        if (!bound) continue;
        const bool breached =
            g.op == GuardrailOp::kAtMost ? *bound > g.threshold : *bound < g.threshold;
        if (!breached) continue;
        GuardrailDecision d;
        d.arm = e.arms[arm].name;
        d.segment = sd.values;
        d.metric = g.metric;
        d.op = g.op;
        d.threshold = g.threshold;
        d.observed = estimate->mean;
        d.bound = *bound;
        d.adapters = values.size();
        d.windows = windows;
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
