#include "common/proto/experiment.h"

#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/proto/checked_duration.h"
#include "common/proto/convert.h"
#include "common/proto/probe.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::experiments {

v1::Guardrail GuardrailToProto(const Guardrail& g) {
  v1::Guardrail out;
  out.set_metric(std::string(MetricName(g.metric)));
  out.set_comparator(g.op == GuardrailOp::kAtMost ? v1::COMPARATOR_GREATER_THAN
                                                  : v1::COMPARATOR_LESS_THAN);
  out.set_threshold(g.threshold);
  out.set_relative_to_control(false);
  if (g.min_windows) out.set_min_windows(*g.min_windows);
  if (g.min_adapters) out.set_min_adapters(*g.min_adapters);
  return out;
}

absl::StatusOr<Guardrail> GuardrailFromProto(const v1::Guardrail& in, std::string_view path_in) {
  const absl::string_view path = common::ToAbslView(path_in);
  Guardrail g;
  absl::StatusOr<Metric> m = ParseMetric(in.metric());
  if (!m.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".metric: ", m.status().message()));
  }
  g.metric = *m;
  switch (in.comparator()) {
    case v1::COMPARATOR_GREATER_THAN:
      g.op = GuardrailOp::kAtMost;
      break;
    case v1::COMPARATOR_LESS_THAN:
      g.op = GuardrailOp::kAtLeast;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          path, ".comparator: must be COMPARATOR_LESS_THAN or COMPARATOR_GREATER_THAN"));
  }
  if (in.relative_to_control()) {
    return absl::InvalidArgumentError(absl::StrCat(path,
                                                   ".relative_to_control: relative guardrails "
                                                   "are not supported; use an absolute threshold"));
  }
  g.threshold = in.threshold();
  if (in.min_windows() != 0) g.min_windows = in.min_windows();
  if (in.min_adapters() != 0) g.min_adapters = in.min_adapters();
  return g;
}

v1::ExperimentSpec ExperimentSpecToProto(const Experiment& e) {
  v1::ExperimentSpec spec;
  *spec.mutable_selector() = common::SelectorToProto(e.selector);
  for (const Arm& arm : e.arms) {
    v1::ExperimentArm* out = spec.add_arms();
    out->set_name(arm.name);
    *out->mutable_settings() = common::RxAggSettingsToProto(arm.settings);
    out->set_weight(arm.weight);
  }
  spec.set_control_arm(e.control_arm);
  spec.set_design(e.design == Design::kSwitchback ? v1::EXPERIMENT_DESIGN_SWITCHBACK
                                                  : v1::EXPERIMENT_DESIGN_PARALLEL);
  *spec.mutable_duration() = common::DurationToProto(e.duration);
  *spec.mutable_window_length() = common::DurationToProto(e.window_length);
  if (e.design == Design::kSwitchback) {
    *spec.mutable_period_length() = common::DurationToProto(e.period_length);
  }
  *spec.mutable_burn_in() = common::DurationToProto(e.burn_in);
  spec.set_primary_metric(std::string(MetricName(e.primary_metric)));
  for (Metric m : e.secondary_metrics) spec.add_secondary_metrics(std::string(MetricName(m)));
  for (const Guardrail& g : e.guardrails) *spec.add_guardrails() = GuardrailToProto(g);
  for (const std::string& key : e.segment_keys) spec.add_segment_label_keys(key);
  spec.set_priority(e.priority);
  spec.set_seed(e.seed);
  spec.set_min_adapters_per_arm(e.min_adapters_per_arm);
  spec.set_min_windows_per_arm(e.min_windows_per_arm);
  if (e.probe) {
    *spec.mutable_probe() = common::ProbeSpecToProto(*e.probe);
    spec.mutable_probe()->clear_interval();  // policies only
  }
  return spec;
}

v1::Experiment ExperimentToProto(const Experiment& e) {
  v1::Experiment out;
  out.mutable_metadata()->set_name(e.name);
  common::LabelsToProto(e.labels, out.mutable_metadata()->mutable_labels());
  out.mutable_metadata()->set_resource_version(e.resource_version);
  *out.mutable_spec() = ExperimentSpecToProto(e);
  return out;
}

