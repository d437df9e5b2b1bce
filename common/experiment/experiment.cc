#include "common/experiment/experiment.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/experiment/experiment_reader.h"
#include "common/experiment/experiment_rules.h"
#include "common/host_labels.h"
#include "common/policy/document_reader.h"
#include "common/string_view_compat.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

// ---------------------------------------------------------------------------------------------
// YAML reading with positions.

class ExperimentReader : public ExperimentFieldReader {
 public:
  using ExperimentFieldReader::ExperimentFieldReader;

  // Reads one document. Every field path read is recorded (NodeFor), so rules checked
  // afterwards can point at the offending value.
  absl::StatusOr<Experiment> ReadDocument(const YAML::Node& doc) {
    FieldMap f;
    if (absl::Status s = ReadTopLevel(doc, kExperimentApiVersion, kExperimentKind, &f); !s.ok()) {
      return s;
    }
    common::DocumentMetadata metadata;
    if (absl::Status s = ReadMetadata(f["metadata"].second, /*check_name=*/nullptr,
                                      /*validate_labels=*/false, &metadata);
        !s.ok()) {
      return s;
    }
    Experiment e;
    e.name = std::move(metadata.name);
    e.labels = std::move(metadata.labels);
    e.resource_version = std::move(metadata.resource_version);
    if (absl::Status s = ReadSpec(f["spec"].second, &e); !s.ok()) return s;
    if (CheckResult problem = CheckExperiment(e)) {
      return Error(NodeFor(problem->field), problem->field, problem->message);
    }
    e.source = SourceLine(doc);
    return e;
  }

