#include "server/experiments/report.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/string_view_compat.h"
#include "common/units.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

std::string SettingsSummary(const common::RxAggSettings& s) {
  std::vector<std::string> parts;
  if (s.hold_us) parts.push_back(absl::StrCat("hold ", common::FormatHoldUs(*s.hold_us)));
  if (s.count_threshold) parts.push_back(absl::StrCat("count ", *s.count_threshold));
  if (s.buffer_kib) parts.push_back(absl::StrCat("buffer ", *s.buffer_kib, " KiB"));
  if (s.enable) parts.push_back(*s.enable ? "enabled" : "disabled");
  if (s.force_enable) parts.push_back("forced");
  return absl::StrJoin(parts, ", ");
}

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", t, absl::UTCTimeZone());
}

std::string Plural(uint64_t n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

// The order arms are shown in: control first, then the others in document order.
std::vector<size_t> ArmOrder(const Experiment& e) {
  const size_t control = e.ControlIndex();
  std::vector<size_t> order = {control};
  for (size_t a = 0; a < e.arms.size(); ++a) {
    if (a != control) order.push_back(a);
  }
  return order;
}

// Compares one treatment arm with control for one metric in one segment.
absl::StatusOr<Comparison> Compare(const Experiment& e, const SegmentData& sd, size_t arm,
                                   size_t control, Metric metric) {
  Comparison c;
  c.arm = e.arms[arm].name;
  c.control_arm = e.arms[control].name;
  c.metric = metric;
  absl::StatusOr<DifferenceEstimate> estimate;
  if (e.design == Design::kParallel) {
    c.method = TestMethod::kWelch;
    const std::vector<double> t = sd.Values(arm, metric);
    const std::vector<double> k = sd.Values(control, metric);
    c.treatment_units = t.size();
    c.control_units = k.size();
    estimate = WelchTTest(t, k);
  } else {
    c.method = TestMethod::kPaired;
    std::vector<double> t, k;
    sd.Pairs(arm, control, metric, &t, &k);
    c.treatment_units = c.control_units = t.size();
    estimate = PairedTTest(t, k);
  }
  const size_t m = static_cast<size_t>(metric);
  if (!estimate.ok()) {
    if (estimate.status().code() != absl::StatusCode::kFailedPrecondition) {
      return estimate.status();
    }
    c.not_enough_data =
        std::string(absl::StripPrefix(estimate.status().message(), "not enough data: "));
    return c;
  }
  c.estimate = *std::move(estimate);
  const size_t units = std::min(c.treatment_units, c.control_units);
  const uint64_t windows = std::min(sd.metric_windows[arm][m], sd.metric_windows[control][m]);
  if (units < e.min_adapters_per_arm) {
    c.not_enough_data = absl::StrCat(
        e.design == Design::kParallel ? "adapters per arm " : "adapters that ran both arms ", units,
        " < minAdaptersPerArm ", e.min_adapters_per_arm);
  } else if (windows < e.min_windows_per_arm) {
    c.not_enough_data = absl::StrCat("valid windows on an arm ", windows, " < minWindowsPerArm ",
                                     e.min_windows_per_arm);
  } else {
    c.conclusive = true;
  }
  return c;
}

// One note per (segment, treatment arm) listing the metrics without a conclusive comparison,
// grouped by reason.
void AddNotEnoughDataNotes(const Experiment& e, const SegmentResult& segment,
                           std::vector<ReportNote>* notes) {
  std::vector<std::string> arms_seen;
  for (const Comparison& c : segment.comparisons) {
    if (std::find(arms_seen.begin(), arms_seen.end(), c.arm) == arms_seen.end()) {
      arms_seen.push_back(c.arm);
    }
  }
  for (const std::string& arm : arms_seen) {
    std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
    for (const Comparison& c : segment.comparisons) {
      if (c.arm != arm || c.conclusive) continue;
      const std::string reason = c.estimate
                                     ? absl::StrCat("not conclusive: ", c.not_enough_data)
                                     : absl::StrCat("no interval or p-value: ", c.not_enough_data);
      auto it = std::find_if(by_reason.begin(), by_reason.end(),
                             [&](const auto& entry) { return entry.first == reason; });
      if (it == by_reason.end()) {
        by_reason.push_back({reason, {}});
        it = by_reason.end() - 1;
      }
      it->second.emplace_back(MetricName(c.metric));
    }
    if (by_reason.empty()) continue;
    std::vector<std::string> parts;
    for (const auto& [reason, metrics] : by_reason) {
      parts.push_back(absl::StrCat(absl::StrJoin(metrics, ", "), ": ", reason));
    }
    notes->push_back(ReportNote{
        std::string(kNoteNotEnoughData),
        absl::StrCat("Not enough data in ", FormatSegment(e.segment_keys, segment.values), " for ",
                     arm, " vs ", e.control_arm, ". ", absl::StrJoin(parts, "; "), "."),
        segment.values});
  }
}

void AddSampleRatioNote(const Experiment& e, const Aggregate& aggregate,
                        const ReportOptions& options, Report* report) {
  if (!options.stopped.empty()) return;  // Sending stopped arms to control skews the ratio.
  std::vector<uint64_t> counts(e.arms.size(), 0);
  for (const SegmentData& sd : aggregate.segments) {
    for (size_t a = 0; a < e.arms.size(); ++a) {
      counts[a] += e.design == Design::kParallel ? sd.AdaptersOn(a) : sd.periods[a];
    }
  }
  std::vector<double> shares;
  for (const Arm& arm : e.arms) shares.push_back(arm.weight);
  absl::StatusOr<double> p = SampleRatioMismatchPValue(counts, shares);
  if (!p.ok()) return;  // Too few units to tell; the not_enough_data notes cover it.
  report->sample_ratio_p_value = *p;
  if (*p >= kSampleRatioAlarm) return;
  std::vector<std::string> observed;
  std::vector<std::string> expected;
  for (size_t a = 0; a < e.arms.size(); ++a) {
    observed.push_back(absl::StrCat(e.arms[a].name, " ", counts[a]));
    expected.push_back(absl::StrCat(e.arms[a].weight));
  }
  report->notes.push_back(ReportNote{
      std::string(kNoteUnbalancedArms),
      absl::StrFormat(
          "The arms are unbalanced: %s per arm (%s) do not match the weights %s (sample "
          "ratio check p = %.2g). Some arm loses adapters or windows (agents not applying it, "
          "windows marked invalid): results may be biased; check acks and excluded windows.",
          e.design == Design::kParallel ? "adapters" : "valid periods",
          absl::StrJoin(observed, ", "), absl::StrJoin(expected, ":"), *p),
      std::nullopt});
}

// ---------------------------------------------------------------------------------------------
// Text rendering.

// Display width: code points (every character used here is one column wide).
size_t Width(const std::string& s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string Pad(const std::string& s, size_t width) {
  const size_t w = Width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

void AppendTable(const std::vector<std::vector<std::string>>& rows, std::string* out) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line = "|";
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < rows[r].size() ? rows[r][i] : "";
      absl::StrAppend(&line, " ", Pad(cell, widths[i]), " |");
    }
    absl::StrAppend(out, line, "\n");
    if (r == 0) {
      std::string rule = "|";
      for (size_t width : widths) absl::StrAppend(&rule, std::string(width + 2, '-'), "|");
      absl::StrAppend(out, rule, "\n");
    }
  }
}

