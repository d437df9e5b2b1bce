#include "common/proto/tuning.h"

#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/proto/checked_duration.h"
#include "common/proto/convert.h"
#include "common/proto/experiment.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::tuning {

v1::HoldTuningSpec HoldTuningSpecToProto(const HoldTuning& t) {
  v1::HoldTuningSpec spec;
  *spec.mutable_selector() = common::SelectorToProto(t.selector);
  for (const std::string& key : t.segment_keys) spec.add_segment_label_keys(key);
  for (uint32_t hold : t.candidates_us) spec.add_candidate_hold_us(hold);
  spec.set_objective_metric(std::string(experiments::MetricName(t.objective.metric)));
  spec.set_objective_direction(t.objective.direction == Direction::kMinimize
                                   ? v1::TUNING_DIRECTION_MINIMIZE
                                   : v1::TUNING_DIRECTION_MAXIMIZE);
  for (const experiments::Guardrail& g : t.guardrails) {
    *spec.add_guardrails() = experiments::GuardrailToProto(g);
  }
  spec.set_adapter_share(t.budget.adapter_share);
  spec.set_max_windows(t.budget.max_windows);
  spec.set_min_effect(t.min_effect);
  *spec.mutable_window_length() = common::DurationToProto(t.window_length);
  *spec.mutable_period_length() = common::DurationToProto(t.period_length);
  *spec.mutable_burn_in() = common::DurationToProto(t.burn_in);
  spec.set_auto_apply(t.auto_apply);
  spec.set_recheck_share(t.recheck_share);
  spec.set_min_adapters_per_arm(t.min_adapters_per_arm);
  spec.set_min_windows_per_arm(t.min_windows_per_arm);
  return spec;
}

v1::HoldTuning HoldTuningToProto(const HoldTuning& t) {
  v1::HoldTuning out;
  out.mutable_metadata()->set_name(t.name);
  common::LabelsToProto(t.labels, out.mutable_metadata()->mutable_labels());
  out.mutable_metadata()->set_resource_version(t.resource_version);
  *out.mutable_spec() = HoldTuningSpecToProto(t);
  return out;
}

absl::StatusOr<HoldTuning> HoldTuningFromProto(const v1::HoldTuning& in, std::string_view source) {
  const std::string& name = in.metadata().name();
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("hold tuning '", name, "': ", message));
  };
  const v1::HoldTuningSpec& spec = in.spec();
  HoldTuning t;
  t.name = name;
  t.labels = common::LabelsFromProto(in.metadata().labels());
  t.resource_version = in.metadata().resource_version();
  t.source = std::string(source);

  absl::StatusOr<common::Selector> selector = common::SelectorFromProto(spec.selector());
  if (!selector.ok()) return fail(selector.status().message());
  t.selector = *std::move(selector);
  t.segment_keys.assign(spec.segment_label_keys().begin(), spec.segment_label_keys().end());
  t.candidates_us.assign(spec.candidate_hold_us().begin(), spec.candidate_hold_us().end());

  absl::StatusOr<experiments::Metric> objective = experiments::ParseMetric(spec.objective_metric());
  if (!objective.ok()) {
    return fail(absl::StrCat("spec.objective_metric: ", objective.status().message()));
  }
  t.objective.metric = *objective;
  switch (spec.objective_direction()) {
    case v1::TUNING_DIRECTION_MAXIMIZE:
      t.objective.direction = Direction::kMaximize;
      break;
    case v1::TUNING_DIRECTION_MINIMIZE:
      t.objective.direction = Direction::kMinimize;
      break;
    default:
      return fail(
          "spec.objective_direction: must be TUNING_DIRECTION_MAXIMIZE or "
          "TUNING_DIRECTION_MINIMIZE");
  }
  for (int i = 0; i < spec.guardrails_size(); ++i) {
    absl::StatusOr<experiments::Guardrail> g = experiments::GuardrailFromProto(
        spec.guardrails(i), absl::StrCat("spec.guardrails[", i, "]"));
    if (!g.ok()) return fail(g.status().message());
    t.guardrails.push_back(*g);
  }

  t.budget.adapter_share = spec.adapter_share();
  t.budget.max_windows = spec.max_windows();
  t.min_effect = spec.min_effect();
  // Durations from the wire: a mixed-sign or out-of-range value is refused, not folded; an
  // unset one is 0 (and then refused by the rules where 0 is not allowed).
  for (const auto& [field, in_duration, out] :
       {std::tuple<const char*, const google::protobuf::Duration*, absl::Duration*>{
            "spec.window_length", &spec.window_length(), &t.window_length},
        {"spec.period_length", &spec.period_length(), &t.period_length},
        {"spec.burn_in", &spec.burn_in(), &t.burn_in}}) {
    absl::StatusOr<absl::Duration> value = common::CheckedDurationFromProto(*in_duration, field);
    if (!value.ok()) return fail(value.status().message());
    *out = *value;
  }
  t.auto_apply = spec.auto_apply();
  t.recheck_share = spec.recheck_share();
  t.min_adapters_per_arm = spec.min_adapters_per_arm();
  t.min_windows_per_arm = spec.min_windows_per_arm();
  if (absl::Status s = ValidateHoldTuning(t); !s.ok()) return s;
  return t;
}

}  // namespace rxfleet::tuning