 private:
  absl::Status ReadArms(const YAML::Node& node, Experiment* e) {
    absl::StatusOr<std::vector<YAML::Node>> items = ReadList(node, "spec.arms");
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const std::string path = absl::StrCat("spec.arms[", i, "]");
      const YAML::Node& item = (*items)[i];
      FieldMap f;
      if (absl::Status s = ReadMap(item, path, {"name", "settings", "weight"}, &f); !s.ok()) {
        return s;
      }
      if (absl::Status s = RequireFields(item, path, {"name", "settings"}, f); !s.ok()) return s;
      Arm arm;
      absl::StatusOr<std::string> name = ReadString(f["name"].second, absl::StrCat(path, ".name"));
      if (!name.ok()) return name.status();
      arm.name = *std::move(name);
      if (absl::Status s = ReadSettings(f["settings"].second, absl::StrCat(path, ".settings"),
                                        kArmSettings, &arm.settings);
          !s.ok()) {
        return s;
      }
      if (auto it = f.find("weight"); it != f.end()) {
        absl::StatusOr<uint32_t> weight =
            ReadCount(it->second.second, absl::StrCat(path, ".weight"), "weight", 1, kMaxArmWeight);
        if (!weight.ok()) return weight.status();
        arm.weight = *weight;
      }
      e->arms.push_back(std::move(arm));
    }
    return absl::OkStatus();
  }

  // spec.probe: every field read and range-checked here so errors point at the value; the
  // cross-field rules (window, metrics) are CheckExperiment's.
  absl::Status ReadProbe(const YAML::Node& node, Experiment* e) {
    FieldMap f;
    if (absl::Status s = ReadMap(node, "spec.probe",
                                 {"server", "protocol", "direction", "parallelStreams", "duration",
                                  "udpRate", "interval"},
                                 &f);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = RequireFields(node, "spec.probe", {"server"}, f); !s.ok()) return s;
    common::ProbeSpec probe;
    const YAML::Node& server_node = f["server"].second;
    absl::StatusOr<std::string> server = ReadString(server_node, "spec.probe.server");
    if (!server.ok()) return server.status();
    if (absl::Status s = common::ParseProbeServer(*server, probe); !s.ok()) {
      return Error(server_node, "spec.probe.server", s.message());
    }
    if (auto it = f.find("protocol"); it != f.end()) {
      absl::StatusOr<std::string> text = ReadString(it->second.second, "spec.probe.protocol");
      if (!text.ok()) return text.status();
      if (*text == "tcp") {
        probe.protocol = common::ProbeProtocol::kTcp;
      } else if (*text == "udp") {
        probe.protocol = common::ProbeProtocol::kUdp;
      } else {
        return Error(it->second.second, "spec.probe.protocol",
                     absl::StrCat("unknown protocol '", *text, "' (expected tcp or udp)"));
      }
    }
    if (auto it = f.find("direction"); it != f.end()) {
      absl::StatusOr<std::string> text = ReadString(it->second.second, "spec.probe.direction");
      if (!text.ok()) return text.status();
      if (*text == "reverse") {
        probe.direction = common::ProbeDirection::kReverse;
      } else if (*text == "forward") {
        probe.direction = common::ProbeDirection::kForward;
      } else {
        return Error(it->second.second, "spec.probe.direction",
                     absl::StrCat("unknown direction '", *text,
                                  "' (expected reverse: the adapter receives, or forward: it "
                                  "sends)"));
      }
    }
    if (auto it = f.find("parallelStreams"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, "spec.probe.parallelStreams",
                                             "parallelStreams", 1, common::kMaxProbeStreams);
      if (!n.ok()) return n.status();
      probe.parallel_streams = static_cast<int>(*n);
    }
    if (auto it = f.find("duration"); it != f.end()) {
      absl::StatusOr<absl::Duration> d = ReadDuration(it->second.second, "spec.probe.duration");
      if (!d.ok()) return d.status();
      probe.duration = *d;
    }
    if (auto it = f.find("udpRate"); it != f.end()) {
      const YAML::Node& rate_node = it->second.second;
      absl::StatusOr<std::string> text = ReadString(rate_node, "spec.probe.udpRate");
      if (!text.ok()) return text.status();
      // The same bit-rate syntax as throughput thresholds: "50Mbit/s", "2e8".
      absl::StatusOr<double> bps = ParseMetricValue(Metric::kProbeRxThroughputBps, *text);
      if (!bps.ok() || *bps != std::floor(*bps) || *bps > 1e19) {
        return Error(rate_node, "spec.probe.udpRate",
                     absl::StrCat("must be a whole number of bit/s, optionally with bit/s, "
                                  "kbit/s, Mbit/s or Gbit/s (e.g. 50Mbit/s), found ",
                                  Found(rate_node)));
      }
      probe.udp_rate_bps = static_cast<uint64_t>(*bps);
    }
    if (auto it = f.find("interval"); it != f.end()) {
      return Error(it->second.second, "spec.probe.interval",
                   "applies to policies only: an experiment probes once per metric window");
    }
    if (absl::Status s = common::ValidateProbeSpec(probe); !s.ok()) {
      return Error(node, "spec.probe", s.message());
    }
    e->probe = std::move(probe);
    return absl::OkStatus();
  }

  absl::Status ReadSpec(const YAML::Node& node, Experiment* e) {
    FieldMap f;
    if (absl::Status s = ReadMap(
            node, "spec",
            {"selector", "arms", "control", "design", "duration", "windowLength", "periodLength",
             "burnIn", "primaryMetric", "secondaryMetrics", "guardrails", "segments",
             "minAdaptersPerArm", "minWindowsPerArm", "priority", "seed", "probe"},
            &f);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            RequireFields(node, "spec", {"arms", "design", "duration", "primaryMetric"}, f);
        !s.ok()) {
      return s;
    }
    if (auto it = f.find("selector"); it != f.end()) {
      if (absl::Status s =
              ReadSelector(it->second.second, common::SelectorItemChecks::kParseOnly, &e->selector);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ReadArms(f["arms"].second, e); !s.ok()) return s;
    if (auto it = f.find("control"); it != f.end()) {
      absl::StatusOr<std::string> control = ReadString(it->second.second, "spec.control");
      if (!control.ok()) return control.status();
      e->control_arm = *std::move(control);
    } else if (!e->arms.empty()) {
      e->control_arm = e->arms.front().name;
    }
    const YAML::Node& design_node = f["design"].second;
    absl::StatusOr<std::string> design = ReadString(design_node, "spec.design");
    if (!design.ok()) return design.status();
    if (*design == "parallel") {
      e->design = Design::kParallel;
    } else if (*design == "switchback") {
      e->design = Design::kSwitchback;
    } else {
      return Error(
          design_node, "spec.design",
          absl::StrCat("unknown design '", *design, "' (expected parallel or switchback)"));
    }
    struct DurationField {
      absl::string_view name;
      absl::Duration* out;
    };
    for (const DurationField& d :
         {DurationField{"duration", &e->duration}, DurationField{"windowLength", &e->window_length},
          DurationField{"periodLength", &e->period_length}, DurationField{"burnIn", &e->burn_in}}) {
      auto it = f.find(std::string(d.name));
      if (it == f.end()) continue;
      absl::StatusOr<absl::Duration> value =
          ReadDuration(it->second.second, absl::StrCat("spec.", d.name));
      if (!value.ok()) return value.status();
      *d.out = *value;
    }
    if (e->design == Design::kParallel && f.contains("periodLength")) {
      return Error(f["periodLength"].second, "spec.periodLength",
                   "applies to the switchback design only");
    }
    absl::StatusOr<Metric> primary = ReadMetric(f["primaryMetric"].second, "spec.primaryMetric");
    if (!primary.ok()) return primary.status();
    e->primary_metric = *primary;
    if (auto it = f.find("secondaryMetrics"); it != f.end()) {
      absl::StatusOr<std::vector<YAML::Node>> items =
          ReadList(it->second.second, "spec.secondaryMetrics");
      if (!items.ok()) return items.status();
      for (size_t i = 0; i < items->size(); ++i) {
        absl::StatusOr<Metric> metric =
            ReadMetric((*items)[i], absl::StrCat("spec.secondaryMetrics[", i, "]"));
        if (!metric.ok()) return metric.status();
        e->secondary_metrics.push_back(*metric);
      }
    }
    if (auto it = f.find("guardrails"); it != f.end()) {
      if (absl::Status s = ReadGuardrails(it->second.second, "spec.guardrails", &e->guardrails);
          !s.ok()) {
        return s;
      }
    }
    if (auto it = f.find("segments"); it != f.end()) {
      if (absl::Status s = ReadSegmentKeys(it->second.second, "spec.segments", &e->segment_keys);
          !s.ok()) {
        return s;
      }
    }
    if (auto it = f.find("minAdaptersPerArm"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, "spec.minAdaptersPerArm",
                                             "minAdaptersPerArm", 2, kMaxMinAdaptersPerArm);
      if (!n.ok()) return n.status();
      e->min_adapters_per_arm = *n;
    }
    if (auto it = f.find("minWindowsPerArm"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, "spec.minWindowsPerArm",
                                             "minWindowsPerArm", 1, kMaxMinWindowsPerArm);
      if (!n.ok()) return n.status();
      e->min_windows_per_arm = *n;
    }
    if (auto it = f.find("priority"); it != f.end()) {
      absl::StatusOr<int64_t> priority = ReadInt(it->second.second, "spec.priority");
      if (!priority.ok()) return priority.status();
      if (absl::Status s = common::CheckPriority(*priority); !s.ok()) {
        return Error(it->second.second, "spec.priority", s.message());
      }
      e->priority = static_cast<int>(*priority);
    }
    if (auto it = f.find("seed"); it != f.end()) {
      uint64_t seed = 0;
      const YAML::Node& seed_node = it->second.second;
      if (!seed_node.IsScalar() || !absl::SimpleAtoi(seed_node.Scalar(), &seed)) {
        return Error(seed_node, "spec.seed",
                     absl::StrCat("must be an unsigned 64-bit integer, found ", Found(seed_node)));
      }
      e->seed = seed;
    }
    if (auto it = f.find("probe"); it != f.end()) {
      if (absl::Status s = ReadProbe(it->second.second, e); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Ranges of arm settings are checked with the other rules (CheckExperiment).
  static constexpr common::SettingsReadOptions kArmSettings{.hold_us_range_in_us = false,
                                                            .check_buffer_range = false};
};

}  // namespace

std::string_view DesignName(Design design) {
  return design == Design::kSwitchback ? "switchback" : "parallel";
}

std::string_view GuardrailOpSymbol(GuardrailOp op) {
  return op == GuardrailOp::kAtLeast ? ">=" : "<=";
}

size_t Experiment::ControlIndex() const { return ArmIndex(control_arm).value_or(arms.size()); }

std::optional<size_t> Experiment::ArmIndex(std::string_view arm_name) const {
  for (size_t i = 0; i < arms.size(); ++i) {
    if (arms[i].name == arm_name) return i;
  }
  return std::nullopt;
}

uint32_t Experiment::TotalWeight() const {
  uint32_t total = 0;
  for (const Arm& arm : arms) total += arm.weight;
  return total;
}

uint32_t Experiment::PeriodCount() const {
  if (design != Design::kSwitchback || period_length <= absl::ZeroDuration()) return 1;
  absl::Duration remainder;
  const int64_t full = absl::IDivDuration(duration, period_length, &remainder);
  return static_cast<uint32_t>(full + (remainder > absl::ZeroDuration() ? 1 : 0));
}

std::vector<Metric> Experiment::ReportedMetrics() const {
  std::vector<Metric> metrics;
  metrics.reserve(1 + secondary_metrics.size());
  metrics.push_back(primary_metric);
  for (Metric metric : secondary_metrics) metrics.push_back(metric);
  return metrics;
}

uint32_t Experiment::MinAdapters(const Guardrail& guardrail) const {
  return guardrail.min_adapters.value_or(min_adapters_per_arm);
}

uint32_t Experiment::MinWindows(const Guardrail& guardrail) const {
  return guardrail.min_windows.value_or(min_windows_per_arm);
}

bool Experiment::NamesProbeMetric() const {
  if (IsProbeMetric(primary_metric)) return true;
  for (Metric m : secondary_metrics) {
    if (IsProbeMetric(m)) return true;
  }
  for (const Guardrail& g : guardrails) {
    if (IsProbeMetric(g.metric)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<Experiment>> ParseExperimentDocuments(std::string_view std_text,
                                                                 std::string_view std_source) {
  ExperimentReader reader(ToAbslView(std_source));
  absl::StatusOr<std::vector<YAML::Node>> docs = reader.LoadDocuments(
      ToAbslView(std_text), "experiment", kMaxExperimentInputBytes, kMaxExperimentDocuments);
  if (!docs.ok()) return docs.status();
  return reader.ReadNamedDocuments<Experiment>(
      *docs, "experiment", [&](const YAML::Node& doc) { return reader.ReadDocument(doc); });
}

absl::StatusOr<Experiment> ParseExperiment(std::string_view text, std::string_view source) {
  absl::StatusOr<std::vector<Experiment>> all = ParseExperimentDocuments(text, source);
  if (!all.ok()) return all.status();
  if (all->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbslView(source), ": expected exactly one ",
                                                   "Experiment document, found ", all->size()));
  }
  return std::move(all->front());
}

absl::Status ValidateExperiment(const Experiment& experiment) {
  if (CheckResult problem = CheckExperiment(experiment)) {
    return absl::InvalidArgumentError(absl::StrCat("experiment '", experiment.name,
                                                   "': ", problem->field, ": ", problem->message));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::experiments
