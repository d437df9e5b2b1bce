// HoldTuning rules (CheckHoldTuning). Rules on fields the Experiment document shares are the
// experiment's own (common/experiment/experiment_rules.h).

#include "common/tuning/hold_tuning_rules.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/host_labels.h"
#include "common/policy/document_reader.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "common/validation.h"

namespace rxfleet::tuning {
namespace {

using common::ToAbslView;
using experiments::CheckResult;
using experiments::FieldError;
using experiments::Metric;

CheckResult Fail(std::string field, std::string message) {
  return FieldError{std::move(field), std::move(message)};
}

CheckResult NoProbeMetric(Metric metric, std::string field) {
  if (!experiments::IsProbeMetric(metric)) return std::nullopt;
  return Fail(std::move(field),
              absl::StrCat(ToAbslView(experiments::MetricName(metric)),
                           " is measured by an active probe, which hold tuning does not run; use "
                           "an Experiment with spec.probe"));
}

}  // namespace

CheckResult CheckHoldTuning(const HoldTuning& t) {
  if (absl::Status s = common::CheckObjectName("name", t.name); !s.ok()) {
    return Fail("metadata.name", std::string(s.message()));
  }
  for (const auto& [key, value] : t.labels) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
      return Fail("metadata.labels", std::string(s.message()));
    }
    if (absl::Status s = common::ValidateLabelValue(value); !s.ok()) {
      return Fail(absl::StrCat("metadata.labels.", key), std::string(s.message()));
    }
  }
  if (std::optional<common::FieldProblem> p =
          common::FindSelectorProblem(t.selector, "spec.selector")) {
    return Fail(std::move(p->field), std::move(p->message));
  }
  if (CheckResult p = experiments::CheckSegmentKeys(t.segment_keys, /*host_allowed=*/false)) {
    return p;
  }
  for (size_t i = 0; i < t.segment_keys.size(); ++i) {
    if (t.segment_keys[i] != experiments::kSegmentHost) continue;
    return Fail(absl::StrCat("spec.segments[", i, "]"),
                "`host` cannot be a tuning segment: a proposal becomes a policy, and policies "
                "select hosts by their labels, not by host id; give the hosts a label and "
                "segment by it");
  }

  if (t.candidates_us.size() < kMinCandidates || t.candidates_us.size() > kMaxCandidates) {
    return Fail("spec.candidates",
                absl::StrCat("needs 2..16 holds, found ", t.candidates_us.size()));
  }
  for (size_t i = 0; i < t.candidates_us.size(); ++i) {
    const std::string path = absl::StrCat("spec.candidates[", i, "]");
    const uint32_t hold = t.candidates_us[i];
    common::RxAggSettings settings;
    settings.hold_us = hold;
    if (absl::Status s = common::CheckSettingsForSelector(settings, t.selector); !s.ok()) {
      return Fail(path, std::string(s.message()));
    }
    for (size_t j = 0; j < i; ++j) {
      if (t.candidates_us[j] == hold) {
        return Fail(path, absl::StrCat("duplicate hold ", common::FormatHoldYaml(hold),
                                       " (also spec.candidates[", j, "])"));
      }
    }
  }

  const Metric objective = t.objective.metric;
  if (CheckResult p = NoProbeMetric(objective, "spec.objective.metric")) return p;
  const Direction natural =
      experiments::HigherIsBetter(objective) ? Direction::kMaximize : Direction::kMinimize;
  if (t.objective.direction != natural) {
    return Fail("spec.objective.direction",
                absl::StrCat(ToAbslView(experiments::MetricName(objective)), " is better when ",
                             natural == Direction::kMaximize ? "higher" : "lower", "; direction ",
                             ToAbslView(DirectionName(t.objective.direction)),
                             " would seek the worst hold"));
  }

  if (CheckResult p = experiments::CheckGuardrails(t.guardrails)) return p;
  for (size_t i = 0; i < t.guardrails.size(); ++i) {
    if (CheckResult p = NoProbeMetric(t.guardrails[i].metric,
                                      absl::StrCat("spec.guardrails[", i, "].metric"))) {
      return p;
    }
  }

  const double share = t.budget.adapter_share;
  if (!(share > 0 && share <= kMaxAdapterShare)) {
    return Fail("spec.budget.adapterShare",
                absl::StrCat("adapterShare ", share,
                             " must lie in (0, 0.5]: at least half of a segment keeps its hold"));
  }
  if (!(t.min_effect > 0 && t.min_effect < 1)) {
    return Fail("spec.minEffect", absl::StrCat("minEffect ", t.min_effect,
                                               " must lie in (0, 1) (a relative change: 0.02 "
                                               "= 2 %)"));
  }
  if (CheckResult p = experiments::CheckWindowLength(t.window_length)) return p;
  if (CheckResult p = experiments::CheckBurnIn(t.burn_in)) return p;
  if (CheckResult p =
          experiments::CheckSwitchbackPeriod(t.window_length, t.period_length, t.burn_in)) {
    return p;
  }
  if (t.period_length > kMaxTuningPeriodLength) {
    return Fail("spec.periodLength",
                absl::StrCat("periodLength ", absl::FormatDuration(t.period_length),
                             " exceeds the limit of 24h"));
  }
  if (!(t.recheck_share >= 0 && t.recheck_share <= kMaxAdapterShare)) {
    return Fail("spec.recheckShare",
                absl::StrCat("recheckShare ", t.recheck_share, " must lie in [0, 0.5]"));
  }
  if (CheckResult p =
          experiments::CheckArmMinimums(t.min_adapters_per_arm, t.min_windows_per_arm)) {
    return p;
  }
  const uint64_t min_windows = MinExplorationWindows(t);
  if (t.budget.max_windows < min_windows || t.budget.max_windows > kMaxExplorationWindows) {
    return Fail(
        "spec.budget.maxWindows",
        absl::StrCat("maxWindows ", t.budget.max_windows, " must lie in ", min_windows, "..",
                     kMaxExplorationWindows, ": ", ExplorationRounds(t.candidates_us.size()),
                     " rounds x ", t.candidates_us.size(), " candidates x ", t.min_adapters_per_arm,
                     " adapters (minAdaptersPerArm) x ", t.WindowsPerPeriod(),
                     " windows per period, so every candidate can be compared in "
                     "every round"));
  }
  return std::nullopt;
}

}  // namespace rxfleet::tuning
