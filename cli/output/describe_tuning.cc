// `rxfleetctl tune describe`: a hold tuning's spec, status and, per segment, its round,
// candidates, proposal with the confirmation row, comparison table and evidence text.

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/output/describe.h"
#include "cli/output/describe_internal.h"
#include "cli/output/format.h"
#include "cli/output/resources.h"
#include "cli/output/table.h"
#include "common/experiment/metric.h"
#include "common/units.h"

namespace rxfleet::cli {

using describe_internal::Field;
using describe_internal::PrintConditions;
using describe_internal::PrintGuardrails;
using describe_internal::PrintMetadata;
using describe_internal::PrintSelector;
using describe_internal::YesNo;

namespace {

// A value of the tuning's objective metric: its unit when the metric is known, else %g.
std::string ObjectiveValue(const std::optional<experiments::Metric>& metric, double value) {
  if (metric) return experiments::FormatMetricValue(*metric, value);
  return absl::StrFormat("%g", value);
}

std::string Percent(double ratio) {
  if (!std::isfinite(ratio)) return "n/a";
  return absl::StrFormat("%+.2f %%", ratio * 100);
}

std::string Interval(double low, double high) {
  return absl::StrCat("[", Percent(low), ", ", Percent(high), "]");
}

// PAIRS .. P of one comparison: the columns of the proposal's confirmation row and of the
// comparison table.
std::vector<std::string> ComparisonCells(const v1::HoldTuningComparison& c,
                                         const std::optional<experiments::Metric>& metric) {
  return {absl::StrCat(c.pairs()),
          absl::StrCat(c.windows(), "/", c.incumbent_windows()),
          ObjectiveValue(metric, c.mean()),
          ObjectiveValue(metric, c.incumbent_mean()),
          Percent(c.relative_diff()),
          Interval(c.always_valid_ci95_low(), c.always_valid_ci95_high()),
          experiments::FormatPValue(c.always_valid_p_value())};
}

const std::vector<std::string>& ComparisonHeader() {
  static const std::vector<std::string> header = {
      "PAIRS", "WINDOWS", "MEAN", "INCUMBENT", "DIFF", "ALWAYS-VALID 95% CI", "P"};
  return header;
}

void PrintTuningSegment(const v1::HoldTuningSpec& spec, const v1::HoldTuningSegment& segment,
                        const std::optional<experiments::Metric>& metric, absl::Time now,
                        std::ostream& out) {
  out << "  Segment " << FormatSegmentValues(spec.segment_label_keys(), segment.segment()) << ":\n";
  Field(out, "    Phase",
        segment.reason().empty()
            ? OrNone(segment.phase())
            : absl::StrCat(OrNone(segment.phase()), " (", segment.reason(), ")"));
  Field(out, "    Message", OrNone(segment.message()));
  Field(out, "    Since", FormatTimeWithAge(segment.last_transition_time(), now));
  Field(out, "    Incumbent hold", common::FormatHoldUs(segment.incumbent_hold_us()));
  if (segment.has_previous_hold_us()) {
    Field(out, "    Previous hold", common::FormatHoldUs(segment.previous_hold_us()));
  }
  Field(out, "    Exploration", absl::StrCat(segment.exploration()));
  Field(out, "    Round",
        segment.round() == 0
            ? "-"
            : absl::StrCat(segment.round(), segment.confirmation() ? " (confirmation)" : ""));
  Field(out, "    Windows",
        absl::StrCat(segment.committed_windows(), " of ", segment.budget_windows(), " committed"));
  if (segment.has_exploration_ends_by()) {
    Field(out, "    Decides by", FormatTimeWithAge(segment.exploration_ends_by(), now));
  }
  Field(out, "    Adapters",
        absl::StrCat(segment.adapters(), " (", segment.explorers(), " exploring per block)"));
  if (segment.candidates().empty()) {
    Field(out, "    Candidates", "<none>");
  } else {
    out << "    Candidates:\n";
    Table candidates({"HOLD", "STATUS", "LAST ROUND", "MESSAGE"});
    for (const auto& c : segment.candidates()) {
      candidates.AddRow({common::FormatHoldUs(c.hold_us()), OrNone(c.status()),
                         c.last_round() == 0 ? "-" : absl::StrCat(c.last_round()), c.message()});
    }
    candidates.Print(out, "      ");
  }
  if (!segment.has_proposal()) {
    Field(out, "    Proposal", "<none>");
  } else {
    const v1::HoldTuningProposal& proposal = segment.proposal();
    out << "    Proposal:\n";
    Field(out, "      Hold",
          absl::StrCat(common::FormatHoldUs(proposal.hold_us()), " (incumbent ",
                       common::FormatHoldUs(proposal.incumbent_hold_us()), ")"));
    Field(out, "      Policy", OrNone(proposal.policy_name()));
    Field(out, "      Proposed", FormatTimeWithAge(proposal.time(), now));
    if (proposal.has_confirmation()) {
      out << "      Confirmation:\n";
      Table confirmation(ComparisonHeader());
      confirmation.AddRow(ComparisonCells(proposal.confirmation(), metric));
      confirmation.Print(out, "        ");
    } else {
      Field(out, "      Confirmation", "<none>");
    }
  }
  if (segment.comparisons().empty()) {
    Field(out, "    Comparisons", "<none>");
  } else {
    out << "    Comparisons:\n";
    std::vector<std::string> header = {"HOLD", "STATUS"};
    header.insert(header.end(), ComparisonHeader().begin(), ComparisonHeader().end());
    header.push_back("GUARDRAILS");
    Table comparisons(std::move(header));
    for (const auto& c : segment.comparisons()) {
      std::vector<std::string> row = {common::FormatHoldUs(c.hold_us()), OrNone(c.status())};
      for (std::string& cell : ComparisonCells(c, metric)) row.push_back(std::move(cell));
      row.push_back(c.guardrails().empty() ? "-" : absl::StrJoin(c.guardrails(), "; "));
      comparisons.AddRow(std::move(row));
    }
    comparisons.Print(out, "      ");
  }
  Field(out, "    Applied policy", OrNone(segment.applied_policy()));
}

}  // namespace

void DescribeHoldTuning(const v1::HoldTuning& tuning, absl::Time now, std::ostream& out) {
  const auto& meta = tuning.metadata();
  const auto& spec = tuning.spec();
  const auto& status = tuning.status();
  PrintMetadata(meta, now, out);
  Field(out, "Resource version", OrNone(meta.resource_version()));
  Field(out, "Generation", absl::StrCat(meta.generation()));
  Field(out, "Phase", HoldTuningPhaseWord(status.phase()));
  Field(out, "Started", FormatTimeWithAge(status.start_time(), now));
  if (status.has_end_time()) Field(out, "Ended", FormatTimeWithAge(status.end_time(), now));
  out << "Spec:\n";
  Field(out, "  Candidates", FormatHolds(spec.candidate_hold_us()));
  Field(out, "  Objective", FormatObjective(spec));
  Field(
      out, "  Segments by",
      spec.segment_label_keys().empty() ? "<none>" : absl::StrJoin(spec.segment_label_keys(), ","));
  Field(out, "  Adapter share", absl::StrFormat("%g", spec.adapter_share()));
  Field(out, "  Max windows", absl::StrCat(spec.max_windows(), " per segment and exploration"));
  Field(out, "  Min effect", absl::StrFormat("%g %%", spec.min_effect() * 100));
  Field(out, "  Window", FormatProtoDuration(spec.window_length()));
  Field(out, "  Period", FormatProtoDuration(spec.period_length()));
  Field(out, "  Burn-in", FormatProtoDuration(spec.burn_in()));
  Field(out, "  Auto apply", YesNo(spec.auto_apply()));
  Field(out, "  Recheck share", absl::StrFormat("%g", spec.recheck_share()));
  Field(out, "  Min adapters/arm", absl::StrCat(spec.min_adapters_per_arm()));
  Field(out, "  Min windows/arm", absl::StrCat(spec.min_windows_per_arm()));
  PrintSelector(spec.selector(), out);
  PrintGuardrails(spec.guardrails(), out);
  out << "Status:\n";
  Field(out, "  Assigned adapters", absl::StrCat(status.assigned_adapters()));
  Field(out, "  Valid windows", absl::StrCat(status.valid_windows()));
  Field(out, "  Generation seen", absl::StrCat(status.observed_generation()));
  PrintConditions(status.conditions(), now, out);
  std::optional<experiments::Metric> metric;
  if (auto parsed = experiments::ParseMetric(spec.objective_metric()); parsed.ok()) {
    metric = *parsed;
  }
  if (status.segments().empty()) {
    Field(out, "Segments", "<none>");
    return;
  }
  out << "Segments:\n";
  for (const auto& segment : status.segments()) PrintTuningSegment(spec, segment, metric, now, out);
  // The server's experiment-style report of each segment, as it rendered it.
  for (const auto& segment : status.segments()) {
    if (segment.evidence_text().empty()) continue;
    out << "Evidence, segment " << FormatSegmentValues(spec.segment_label_keys(), segment.segment())
        << ":\n";
    out << segment.evidence_text();
    if (segment.evidence_text().back() != '\n') out << '\n';
  }
}

}  // namespace rxfleet::cli
