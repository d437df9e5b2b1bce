#include "server/api/explain.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/chips/chip_table.h"
#include "common/proto/convert.h"
#include "common/string_view_compat.h"
#include "common/usb_speed.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

// The settings fields of v1::RxAggSettings that carry values (force_enable rides on enable).
struct Field {
  const char* name;
  std::function<std::optional<uint64_t>(const v1::RxAggSettings&)> get;
};

const std::vector<Field>& Fields() {
  static const std::vector<Field>* fields = new std::vector<Field>{
      {"hold_us",
       [](const v1::RxAggSettings& s) -> std::optional<uint64_t> {
         return s.has_hold_us() ? std::optional<uint64_t>(s.hold_us()) : std::nullopt;
       }},
      {"count_threshold",
       [](const v1::RxAggSettings& s) -> std::optional<uint64_t> {
         return s.has_count_threshold() ? std::optional<uint64_t>(s.count_threshold())
                                        : std::nullopt;
       }},
      {"buffer_kib",
       [](const v1::RxAggSettings& s) -> std::optional<uint64_t> {
         return s.has_buffer_kib() ? std::optional<uint64_t>(s.buffer_kib()) : std::nullopt;
       }},
      {"enable",
       [](const v1::RxAggSettings& s) -> std::optional<uint64_t> {
         return s.has_enable() ? std::optional<uint64_t>(s.enable()) : std::nullopt;
       }},
  };
  return *fields;
}

std::optional<uint64_t> ObservedField(const v1::DecodedRxAgg& decoded, std::string_view field) {
  if (field == "hold_us") return decoded.hold_us();
  if (field == "count_threshold") return decoded.count_threshold();
  if (field == "buffer_kib") return decoded.buffer_kib();
  if (field == "enable") return decoded.enable() ? 1 : 0;
  return std::nullopt;
}

std::string FormatValue(std::string_view field, uint64_t value) {
  if (field == "enable") return value != 0 ? "true" : "false";
  return absl::StrCat(value);
}

std::string DescribeProvenance(const v1::Provenance& p) {
  switch (p.source()) {
    case v1::SETTING_SOURCE_BUILT_IN_DEFAULT:
      return "built-in default";
    case v1::SETTING_SOURCE_LOCAL_FILE:
      return p.file().empty() ? absl::StrCat("local policy ", p.name())
                              : absl::StrCat("local policy ", p.name(), " in ", p.file());
    case v1::SETTING_SOURCE_SERVER_POLICY:
      return absl::StrCat("server policy ", p.name());
    case v1::SETTING_SOURCE_EXPERIMENT:
      return absl::StrCat("experiment ", p.name(), " arm ", p.arm());
    case v1::SETTING_SOURCE_DRIVER:
      return "driver";
    default:
      return "unknown source";
  }
}

std::string DescribeFrom(const v1::EffectiveSettings& settings, std::string_view field) {
  auto it = settings.provenance().find(std::string(field));
  if (it == settings.provenance().end()) return "";
  return absl::StrCat(" (", DescribeProvenance(it->second), ")");
}

template <typename T, typename Format>
std::string FormatList(const std::vector<T>& items, Format format) {
  std::vector<std::string> out;
  for (const T& item : items) out.push_back(format(item));
  return absl::StrCat("[", absl::StrJoin(out, ", "), "]");
}

}  // namespace

bool IsManaged(const v1::Adapter& adapter) {
  switch (adapter.status().state()) {
    case v1::ADAPTER_STATE_GONE:
    case v1::ADAPTER_STATE_UNSUPPORTED:
    case v1::ADAPTER_STATE_STORAGE_MODE:
    case v1::ADAPTER_STATE_IGNORED_OTHER_VENDOR:
    case v1::ADAPTER_STATE_NO_DRIVER:
    case v1::ADAPTER_STATE_OBSERVED:  // observe-only chip family: read, never written
      return false;
    default:
      return true;
  }
}

common::AdapterAttributes AttributesOf(const v1::Adapter& adapter) {
  return common::AdapterAttributesFromProto(adapter,
                                            common::LabelsFromProto(adapter.metadata().labels()));
}

