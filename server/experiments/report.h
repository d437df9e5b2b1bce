#pragma once

// The experiment report: per segment and arm, adapters, windows and each metric's mean with a
// 95 % confidence interval; per treatment arm against control, the difference, the relative
// difference, their intervals and p-values; and notes that say plainly when there is not
// enough data, when the look is an interim one (peeking), when the arms are unbalanced and
// when guardrails stopped arms. See docs/EXPERIMENTS.md for how to read it.
//
// Analysis (adapter-level values from aggregate.h):
//  - parallel: Welch's t-test on the adapter-level values of the arm and of control;
//  - switchback: paired t-test on the per-adapter differences (arm periods' mean minus
//    control periods' mean) over adapters that ran both arms.
// p-values and intervals are fixed-horizon (valid for one look at the planned end); every
// comparison also carries an always-valid p-value and interval (mSPRT, stats.h) that stay
// valid under continuous monitoring.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/experiment/metric.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"
#include "server/experiments/stats.h"

namespace rxfleet::experiments {

/// Note codes (rxfleet.v1.ReportNote.code).
inline constexpr std::string_view kNoteNotEnoughData = "not_enough_data";
inline constexpr std::string_view kNotePeeking = "peeking";
inline constexpr std::string_view kNoteUnbalancedArms = "unbalanced_arms";
inline constexpr std::string_view kNoteGuardrailTripped = "guardrail_tripped";
inline constexpr std::string_view kNoteExcludedWindows = "excluded_windows";

/// p-value of the sample-ratio check below which the arms are reported as unbalanced.
inline constexpr double kSampleRatioAlarm = 0.001;

/// One metric of one arm in one segment.
struct MetricSummary {
  Metric metric = Metric::kRxThroughputBps;
  uint64_t windows = 0;  ///< valid windows with a value of this metric
  /// Over adapter-level values: n = adapters with a value; ci absent when n < 2.
  MeanEstimate estimate;
};

/// One arm in one segment.
struct ArmResult {
  std::string arm;
  std::string settings;  ///< e.g. "hold 32µs" (for table headers)
  size_t adapters = 0;   ///< adapters with at least one valid window on the arm
  uint64_t windows = 0;  ///< valid windows used
  uint64_t excluded_windows = 0;
  std::vector<MetricSummary> metrics;  ///< Experiment::ReportedMetrics() order
  bool stopped = false;                ///< stopped in this segment (or everywhere)
};

/// One treatment arm against control for one metric in one segment.
struct Comparison {
  std::string arm;
  std::string control_arm;
  Metric metric = Metric::kRxThroughputBps;
  TestMethod method = TestMethod::kWelch;
  size_t treatment_units = 0;  ///< adapters (parallel) or adapters with both arms (switchback)
  size_t control_units = 0;    ///< adapters (parallel) or the same pairs (switchback)
  /// Absent when the test cannot be computed (see not_enough_data).
  std::optional<DifferenceEstimate> estimate;
  /// True when the estimate exists and both sides have at least minAdaptersPerArm units.
  bool conclusive = false;
  /// Why the comparison is missing or not conclusive; empty when conclusive.
  std::string not_enough_data;
};

/// Results of one segment.
struct SegmentResult {
  std::vector<std::string> values;      ///< aligned with Report::segment_keys
  std::vector<ArmResult> arms;          ///< control first, then the other arms in document order
  std::vector<Comparison> comparisons;  ///< per treatment arm, per reported metric
};

/// A caveat, with the segment it concerns (nullopt = the whole experiment).
struct ReportNote {
  std::string code;
  std::string message;
  std::optional<std::vector<std::string>> segment;
};

/// An arm as the report header shows it.
struct ArmInfo {
  std::string name;
  std::string settings;  ///< e.g. "hold 32µs"
  uint32_t weight = 1;
};

/// The report of one experiment.
struct Report {
  std::string experiment;
  std::vector<ArmInfo> arms;  ///< document order
  Design design = Design::kParallel;
  Metric primary_metric = Metric::kRxThroughputBps;
  std::vector<Metric> metrics;  ///< reported: primary first
  std::vector<std::string> segment_keys;
  std::string control_arm;
  absl::Time start;                                        ///< experiment start
  absl::Time planned_end;                                  ///< start + duration
  absl::Time generated;                                    ///< ReportOptions::now
  bool interim = false;                                    ///< generated before planned_end
  absl::Time first_window_start = absl::InfiniteFuture();  ///< of used windows
  absl::Time last_window_start = absl::InfinitePast();
  uint64_t windows_total = 0;
  uint64_t windows_used = 0;
  std::map<std::string, uint64_t> excluded;  ///< reason -> windows (aggregate.h)
  std::vector<SegmentResult> segments;       ///< sorted by segment values
  std::vector<ReportNote> notes;
  double sample_ratio_p_value = 1;  ///< of the unbalanced-arms check; 1 when not computed
};

/// Inputs of a report besides the windows.
struct ReportOptions {
  absl::Time start;  ///< when the arms were first pushed (period 0 starts here)
  absl::Time now;    ///< report time: before start + duration makes it an interim look
  std::vector<StoppedArm> stopped;  ///< arms stopped so far (guardrails, operators)
};

/// Computes the report.
/// Not-enough-data rules (each produces a `not_enough_data` note for its segment):
///  - a segment without adapters on control: no comparisons for that segment;
///  - fewer than 2 units on either side (parallel: adapters with a value; switchback:
///    adapters with values on both arms): no interval, no p-value;
///  - no variation at all (every unit equal): no t statistic;
///  - fewer than minAdaptersPerArm units, or fewer than minWindowsPerArm valid windows on
///    either side: the numbers are shown but marked not conclusive.
/// Other notes: `peeking` for interim reports; `unbalanced_arms` when the sample-ratio check
/// (parallel: adapters per arm; switchback: valid periods per arm; skipped while arms are
/// stopped) gives p < 0.001; `guardrail_tripped` per stopped arm; `excluded_windows` with the
/// counts per reason.
/// Errors: those of AggregateWindows.
absl::StatusOr<Report> ComputeReport(const Experiment& experiment, std::span<const Window> windows,
                                     const ReportOptions& options);

/// Like ComputeReport from an Aggregate already computed for the same experiment and start.
absl::StatusOr<Report> ComputeReportFromAggregate(const Experiment& experiment,
                                                  const Aggregate& aggregate,
                                                  const ReportOptions& options);

/// Renders the report as plain text: a header (design, primary metric, windows used and
/// excluded, interim or final), then per segment a table shaped like the measurement tables
/// of the project (one row per metric, primary marked with '*', one column per arm with
/// "mean ± CI half-width", then per treatment arm the difference with the relative difference,
/// the 95 % interval, the p-value and the always-valid p-value), then the notes. Columns are
/// padded so the output reads as a table in a terminal and as Markdown. Deterministic, for
/// golden tests and for rxfleetctl.
std::string RenderReportText(const Report& report);

/// How RenderReportText words a report.
struct ReportTextOptions {
  /// The report of a sequential procedure (a hold tuning, decided by the always-valid
  /// statistics at any look): no experiment line, arms or planned end; per treatment arm the
  /// difference, the always-valid (mSPRT) 95 % interval and p only (fixed-horizon intervals
  /// and p-values are not valid there). The primary metric is named the objective. Notes are
  /// printed as they are (a caller drops the ones that do not apply).
  bool sequential = false;
};

/// RenderReportText worded as `options` says.
std::string RenderReportText(const Report& report, const ReportTextOptions& options);

}  // namespace rxfleet::experiments