std::string MeanCell(Metric metric, const MetricSummary& s) {
  if (s.estimate.n == 0) return "no data";
  const std::string mean = FormatMetricValue(metric, s.estimate.mean);
  if (!s.estimate.ci) return absl::StrCat(mean, " (1 adapter, no CI)");
  const double half = (s.estimate.ci->high - s.estimate.ci->low) / 2;
  return absl::StrCat(mean, " ± ", FormatMetricValue(metric, half));
}

std::string Percent(double ratio) { return absl::StrFormat("%+.2f %%", ratio * 100); }

}  // namespace

absl::StatusOr<Report> ComputeReport(const Experiment& experiment, std::span<const Window> windows,
                                     const ReportOptions& options) {
  absl::StatusOr<Aggregate> aggregate = AggregateWindows(experiment, options.start, windows);
  if (!aggregate.ok()) return aggregate.status();
  return ComputeReportFromAggregate(experiment, *aggregate, options);
}

absl::StatusOr<Report> ComputeReportFromAggregate(const Experiment& e, const Aggregate& aggregate,
                                                  const ReportOptions& options) {
  if (absl::Status s = ValidateExperiment(e); !s.ok()) return s;
  Report report;
  report.experiment = e.name;
  for (const Arm& arm : e.arms) {
    report.arms.push_back(ArmInfo{arm.name, SettingsSummary(arm.settings), arm.weight});
  }
  report.design = e.design;
  report.primary_metric = e.primary_metric;
  report.metrics = e.ReportedMetrics();
  report.segment_keys = e.segment_keys;
  report.control_arm = e.control_arm;
  report.start = options.start;
  report.planned_end = options.start + e.duration;
  report.generated = options.now;
  report.interim = options.now < report.planned_end;
  report.first_window_start = aggregate.first_window_start;
  report.last_window_start = aggregate.last_window_start;
  report.windows_total = aggregate.windows_total;
  report.windows_used = aggregate.windows_used;
  report.excluded = aggregate.excluded;

  const size_t control = e.ControlIndex();
  const std::vector<size_t> order = ArmOrder(e);
  std::vector<ReportNote> segment_notes;
  for (const SegmentData& sd : aggregate.segments) {
    SegmentResult segment;
    segment.values = sd.values;
    for (size_t a : order) {
      ArmResult arm;
      arm.arm = e.arms[a].name;
      arm.settings = report.arms[a].settings;
      arm.adapters = sd.AdaptersOn(a);
      arm.windows = sd.windows[a];
      arm.excluded_windows = sd.excluded_windows[a];
      arm.stopped = IsStopped(options.stopped, arm.arm, sd.values);
      for (Metric metric : report.metrics) {
        MetricSummary summary;
        summary.metric = metric;
        summary.windows = sd.metric_windows[a][static_cast<size_t>(metric)];
        absl::StatusOr<MeanEstimate> estimate = EstimateMean(sd.Values(a, metric));
        if (!estimate.ok()) return estimate.status();
        summary.estimate = *estimate;
        arm.metrics.push_back(summary);
      }
      segment.arms.push_back(std::move(arm));
    }
    if (sd.AdaptersOn(control) == 0) {
      segment_notes.push_back(
          ReportNote{std::string(kNoteNotEnoughData),
                     absl::StrCat("Not enough data in ", FormatSegment(e.segment_keys, sd.values),
                                  ": no adapter has valid windows on the control arm ",
                                  e.control_arm, ", so no arm can be compared there."),
                     sd.values});
    } else {
      for (size_t a : order) {
        if (a == control) continue;
        for (Metric metric : report.metrics) {
          absl::StatusOr<Comparison> c = Compare(e, sd, a, control, metric);
          if (!c.ok()) return c.status();
          segment.comparisons.push_back(*std::move(c));
        }
      }
      AddNotEnoughDataNotes(e, segment, &segment_notes);
    }
    report.segments.push_back(std::move(segment));
  }

  if (report.interim) {
    report.notes.push_back(ReportNote{
        std::string(kNotePeeking),
        absl::StrCat(
            "Interim look: the experiment is planned to run until ", FormatUtc(report.planned_end),
            ". The p-values and 95 % intervals are fixed-horizon: they are valid for one look at "
            "the planned end. Looking repeatedly and stopping as soon as p < 0.05 finds "
            "differences that are not there far more often than 5 % of the time. Before the end, "
            "decide only on the always-valid p-values and intervals."),
        std::nullopt});
  }
  if (aggregate.windows_total == 0) {
    report.notes.push_back(ReportNote{std::string(kNoteNotEnoughData),
                                      "No metric windows have been received yet.", std::nullopt});
  }
  for (const StoppedArm& stopped : options.stopped) {
    report.notes.push_back(ReportNote{
        std::string(kNoteGuardrailTripped),
        absl::StrCat("Arm ", stopped.arm, " stopped in ",
                     stopped.segment.empty() ? std::string("every segment")
                                             : FormatSegment(e.segment_keys, stopped.segment),
                     " (", stopped.reason, "): ", stopped.message, ". Its adapters there run ",
                     e.control_arm, " since ", FormatUtc(stopped.time), "."),
        stopped.segment.empty() ? std::nullopt
                                : std::optional<std::vector<std::string>>(stopped.segment)});
  }
  if (!aggregate.excluded.empty()) {
    std::vector<std::string> parts;
    uint64_t excluded = 0;
    for (const auto& [reason, count] : aggregate.excluded) {
      parts.push_back(absl::StrCat(reason, " ", count));
      excluded += count;
    }
    report.notes.push_back(
        ReportNote{std::string(kNoteExcludedWindows),
                   absl::StrCat(excluded, " of ", aggregate.windows_total,
                                " windows were not used: ", absl::StrJoin(parts, ", "), "."),
                   std::nullopt});
  }
  AddSampleRatioNote(e, aggregate, options, &report);
  for (ReportNote& note : segment_notes) report.notes.push_back(std::move(note));
  return report;
}

