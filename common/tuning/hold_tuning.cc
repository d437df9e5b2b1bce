// The HoldTuning document reader (positions from common::DocumentReader, shared field readers
// from the Experiment document).

#include "common/tuning/hold_tuning.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/experiment/experiment_reader.h"
#include "common/string_view_compat.h"
#include "common/tuning/hold_tuning_rules.h"
#include "common/units.h"

namespace rxfleet::tuning {
namespace {

using common::ToAbslView;
using experiments::CheckResult;

class HoldTuningReader : public experiments::ExperimentFieldReader {
 public:
  using ExperimentFieldReader::ExperimentFieldReader;

  absl::StatusOr<HoldTuning> ReadDocument(const YAML::Node& doc) {
    FieldMap f;
    if (absl::Status s = ReadTopLevel(doc, kHoldTuningApiVersion, kHoldTuningKind, &f); !s.ok()) {
      return s;
    }
    common::DocumentMetadata metadata;
    if (absl::Status s = ReadMetadata(f["metadata"].second, /*check_name=*/nullptr,
                                      /*validate_labels=*/false, &metadata);
        !s.ok()) {
      return s;
    }
    HoldTuning t;
    t.name = std::move(metadata.name);
    t.labels = std::move(metadata.labels);
    t.resource_version = std::move(metadata.resource_version);
    if (absl::Status s = ReadSpec(f["spec"].second, &t); !s.ok()) return s;
    if (CheckResult problem = CheckHoldTuning(t)) {
      return Error(NodeFor(problem->field), problem->field, problem->message);
    }
    t.source = SourceLine(doc);
    return t;
  }

 private:
  // A plain decimal number ("0.2", "5e-2").
  absl::StatusOr<double> ReadNumber(const YAML::Node& node, absl::string_view path) const {
    double value = 0;
    if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &value) || !std::isfinite(value)) {
      return Error(node, path, absl::StrCat("must be a number such as 0.2, found ", Found(node)));
    }
    return value;
  }

