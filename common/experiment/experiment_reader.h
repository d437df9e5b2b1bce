#pragma once

// Readers (and the guardrails' writer) of the fields the Experiment document shares with other
// kinds built on the same machinery (kind: HoldTuning, common/tuning/hold_tuning.h): durations,
// metrics, guardrails and segment keys. Errors are those of common::DocumentReader: InvalidArgument
// "<source>:<line>:<column>: <path>: <message>".

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/experiment/metric.h"
#include "common/policy/document_reader.h"

namespace rxfleet::experiments {

/// A DocumentReader with the Experiment document's field readers. Value ranges that depend on
/// other fields are checked afterwards by the rules of experiment_rules.h.
class ExperimentFieldReader : public common::DocumentReader {
 public:
  using DocumentReader::DocumentReader;

  /// A non-negative Go/Abseil duration ("90s", "5m", "1h30m"): "must be a duration such as
  /// 90s, 5m, 24h or 1h30m, found 'x'" or "duration -5m must not be negative".
  absl::StatusOr<absl::Duration> ReadDuration(const YAML::Node& node, absl::string_view path);

  /// A metric name from the catalogue (ParseMetric's message at the value otherwise).
  absl::StatusOr<Metric> ReadMetric(const YAML::Node& node, absl::string_view path);

  /// A guardrail list at `list_path` ("spec.guardrails"): items {metric, op, threshold,
  /// minAdapters, minWindows}; metric, op ("<=" or ">=") and threshold (ParseMetricValue) required;
  /// minAdapters 2..100000, minWindows 1..10000000. Appends to `out`. Count, duplicates and
  /// threshold ranges are CheckGuardrails' (experiment_rules.h).
  absl::Status ReadGuardrails(const YAML::Node& node, absl::string_view list_path,
                              std::vector<Guardrail>* out);

  /// A list of segment keys at `path` (strings); their rules are CheckSegmentKeys'.
  absl::Status ReadSegmentKeys(const YAML::Node& node, absl::string_view path,
                               std::vector<std::string>* out);
};

/// Emits `guardrails:` as a list of flow maps {metric, op (double-quoted), threshold (exact
/// round trip), minAdapters and minWindows when set}; `guardrails: []` when empty. The
/// inverse of ExperimentFieldReader::ReadGuardrails.
void EmitGuardrails(YAML::Emitter& out, const std::vector<Guardrail>& guardrails);

}  // namespace rxfleet::experiments