common::LayeredSettings ExpectedSettings(const common::AdapterAttributes& adapter,
                                         const std::vector<common::Policy>& policies,
                                         const ExperimentLayer* experiments,
                                         uint64_t bundle_version, std::string_view ended) {
  common::PolicyLayers layers;
  layers.server = &policies;
  layers.bundle_version = bundle_version;
  if (experiments != nullptr) layers.experiments = experiments->ArmsFor(adapter, policies, ended);
  return common::ResolveLayers(adapter, layers);
}

v1::EffectiveSettings ExpectedToProto(const common::LayeredSettings& expected,
                                      const PolicySnapshot& snapshot) {
  v1::EffectiveSettings out = common::EffectiveSettingsToProto(expected.resolved);
  for (auto& [field, provenance] : *out.mutable_provenance()) {
    // force_enable rides on enable's origin.
    auto origin = expected.origins.find(field == "force_enable" ? "enable" : field);
    if (origin == expected.origins.end()) continue;
    if (provenance.source() == v1::SETTING_SOURCE_BUILT_IN_DEFAULT) continue;
    provenance.set_priority(origin->second.priority);
    provenance.set_bundle_version(origin->second.bundle_version);
    if (provenance.source() != v1::SETTING_SOURCE_SERVER_POLICY) continue;
    auto it = snapshot.policies.find(provenance.name());
    if (it != snapshot.policies.end()) {
      provenance.set_generation(it->second.metadata().generation());
    }
  }
  return out;
}

std::string MismatchReason(const common::Selector& selector,
                           const common::AdapterAttributes& adapter) {
  for (const auto& [key, value] : selector.match_labels) {
    auto it = adapter.host_labels.find(key);
    if (it == adapter.host_labels.end()) {
      return absl::StrCat("host has no label ", key, " (wants ", key, "=", value, ")");
    }
    if (it->second != value) {
      return absl::StrCat("host label ", key, "=", it->second, " (wants ", key, "=", value, ")");
    }
  }
  auto speed_name = [](common::UsbSpeed s) { return std::string(common::UsbSpeedName(s)); };
  if (!selector.usb_speeds.empty() &&
      std::find(selector.usb_speeds.begin(), selector.usb_speeds.end(), adapter.usb_speed) ==
          selector.usb_speeds.end()) {
    return absl::StrCat("usb_speeds ", FormatList(selector.usb_speeds, speed_name),
                        " do not include ", speed_name(adapter.usb_speed));
  }
  auto same = [](const std::string& s) { return s; };
  if (!selector.chips.empty() && std::find(selector.chips.begin(), selector.chips.end(),
                                           adapter.chip) == selector.chips.end()) {
    return absl::StrCat("chips ", FormatList(selector.chips, same), " do not include ",
                        adapter.chip.empty() ? "an unknown chip" : adapter.chip);
  }
  const common::VidPid id{adapter.vid, adapter.pid};
  if (!selector.vid_pids.empty() && std::find(selector.vid_pids.begin(), selector.vid_pids.end(),
                                              id) == selector.vid_pids.end()) {
    return absl::StrCat(
        "vid_pids ",
        FormatList(selector.vid_pids,
                   [](const common::VidPid& v) { return common::FormatVidPid(v.vid, v.pid); }),
        " do not include ", common::FormatVidPid(adapter.vid, adapter.pid));
  }
  if (!selector.adapters.empty() && std::find(selector.adapters.begin(), selector.adapters.end(),
                                              adapter.adapter_id) == selector.adapters.end()) {
    return absl::StrCat("adapters ", FormatList(selector.adapters, same), " do not include ",
                        adapter.adapter_id);
  }
  return "";
}