  absl::Status ReadCandidates(const YAML::Node& node, HoldTuning* t) {
    absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> items =
        ReadStringList(node, "spec.candidates");
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const auto& [item, text] = (*items)[i];
      absl::StatusOr<uint32_t> hold = common::ParseHoldUs(text);
      if (!hold.ok()) {
        return Error(item, absl::StrCat("spec.candidates[", i, "]"), hold.status().message());
      }
      t->candidates_us.push_back(*hold);
    }
    return absl::OkStatus();
  }

  absl::Status ReadObjective(const YAML::Node& node, Objective* objective) {
    FieldMap f;
    if (absl::Status s = ReadMap(node, "spec.objective", {"metric", "direction"}, &f); !s.ok()) {
      return s;
    }
    if (absl::Status s = RequireFields(node, "spec.objective", {"metric", "direction"}, f);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<experiments::Metric> metric =
        ReadMetric(f["metric"].second, "spec.objective.metric");
    if (!metric.ok()) return metric.status();
    objective->metric = *metric;
    const YAML::Node& direction_node = f["direction"].second;
    absl::StatusOr<std::string> direction = ReadString(direction_node, "spec.objective.direction");
    if (!direction.ok()) return direction.status();
    if (*direction == "maximize") {
      objective->direction = Direction::kMaximize;
    } else if (*direction == "minimize") {
      objective->direction = Direction::kMinimize;
    } else {
      return Error(
          direction_node, "spec.objective.direction",
          absl::StrCat("unknown direction '", *direction, "' (expected maximize or minimize)"));
    }
    return absl::OkStatus();
  }

  absl::Status ReadBudget(const YAML::Node& node, Budget* budget) {
    FieldMap f;
    if (absl::Status s = ReadMap(node, "spec.budget", {"adapterShare", "maxWindows"}, &f);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = RequireFields(node, "spec.budget", {"maxWindows"}, f); !s.ok()) return s;
    if (auto it = f.find("adapterShare"); it != f.end()) {
      absl::StatusOr<double> share = ReadNumber(it->second.second, "spec.budget.adapterShare");
      if (!share.ok()) return share.status();
      budget->adapter_share = *share;
    }
    absl::StatusOr<uint32_t> windows = ReadCount(f["maxWindows"].second, "spec.budget.maxWindows",
                                                 "maxWindows", 1, kMaxExplorationWindows);
    if (!windows.ok()) return windows.status();
    budget->max_windows = *windows;
    return absl::OkStatus();
  }

  absl::Status ReadSpec(const YAML::Node& node, HoldTuning* t) {
    FieldMap f;
    if (absl::Status s =
            ReadMap(node, "spec",
                    {"selector", "segments", "candidates", "objective", "guardrails", "budget",
                     "minEffect", "windowLength", "periodLength", "burnIn", "autoApply",
                     "recheckShare", "minAdaptersPerArm", "minWindowsPerArm"},
                    &f);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            RequireFields(node, "spec", {"candidates", "objective", "budget", "periodLength"}, f);
        !s.ok()) {
      return s;
    }
    if (auto it = f.find("selector"); it != f.end()) {
      if (absl::Status s =
              ReadSelector(it->second.second, common::SelectorItemChecks::kParseOnly, &t->selector);
          !s.ok()) {
        return s;
      }
    }
    if (auto it = f.find("segments"); it != f.end()) {
      if (absl::Status s = ReadSegmentKeys(it->second.second, "spec.segments", &t->segment_keys);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ReadCandidates(f["candidates"].second, t); !s.ok()) return s;
    if (absl::Status s = ReadObjective(f["objective"].second, &t->objective); !s.ok()) return s;
    if (auto it = f.find("guardrails"); it != f.end()) {
      if (absl::Status s = ReadGuardrails(it->second.second, "spec.guardrails", &t->guardrails);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ReadBudget(f["budget"].second, &t->budget); !s.ok()) return s;
    if (auto it = f.find("minEffect"); it != f.end()) {
      absl::StatusOr<double> effect = ReadNumber(it->second.second, "spec.minEffect");
      if (!effect.ok()) return effect.status();
      t->min_effect = *effect;
    }
    struct DurationField {
      absl::string_view name;
      absl::Duration* out;
    };
    for (const DurationField& d :
         {DurationField{"windowLength", &t->window_length},
          DurationField{"periodLength", &t->period_length}, DurationField{"burnIn", &t->burn_in}}) {
      auto it = f.find(std::string(d.name));
      if (it == f.end()) continue;
      absl::StatusOr<absl::Duration> value =
          ReadDuration(it->second.second, absl::StrCat("spec.", d.name));
      if (!value.ok()) return value.status();
      *d.out = *value;
    }
    if (auto it = f.find("autoApply"); it != f.end()) {
      absl::StatusOr<bool> value = ReadBool(it->second.second, "spec.autoApply");
      if (!value.ok()) return value.status();
      t->auto_apply = *value;
    }
    if (auto it = f.find("recheckShare"); it != f.end()) {
      absl::StatusOr<double> share = ReadNumber(it->second.second, "spec.recheckShare");
      if (!share.ok()) return share.status();
      t->recheck_share = *share;
    }
    if (auto it = f.find("minAdaptersPerArm"); it != f.end()) {
      absl::StatusOr<uint32_t> n =
          ReadCount(it->second.second, "spec.minAdaptersPerArm", "minAdaptersPerArm", 2,
                    experiments::kMaxMinAdaptersPerArm);
      if (!n.ok()) return n.status();
      t->min_adapters_per_arm = *n;
    }
    if (auto it = f.find("minWindowsPerArm"); it != f.end()) {
      absl::StatusOr<uint32_t> n =
          ReadCount(it->second.second, "spec.minWindowsPerArm", "minWindowsPerArm", 1,
                    experiments::kMaxMinWindowsPerArm);
      if (!n.ok()) return n.status();
      t->min_windows_per_arm = *n;
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::string_view DirectionName(Direction direction) {
  return direction == Direction::kMinimize ? "minimize" : "maximize";
}

uint32_t HoldTuning::WindowsPerPeriod() const {
  if (window_length <= absl::ZeroDuration()) return 1;
  return static_cast<uint32_t>(std::max<int64_t>(1, period_length / window_length));
}

uint32_t ExplorationRounds(size_t challengers) {
  if (challengers == 0) return 0;
  uint32_t halving = 0;
  while ((size_t{1} << halving) < challengers) ++halving;  // ceil(log2(challengers))
  return halving + 1;
}

uint64_t MinExplorationWindows(const HoldTuning& t) {
  return uint64_t{ExplorationRounds(t.candidates_us.size())} * t.candidates_us.size() *
         t.min_adapters_per_arm * t.WindowsPerPeriod();
}

absl::StatusOr<std::vector<HoldTuning>> ParseHoldTuningDocuments(std::string_view text,
                                                                 std::string_view source) {
  HoldTuningReader reader(ToAbslView(source));
  absl::StatusOr<std::vector<YAML::Node>> docs = reader.LoadDocuments(
      ToAbslView(text), "hold tuning", kMaxHoldTuningInputBytes, kMaxHoldTuningDocuments);
  if (!docs.ok()) return docs.status();
  return reader.ReadNamedDocuments<HoldTuning>(
      *docs, "hold tuning", [&](const YAML::Node& doc) { return reader.ReadDocument(doc); });
}

absl::StatusOr<HoldTuning> ParseHoldTuning(std::string_view text, std::string_view source) {
  absl::StatusOr<std::vector<HoldTuning>> all = ParseHoldTuningDocuments(text, source);
  if (!all.ok()) return all.status();
  if (all->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbslView(source), ": expected exactly one HoldTuning document, found ", all->size()));
  }
  return std::move(all->front());
}

absl::Status ValidateHoldTuning(const HoldTuning& tuning) {
  if (CheckResult problem = CheckHoldTuning(tuning)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold tuning '", tuning.name, "': ", problem->field, ": ", problem->message));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::tuning
