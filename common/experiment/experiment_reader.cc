// ExperimentFieldReader: readers of fields the Experiment document shares with other kinds.

#include "common/experiment/experiment_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace rxfleet::experiments {

absl::StatusOr<absl::Duration> ExperimentFieldReader::ReadDuration(const YAML::Node& node,
                                                                   absl::string_view path) {
  absl::Duration d;
  if (!node.IsScalar() || !absl::ParseDuration(node.Scalar(), &d) ||
      d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return Error(
        node, path,
        absl::StrCat("must be a duration such as 90s, 5m, 24h or 1h30m, found ", Found(node)));
  }
  if (d < absl::ZeroDuration()) {
    return Error(node, path, absl::StrCat("duration ", node.Scalar(), " must not be negative"));
  }
  return d;
}

absl::StatusOr<Metric> ExperimentFieldReader::ReadMetric(const YAML::Node& node,
                                                         absl::string_view path) {
  absl::StatusOr<std::string> text = ReadString(node, path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Metric> metric = ParseMetric(*text);
  if (!metric.ok()) return Error(node, path, metric.status().message());
  return *metric;
}

absl::Status ExperimentFieldReader::ReadGuardrails(const YAML::Node& node,
                                                   absl::string_view list_path,
                                                   std::vector<Guardrail>* out) {
  absl::StatusOr<std::vector<YAML::Node>> items = ReadList(node, list_path);
  if (!items.ok()) return items.status();
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string path = absl::StrCat(list_path, "[", i, "]");
    const YAML::Node& item = (*items)[i];
    FieldMap f;
    if (absl::Status s =
            ReadMap(item, path, {"metric", "op", "threshold", "minAdapters", "minWindows"}, &f);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = RequireFields(item, path, {"metric", "op", "threshold"}, f); !s.ok()) {
      return s;
    }
    Guardrail g;
    absl::StatusOr<Metric> metric = ReadMetric(f["metric"].second, absl::StrCat(path, ".metric"));
    if (!metric.ok()) return metric.status();
    g.metric = *metric;
    const YAML::Node& op_node = f["op"].second;
    absl::StatusOr<std::string> op = ReadString(op_node, absl::StrCat(path, ".op"));
    if (!op.ok()) return op.status();
    if (*op == "<=") {
      g.op = GuardrailOp::kAtMost;
    } else if (*op == ">=") {
      g.op = GuardrailOp::kAtLeast;
    } else {
      return Error(op_node, absl::StrCat(path, ".op"),
                   absl::StrCat("unsupported op '", *op,
                                "' (expected \"<=\" or \">=\": the condition the metric must "
                                "keep)"));
    }
    const YAML::Node& threshold_node = f["threshold"].second;
    absl::StatusOr<std::string> threshold =
        ReadString(threshold_node, absl::StrCat(path, ".threshold"));
    if (!threshold.ok()) return threshold.status();
    absl::StatusOr<double> value = ParseMetricValue(g.metric, *threshold);
    if (!value.ok()) {
      return Error(threshold_node, absl::StrCat(path, ".threshold"), value.status().message());
    }
    g.threshold = *value;
    if (auto it = f.find("minAdapters"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, absl::StrCat(path, ".minAdapters"),
                                             "minAdapters", 2, kMaxMinAdaptersPerArm);
      if (!n.ok()) return n.status();
      g.min_adapters = *n;
    }
    if (auto it = f.find("minWindows"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, absl::StrCat(path, ".minWindows"),
                                             "minWindows", 1, kMaxMinWindowsPerArm);
      if (!n.ok()) return n.status();
      g.min_windows = *n;
    }
    out->push_back(g);
  }
  return absl::OkStatus();
}

absl::Status ExperimentFieldReader::ReadSegmentKeys(const YAML::Node& node, absl::string_view path,
                                                    std::vector<std::string>* out) {
  absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> keys = ReadStringList(node, path);
  if (!keys.ok()) return keys.status();
  for (auto& [key_node, key] : *keys) out->push_back(std::move(key));
  return absl::OkStatus();
}

}  // namespace rxfleet::experiments
