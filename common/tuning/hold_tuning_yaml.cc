// HoldTuningToYaml: the HoldTuning document writer, the inverse of the reader in
// hold_tuning.cc (ParseHoldTuning(HoldTuningToYaml(t)) == t).

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/strings/str_format.h"
#include "common/experiment/experiment_reader.h"
#include "common/policy/document_reader.h"
#include "common/tuning/hold_tuning.h"
#include "common/units.h"

namespace rxfleet::tuning {
namespace {

// Doubles written so that reading them back gives the same value.
std::string RoundTripDouble(double value) { return absl::StrFormat("%.17g", value); }

}  // namespace

std::string HoldTuningToYaml(const HoldTuning& t) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << std::string(kHoldTuningApiVersion);
  out << YAML::Key << "kind" << YAML::Value << std::string(kHoldTuningKind);
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << t.name;
  if (!t.labels.empty()) common::EmitLabels(out, "labels", t.labels);
  if (!t.resource_version.empty()) {
    out << YAML::Key << "resourceVersion" << YAML::Value << YAML::DoubleQuoted
        << t.resource_version;
  }
  out << YAML::EndMap;

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  common::EmitSelector(out, t.selector);
  common::EmitStringList(out, "segments", t.segment_keys, /*quoted=*/false);
  out << YAML::Key << "candidates" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (uint32_t hold : t.candidates_us) out << common::FormatHoldYaml(hold);
  out << YAML::EndSeq;
  out << YAML::Key << "objective" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "metric" << YAML::Value
      << std::string(experiments::MetricName(t.objective.metric));
  out << YAML::Key << "direction" << YAML::Value
      << std::string(DirectionName(t.objective.direction));
  out << YAML::EndMap;
  experiments::EmitGuardrails(out, t.guardrails);
  out << YAML::Key << "budget" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "adapterShare" << YAML::Value << RoundTripDouble(t.budget.adapter_share);
  out << YAML::Key << "maxWindows" << YAML::Value << t.budget.max_windows;
  out << YAML::EndMap;
  out << YAML::Key << "minEffect" << YAML::Value << RoundTripDouble(t.min_effect);
  out << YAML::Key << "windowLength" << YAML::Value << absl::FormatDuration(t.window_length);
  out << YAML::Key << "periodLength" << YAML::Value << absl::FormatDuration(t.period_length);
  out << YAML::Key << "burnIn" << YAML::Value << absl::FormatDuration(t.burn_in);
  out << YAML::Key << "autoApply" << YAML::Value << t.auto_apply;
  out << YAML::Key << "recheckShare" << YAML::Value << RoundTripDouble(t.recheck_share);
  out << YAML::Key << "minAdaptersPerArm" << YAML::Value << t.min_adapters_per_arm;
  out << YAML::Key << "minWindowsPerArm" << YAML::Value << t.min_windows_per_arm;
  out << YAML::EndMap;  // spec
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace rxfleet::tuning
