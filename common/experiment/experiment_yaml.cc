// ExperimentToYaml: the Experiment document writer, the inverse of the reader in
// experiment.cc (ParseExperiment(ExperimentToYaml(e)) == e).

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/strings/str_format.h"
#include "common/experiment/experiment.h"
#include "common/experiment/experiment_reader.h"
#include "common/policy/document_reader.h"

namespace rxfleet::experiments {
namespace {

// Doubles written so that reading them back gives the same value.
std::string RoundTripDouble(double value) { return absl::StrFormat("%.17g", value); }

}  // namespace

void EmitGuardrails(YAML::Emitter& out, const std::vector<Guardrail>& guardrails) {
  out << YAML::Key << "guardrails" << YAML::Value << YAML::BeginSeq;
  for (const Guardrail& g : guardrails) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "metric" << YAML::Value << std::string(MetricName(g.metric));
    out << YAML::Key << "op" << YAML::Value << YAML::DoubleQuoted
        << std::string(GuardrailOpSymbol(g.op));
    out << YAML::Key << "threshold" << YAML::Value << RoundTripDouble(g.threshold);
    if (g.min_adapters) out << YAML::Key << "minAdapters" << YAML::Value << *g.min_adapters;
    if (g.min_windows) out << YAML::Key << "minWindows" << YAML::Value << *g.min_windows;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

std::string ExperimentToYaml(const Experiment& e) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << std::string(kExperimentApiVersion);
  out << YAML::Key << "kind" << YAML::Value << std::string(kExperimentKind);
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << e.name;
  if (!e.labels.empty()) common::EmitLabels(out, "labels", e.labels);
  if (!e.resource_version.empty()) {
    out << YAML::Key << "resourceVersion" << YAML::Value << YAML::DoubleQuoted
        << e.resource_version;
  }
  out << YAML::EndMap;

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  common::EmitSelector(out, e.selector);
  out << YAML::Key << "arms" << YAML::Value << YAML::BeginSeq;
  for (const Arm& arm : e.arms) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << arm.name;
    out << YAML::Key << "settings" << YAML::Value << YAML::Flow << YAML::BeginMap;
    common::EmitSettingsFields(out, arm.settings);
    out << YAML::EndMap;
    out << YAML::Key << "weight" << YAML::Value << arm.weight;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "control" << YAML::Value << e.control_arm;
  out << YAML::Key << "design" << YAML::Value << std::string(DesignName(e.design));
  out << YAML::Key << "duration" << YAML::Value << absl::FormatDuration(e.duration);
  out << YAML::Key << "windowLength" << YAML::Value << absl::FormatDuration(e.window_length);
  if (e.design == Design::kSwitchback) {
    out << YAML::Key << "periodLength" << YAML::Value << absl::FormatDuration(e.period_length);
  }
  out << YAML::Key << "burnIn" << YAML::Value << absl::FormatDuration(e.burn_in);
  out << YAML::Key << "primaryMetric" << YAML::Value << std::string(MetricName(e.primary_metric));
  out << YAML::Key << "secondaryMetrics" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (Metric m : e.secondary_metrics) out << std::string(MetricName(m));
  out << YAML::EndSeq;
  EmitGuardrails(out, e.guardrails);
  common::EmitStringList(out, "segments", e.segment_keys, /*quoted=*/false);
  out << YAML::Key << "minAdaptersPerArm" << YAML::Value << e.min_adapters_per_arm;
  out << YAML::Key << "minWindowsPerArm" << YAML::Value << e.min_windows_per_arm;
  out << YAML::Key << "priority" << YAML::Value << e.priority;
  out << YAML::Key << "seed" << YAML::Value << e.seed;
  if (e.probe) {
    const common::ProbeSpec& p = *e.probe;
    out << YAML::Key << "probe" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "server" << YAML::Value << YAML::DoubleQuoted
        << common::ProbeServerAddress(p);
    out << YAML::Key << "protocol" << YAML::Value
        << std::string(common::ProbeProtocolName(p.protocol));
    out << YAML::Key << "direction" << YAML::Value
        << std::string(common::ProbeDirectionName(p.direction));
    out << YAML::Key << "parallelStreams" << YAML::Value << p.parallel_streams;
    out << YAML::Key << "duration" << YAML::Value << absl::FormatDuration(p.duration);
    if (p.protocol == common::ProbeProtocol::kUdp) {
      out << YAML::Key << "udpRate" << YAML::Value << p.udp_rate_bps;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;  // spec
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace rxfleet::experiments