std::string RenderReportText(const Report& r) { return RenderReportText(r, ReportTextOptions{}); }

std::string RenderReportText(const Report& r, const ReportTextOptions& options) {
  const bool sequential = options.sequential;
  std::string out;
  if (!sequential) {
    absl::StrAppend(&out, "Experiment ", r.experiment, ": ", ToAbslView(DesignName(r.design)),
                    " design, primary metric ", ToAbslView(MetricName(r.primary_metric)), "\n");
    std::vector<std::string> arms;
    for (const ArmInfo& arm : r.arms) {
      arms.push_back(absl::StrCat(arm.name, " (", arm.settings, ", weight ", arm.weight,
                                  arm.name == r.control_arm ? ", control)" : ")"));
    }
    absl::StrAppend(&out, "Arms: ", absl::StrJoin(arms, "; "), "\n");
    absl::StrAppend(
        &out, "Planned: ", FormatUtc(r.start), " to ", FormatUtc(r.planned_end), "; report at ",
        FormatUtc(r.generated),
        r.interim ? " (INTERIM: fixed-horizon p-values are not final, see notes)" : " (final)",
        "\n");
  }
  uint64_t excluded = 0;
  for (const auto& [reason, count] : r.excluded) excluded += count;
  absl::StrAppend(&out, "Windows: ", r.windows_total, " received, ", r.windows_used, " used, ",
                  excluded, " excluded\n");
  if (sequential) {
    absl::StrAppend(&out,
                    "Values: mean over adapters ± 95 % CI half-width; differences: paired "
                    "per adapter, always-valid (mSPRT) 95 % interval and p; * objective; ! not "
                    "conclusive\n");
  } else {
    absl::StrAppend(&out, "Values: mean over adapters ± 95 % CI half-width; differences: ",
                    r.design == Design::kParallel ? "Welch's t-test on adapter means"
                                                  : "paired t-test on per-adapter differences",
                    "; * primary metric; ! not conclusive (see notes)\n");
  }

  for (const SegmentResult& segment : r.segments) {
    std::vector<std::string> counts;
    for (const ArmResult& arm : segment.arms) {
      counts.push_back(absl::StrCat(arm.arm, " ", Plural(arm.adapters, "adapter"), ", ",
                                    Plural(arm.windows, "window"),
                                    arm.stopped ? " (STOPPED)" : ""));
    }
    absl::StrAppend(&out, "\nSegment ", FormatSegment(r.segment_keys, segment.values), ": ",
                    absl::StrJoin(counts, "; "), "\n");
    std::vector<std::string> header = {"metric"};
    for (const ArmResult& arm : segment.arms) header.push_back(arm.arm);
    std::vector<std::string> treatments;
    for (size_t i = 1; i < segment.arms.size(); ++i) treatments.push_back(segment.arms[i].arm);
    for (const std::string& arm : treatments) {
      header.push_back(absl::StrCat(arm, " - ", r.control_arm));
      if (sequential) {
        header.push_back("95 % CI (always valid)");
        header.push_back("p (always valid)");
      } else {
        header.push_back("95 % CI");
        header.push_back("p");
        header.push_back("p (always valid)");
      }
    }
    const size_t per_treatment = sequential ? 3 : 4;
    std::vector<std::vector<std::string>> rows = {header};
    for (size_t m = 0; m < r.metrics.size(); ++m) {
      const Metric metric = r.metrics[m];
      std::vector<std::string> row = {
          absl::StrCat(ToAbslView(MetricName(metric)), metric == r.primary_metric ? " *" : "")};
      for (const ArmResult& arm : segment.arms) row.push_back(MeanCell(metric, arm.metrics[m]));
      for (const std::string& arm : treatments) {
        const Comparison* c = nullptr;
        for (const Comparison& candidate : segment.comparisons) {
          if (candidate.arm == arm && candidate.metric == metric) c = &candidate;
        }
        if (c == nullptr || !c->estimate) {
          row.push_back("n/a (not enough data)");
          row.insert(row.end(), per_treatment - 1, "");
          continue;
        }
        const DifferenceEstimate& d = *c->estimate;
        std::string delta = FormatMetricDelta(metric, d.diff);
        if (d.relative) absl::StrAppend(&delta, " (", Percent(d.relative->value), ")");
        if (!c->conclusive) absl::StrAppend(&delta, " !");
        const Interval& interval = sequential ? d.always_valid.ci : d.ci;
        std::string ci = absl::StrCat(FormatMetricDelta(metric, interval.low), " .. ",
                                      FormatMetricDelta(metric, interval.high));
        if (d.relative && !sequential) {
          absl::StrAppend(&ci, " (", Percent(d.relative->ci.low), " .. ",
                          Percent(d.relative->ci.high), ")");
        }
        row.push_back(delta);
        row.push_back(ci);
        if (!sequential) row.push_back(FormatPValue(d.p_value));
        row.push_back(FormatPValue(d.always_valid.p_value));
      }
      rows.push_back(std::move(row));
    }
    AppendTable(rows, &out);
  }
  if (r.segments.empty()) absl::StrAppend(&out, "\nNo segment has valid windows yet.\n");
  if (!r.notes.empty()) {
    absl::StrAppend(&out, "\nNotes:\n");
    for (const ReportNote& note : r.notes) {
      absl::StrAppend(&out, "- [", note.code, "] ", note.message, "\n");
    }
  }
  return out;
}

}  // namespace rxfleet::experiments
