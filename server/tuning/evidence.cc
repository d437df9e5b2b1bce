#include "server/tuning/evidence.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "server/experiments/assignment.h"

namespace rxfleet::tuning {
namespace {

using common::ToAbslView;
using experiments::Experiment;
using experiments::Metric;

std::string SegmentJoin(const std::vector<std::string>& segment) {
  return absl::StrJoin(segment, absl::string_view("\x1f", 1));
}

std::string_view GuardrailStateName(experiments::GuardrailState state) {
  switch (state) {
    case experiments::GuardrailState::kHolds:
      return "holds";
    case experiments::GuardrailState::kBreached:
      return "breached";
    case experiments::GuardrailState::kNotEnoughData:
      break;
  }
  return "not enough data";
}

std::string Percent(double ratio) { return absl::StrFormat("%+.2f %%", ratio * 100); }

}  // namespace

int64_t WholePeriods(absl::Duration d, absl::Duration period) {
  absl::Duration remainder;
  return absl::IDivDuration(d, period, &remainder);
}

std::string HoldArmName(uint32_t hold_us) { return absl::StrCat("hold-", hold_us, "us"); }

absl::StatusOr<Experiment> ComparisonExperiment(const HoldTuning& t,
                                                const std::vector<std::string>& segment,
                                                uint32_t control_hold_us,
                                                std::span<const uint32_t> challengers_us,
                                                absl::Duration covered) {
  Experiment e;
  e.name = t.name;
  e.selector = t.selector;
  auto arm = [](uint32_t hold) {
    experiments::Arm a;
    a.name = HoldArmName(hold);
    a.settings.hold_us = hold;
    return a;
  };
  e.arms.push_back(arm(control_hold_us));
  for (uint32_t hold : challengers_us) e.arms.push_back(arm(hold));
  e.control_arm = e.arms.front().name;
  e.design = experiments::Design::kSwitchback;
  e.window_length = t.window_length;
  e.period_length = t.period_length;
  e.burn_in = t.burn_in;
  const int64_t periods = std::max<int64_t>(
      static_cast<int64_t>(e.arms.size()),
      WholePeriods(covered + t.period_length - absl::Nanoseconds(1), t.period_length));
  e.duration = t.period_length * periods;
  e.primary_metric = t.objective.metric;
  for (const experiments::Guardrail& g : t.guardrails) {
    if (g.metric != e.primary_metric &&
        std::find(e.secondary_metrics.begin(), e.secondary_metrics.end(), g.metric) ==
            e.secondary_metrics.end()) {
      e.secondary_metrics.push_back(g.metric);
    }
  }
  e.guardrails = t.guardrails;
  e.segment_keys = t.segment_keys;
  e.min_adapters_per_arm = t.min_adapters_per_arm;
  e.min_windows_per_arm = t.min_windows_per_arm;
  e.seed = experiments::StableHash64(SegmentJoin(segment));
  e.source = t.source;
  if (absl::Status s = experiments::ValidateExperiment(e); !s.ok()) return s;
  return e;
}

std::optional<experiments::AlwaysValidEstimate> AlwaysValidRelative(
    const experiments::DifferenceEstimate& estimate) {
  if (!estimate.relative || !(estimate.relative->std_error > 0)) return std::nullopt;
  const double tau = experiments::kMixtureRelativeEffect;
  absl::StatusOr<experiments::AlwaysValidEstimate> av = experiments::AlwaysValid(
      estimate.relative->value, estimate.relative->std_error * estimate.relative->std_error,
      tau * tau);
  if (!av.ok()) return std::nullopt;
  return *av;
}

bool ClearsMinEffect(Direction direction, const experiments::Interval& ci, double min_effect) {
  return direction == Direction::kMaximize ? ci.low >= min_effect : ci.high <= -min_effect;
}

absl::StatusOr<Evidence> ComputeEvidence(
    const HoldTuning& t, const std::vector<std::string>& segment, uint32_t incumbent_hold_us,
    std::span<const ChallengerInfo> challengers, absl::Time epoch_start, uint32_t first_period,
    uint32_t end_period, std::span<const experiments::Window> windows, absl::Time now) {
  std::vector<uint32_t> holds;
  for (const ChallengerInfo& c : challengers) holds.push_back(c.hold_us);
  absl::StatusOr<Experiment> e =
      ComparisonExperiment(t, segment, incumbent_hold_us, holds, t.period_length * end_period);
  if (!e.ok()) return e.status();
  std::vector<experiments::Window> used;
  for (const experiments::Window& w : windows) {
    if (w.segment == segment && w.period_index >= first_period && w.period_index < end_period) {
      used.push_back(w);
    }
  }
  absl::StatusOr<experiments::Aggregate> aggregate =
      experiments::AggregateWindows(*e, epoch_start, used);
  if (!aggregate.ok()) return aggregate.status();
  experiments::ReportOptions options;
  options.start = epoch_start;
  options.now = now;
  absl::StatusOr<experiments::Report> report =
      experiments::ComputeReportFromAggregate(*e, *aggregate, options);
  if (!report.ok()) return report.status();
  std::erase_if(report->notes, [](const experiments::ReportNote& n) {
    // Unbalanced by design; and a tuning decides only on always-valid statistics, so the
    // fixed-horizon peeking warning does not apply.
    return n.code == experiments::kNoteUnbalancedArms || n.code == experiments::kNotePeeking;
  });

  Evidence ev;
  ev.segment = segment;
  ev.incumbent_hold_us = incumbent_hold_us;
  ev.epoch_start = epoch_start;
  ev.first_period = first_period;
  ev.end_period = end_period;
  const experiments::SegmentData* sd = nullptr;
  for (const experiments::SegmentData& s : aggregate->segments) {
    if (s.values == segment) sd = &s;
  }
  const experiments::SegmentResult* sr = nullptr;
  for (const experiments::SegmentResult& s : report->segments) {
    if (s.values == segment) sr = &s;
  }
  const size_t objective = static_cast<size_t>(t.objective.metric);
  for (size_t i = 0; i < challengers.size(); ++i) {
    const size_t arm = i + 1;
    CandidateEvidence c;
    c.hold_us = challengers[i].hold_us;
    c.arm = e->arms[arm].name;
    c.status = challengers[i].status;
    c.message = challengers[i].message;
    if (sd != nullptr) {
      c.windows = sd->metric_windows[arm][objective];
      c.incumbent_windows = sd->metric_windows[0][objective];
      std::vector<double> treatment, control;
      sd->Pairs(arm, 0, t.objective.metric, &treatment, &control);
      c.pairs = treatment.size();
      for (const experiments::Guardrail& g : t.guardrails) {
        absl::StatusOr<experiments::GuardrailCheck> check =
            experiments::EvaluateGuardrail(*e, *sd, arm, g);
        if (!check.ok()) return check.status();
        c.guardrails.push_back({g, *check});
      }
    } else {
      for (const experiments::Guardrail& g : t.guardrails) c.guardrails.push_back({g, {}});
    }
    if (sr != nullptr) {
      for (const experiments::ArmResult& a : sr->arms) {
        if (a.metrics.empty()) continue;
        if (a.arm == c.arm) c.mean = a.metrics.front().estimate.mean;
        if (a.arm == e->control_arm) c.incumbent_mean = a.metrics.front().estimate.mean;
      }
      for (const experiments::Comparison& cmp : sr->comparisons) {
        if (cmp.arm != c.arm || cmp.metric != t.objective.metric) continue;
        c.estimate = cmp.estimate;
        c.conclusive = cmp.conclusive;
        if (cmp.estimate) c.always_valid_relative = AlwaysValidRelative(*cmp.estimate);
      }
    }
    ev.candidates.push_back(std::move(c));
  }
  ev.report = *std::move(report);
  return ev;
}

std::string RenderEvidenceText(const HoldTuning& t, const Evidence& ev) {
  const Metric m = t.objective.metric;
  std::string out = absl::StrCat(
      "segment ", experiments::FormatSegment(t.segment_keys, ev.segment), ", incumbent ",
      common::FormatHoldUs(ev.incumbent_hold_us), ", periods ", ev.first_period, "..",
      ev.end_period, " of the epoch starting ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", ev.epoch_start, absl::UTCTimeZone()), "\n");
  for (const CandidateEvidence& c : ev.candidates) {
    absl::StrAppend(&out, common::FormatHoldUs(c.hold_us), " [", c.status, "]: ", c.pairs,
                    " pairs, ", c.windows, " windows, mean ",
                    experiments::FormatMetricValue(m, c.mean), " vs ",
                    experiments::FormatMetricValue(m, c.incumbent_mean));
    if (c.estimate && c.estimate->relative) {
      absl::StrAppend(&out, ", relative ", Percent(c.estimate->relative->value));
    }
    if (c.always_valid_relative) {
      const experiments::AlwaysValidEstimate& av = *c.always_valid_relative;
      absl::StrAppend(&out, ", always-valid 95 % [", Percent(av.ci.low), ", ", Percent(av.ci.high),
                      "], p ", experiments::FormatPValue(av.p_value));
    }
    if (!c.conclusive) absl::StrAppend(&out, ", not conclusive");
    for (const GuardrailStatus& g : c.guardrails) {
      absl::StrAppend(&out, "; ", ToAbslView(experiments::MetricName(g.guardrail.metric)), " ",
                      ToAbslView(experiments::GuardrailOpSymbol(g.guardrail.op)), " ",
                      experiments::FormatMetricValue(g.guardrail.metric, g.guardrail.threshold),
                      ": ", ToAbslView(GuardrailStateName(g.check.state)));
    }
    if (!c.message.empty()) absl::StrAppend(&out, " (", c.message, ")");
    out.push_back('\n');
  }
  absl::StrAppend(&out, "\n", experiments::RenderReportText(ev.report, {.sequential = true}));
  return out;
}

}  // namespace rxfleet::tuning