std::vector<v1::AffectedAdapter> AffectedAdapters(
    const std::vector<v1::Adapter>& adapters, const std::vector<common::Policy>& before,
    const std::vector<common::Policy>& after, const std::vector<const common::Selector*>& changed,
    const ExperimentLayer* experiments, std::string_view ended) {
  std::vector<v1::AffectedAdapter> out;
  for (const v1::Adapter& adapter : adapters) {
    if (!IsManaged(adapter)) continue;
    const common::AdapterAttributes attributes = AttributesOf(adapter);
    if (std::none_of(changed.begin(), changed.end(), [&](const common::Selector* selector) {
          return common::Matches(*selector, attributes);
        })) {
      continue;  // the candidates are the same before and after
    }
    const common::RxAggSettings old_settings =
        ExpectedSettings(attributes, before, experiments, 0, ended).Settings();
    const common::RxAggSettings new_settings =
        ExpectedSettings(attributes, after, experiments, 0, ended).Settings();
    if (old_settings == new_settings) continue;
    v1::AffectedAdapter& affected = out.emplace_back();
    affected.mutable_adapter()->set_kind("Adapter");
    affected.mutable_adapter()->set_name(adapter.metadata().name());
    affected.mutable_adapter()->set_host_id(adapter.host_id());
    *affected.mutable_before() = common::RxAggSettingsToProto(old_settings);
    *affected.mutable_after() = common::RxAggSettingsToProto(new_settings);
  }
  return out;
}

std::map<std::string, v1::PolicyStatus> PolicyStatuses(const PolicySnapshot& snapshot,
                                                       const std::vector<v1::Adapter>& adapters,
                                                       const ExperimentLayer* experiments,
                                                       const std::string* only) {
  std::map<std::string, uint32_t> matched, effective;
  for (const v1::Adapter& adapter : adapters) {
    if (!IsManaged(adapter)) continue;
    const common::AdapterAttributes attributes = AttributesOf(adapter);
    bool relevant = only == nullptr;
    for (const common::Policy& policy : snapshot.valid) {
      if (only != nullptr && policy.name != *only) continue;
      if (common::Matches(policy.selector, attributes)) {
        ++matched[policy.name];
        relevant = true;
      }
    }
    if (!relevant) continue;  // `only` cannot decide anything here
    const common::LayeredSettings expected =
        ExpectedSettings(attributes, snapshot.valid, experiments);
    std::set<std::string> deciders;
    for (const auto& [field, origin] : expected.origins) {
      if (origin.provenance.source == common::PolicySource::kServerPolicy) {
        deciders.insert(origin.provenance.name);
      }
    }
    // A policy's probe is decided whole, like a field (common::ResolveProbe).
    const std::vector<common::PolicyLayer> probe_layers = {
        {common::PolicySource::kServerPolicy, &snapshot.valid}};
    if (std::optional<common::Resolved<common::ProbeSpec>> probe =
            common::ResolveProbe(attributes, probe_layers)) {
      deciders.insert(probe->provenance.name);
    }
    for (const std::string& name : deciders) ++effective[name];
  }
  std::map<std::string, v1::PolicyStatus> out;
  for (const auto& [name, policy] : snapshot.policies) {
    if (only != nullptr && name != *only) continue;
    v1::PolicyStatus& status = out[name];
    status.set_observed_generation(policy.metadata().generation());
    status.set_matched_adapters(matched[name]);
    status.set_effective_adapters(effective[name]);
    v1::Condition* valid = status.add_conditions();
    valid->set_type("Valid");
    auto invalid = snapshot.invalid.find(name);
    if (invalid == snapshot.invalid.end()) {
      valid->set_status(v1::CONDITION_STATUS_TRUE);
      valid->set_reason("Validated");
    } else {
      valid->set_status(v1::CONDITION_STATUS_FALSE);
      valid->set_reason("InvalidSpec");
      valid->set_message(invalid->second);
    }
    valid->set_observed_generation(policy.metadata().generation());
    *valid->mutable_last_transition_time() = policy.metadata().update_time();
    v1::Condition* shadowed = status.add_conditions();
    shadowed->set_type("Shadowed");
    const bool is_shadowed = matched[name] > 0 && effective[name] == 0;
    shadowed->set_status(is_shadowed ? v1::CONDITION_STATUS_TRUE : v1::CONDITION_STATUS_FALSE);
    shadowed->set_reason(is_shadowed ? "OutRanked" : "Decides");
    if (is_shadowed) {
      shadowed->set_message(
          "every field (and the probe) this policy sets is decided by a higher-priority policy "
          "or a running experiment on all matched adapters");
    }
    shadowed->set_observed_generation(policy.metadata().generation());
  }
  return out;
}