absl::StatusOr<Experiment> ExperimentFromProto(const v1::Experiment& in, std::string_view source) {
  const std::string& name = in.metadata().name();
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("experiment '", name, "': ", message));
  };
  const v1::ExperimentSpec& spec = in.spec();
  Experiment e;
  e.name = name;
  e.labels = common::LabelsFromProto(in.metadata().labels());
  e.resource_version = in.metadata().resource_version();
  e.source = std::string(source);
  absl::StatusOr<common::Selector> selector = common::SelectorFromProto(spec.selector());
  if (!selector.ok()) return fail(selector.status().message());
  e.selector = *std::move(selector);
  for (const v1::ExperimentArm& arm : spec.arms()) {
    e.arms.push_back(Arm{arm.name(), common::RxAggSettingsFromProto(arm.settings()), arm.weight()});
  }
  e.control_arm = spec.control_arm();
  if (e.control_arm.empty() && !e.arms.empty()) e.control_arm = e.arms.front().name;
  switch (spec.design()) {
    case v1::EXPERIMENT_DESIGN_PARALLEL:
      e.design = Design::kParallel;
      break;
    case v1::EXPERIMENT_DESIGN_SWITCHBACK:
      e.design = Design::kSwitchback;
      break;
    default:
      return fail(
          "spec.design: must be EXPERIMENT_DESIGN_PARALLEL or EXPERIMENT_DESIGN_SWITCHBACK");
  }
  // Durations from the wire: a mixed-sign or out-of-range value is refused, not folded.
  absl::Duration window_length = absl::ZeroDuration();
  for (const auto& [field, in_duration, out] :
       {std::tuple<const char*, const google::protobuf::Duration*, absl::Duration*>{
            "spec.duration", &spec.duration(), &e.duration},
        {"spec.window_length", &spec.window_length(), &window_length},
        {"spec.period_length", &spec.period_length(), &e.period_length},
        {"spec.burn_in", &spec.burn_in(), &e.burn_in}}) {
    absl::StatusOr<absl::Duration> value = common::CheckedDurationFromProto(*in_duration, field);
    if (!value.ok()) return fail(value.status().message());
    *out = *value;
  }
  if (spec.has_window_length() && window_length != absl::ZeroDuration()) {
    e.window_length = window_length;
  }
  absl::StatusOr<Metric> primary = ParseMetric(spec.primary_metric());
  if (!primary.ok()) return fail(absl::StrCat("spec.primary_metric: ", primary.status().message()));
  e.primary_metric = *primary;
  for (int i = 0; i < spec.secondary_metrics_size(); ++i) {
    absl::StatusOr<Metric> m = ParseMetric(spec.secondary_metrics(i));
    if (!m.ok()) {
      return fail(absl::StrCat("spec.secondary_metrics[", i, "]: ", m.status().message()));
    }
    e.secondary_metrics.push_back(*m);
  }
  for (int i = 0; i < spec.guardrails_size(); ++i) {
    absl::StatusOr<Guardrail> g =
        GuardrailFromProto(spec.guardrails(i), absl::StrCat("spec.guardrails[", i, "]"));
    if (!g.ok()) return fail(g.status().message());
    e.guardrails.push_back(*g);
  }
  e.segment_keys.assign(spec.segment_label_keys().begin(), spec.segment_label_keys().end());
  e.priority = spec.priority();
  e.seed = spec.seed();
  if (spec.min_adapters_per_arm() != 0) e.min_adapters_per_arm = spec.min_adapters_per_arm();
  if (spec.min_windows_per_arm() != 0) e.min_windows_per_arm = spec.min_windows_per_arm();
  if (spec.has_probe()) {
    v1::ProbeSpec without_interval = spec.probe();
    without_interval.clear_interval();  // policies only; ignored here
    absl::StatusOr<common::ProbeSpec> probe =
        common::ProbeSpecFromProto(without_interval, "spec.probe");
    if (!probe.ok()) return fail(probe.status().message());
    e.probe = *std::move(probe);
  }
  if (absl::Status s = ValidateExperiment(e); !s.ok()) return s;
  return e;
}

}  // namespace rxfleet::experiments