v1::ExplainAdapterResponse Explain(const v1::Adapter& adapter, const v1::Host& host,
                                   const PolicySnapshot& snapshot,
                                   const ExperimentLayer* experiments) {
  v1::ExplainAdapterResponse out;
  *out.mutable_adapter() = adapter;
  const common::AdapterAttributes attributes = AttributesOf(adapter);
  common::PolicyLayers layers;
  layers.server = &snapshot.valid;
  layers.bundle_version = snapshot.bundle_version;
  if (experiments != nullptr) {
    if (std::optional<v1::ExperimentAssignment> assignment =
            experiments->AssignmentFor(attributes, snapshot.valid)) {
      layers.experiments.push_back(ExperimentLayer::ArmOf(*assignment));
      *out.mutable_assignment() = *std::move(assignment);
    }
  }
  *out.mutable_expected() = ExpectedToProto(common::ResolveLayers(attributes, layers), snapshot);
  out.set_latest_bundle_version(snapshot.bundle_version);
  out.set_acked_bundle_version(host.status().last_acked_version());

  for (const auto& [name, policy] : snapshot.policies) {
    v1::PolicyMatch* match = out.add_policies();
    match->set_policy(name);
    match->set_priority(policy.spec().priority());
    auto invalid = snapshot.invalid.find(name);
    if (invalid != snapshot.invalid.end()) {
      match->set_reason(absl::StrCat("invalid policy: ", invalid->second));
      continue;
    }
    const auto valid = std::find_if(snapshot.valid.begin(), snapshot.valid.end(),
                                    [&](const common::Policy& p) { return p.name == name; });
    if (valid == snapshot.valid.end()) continue;
    const std::string reason = MismatchReason(valid->selector, attributes);
    match->set_matched(reason.empty());
    match->set_reason(reason);
    for (const auto& [field, provenance] : out.expected().provenance()) {
      if (provenance.source() == v1::SETTING_SOURCE_SERVER_POLICY && provenance.name() == name) {
        match->add_decided_fields(field);
      }
    }
  }

  // Differences: what the server expects vs what the agent wants vs what the register holds.
  if (!IsManaged(adapter)) {
    out.add_differences(absl::StrCat("adapter state ",
                                     v1::AdapterState_Name(adapter.status().state()),
                                     ": its RX aggregation is not managed"));
  } else {
    const v1::EffectiveSettings& expected = out.expected();
    const v1::EffectiveSettings& desired = adapter.status().desired();
    const bool has_observed =
        adapter.status().has_observed() && adapter.status().observed().has_decoded();
    for (const Field& field : Fields()) {
      const std::optional<uint64_t> want = field.get(expected.settings());
      const std::optional<uint64_t> agent = field.get(desired.settings());
      if (want != agent) {
        out.add_differences(
            absl::StrCat(field.name, ": expected ",
                         want ? FormatValue(field.name, *want) + DescribeFrom(expected, field.name)
                              : "no value (left to the driver)",
                         ", agent ",
                         agent ? FormatValue(field.name, *agent) + DescribeFrom(desired, field.name)
                               : "sets no value"));
        continue;
      }
      if (agent && has_observed) {
        const std::optional<uint64_t> observed =
            ObservedField(adapter.status().observed().decoded(), field.name);
        if (observed != agent) {
          out.add_differences(absl::StrCat(field.name, ": agent wants ",
                                           FormatValue(field.name, *agent), ", register holds ",
                                           FormatValue(field.name, observed.value_or(0))));
        }
      }
    }
    if (!has_observed) out.add_differences("registers not read yet");
  }
  out.set_in_sync(out.differences().empty());
  return out;
}

}  // namespace rxfleet::server
