#include "common/policy/precedence.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rxfleet::common {
namespace {

const Policy* FindByName(const std::vector<Policy>* policies, std::string_view name) {
  if (policies == nullptr) return nullptr;
  for (const Policy& p : *policies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::optional<Provenance> ProvenanceOf(const ResolvedSettings& r, std::string_view field) {
  if (field == "hold_us" && r.hold_us) return r.hold_us->provenance;
  if (field == "count_threshold" && r.count_threshold) return r.count_threshold->provenance;
  if (field == "buffer_kib" && r.buffer_kib) return r.buffer_kib->provenance;
  if (field == "enable" && r.enable) return r.enable->provenance;
  return std::nullopt;
}

std::string DescribeOrigin(const SettingOrigin& origin) {
  if (origin.provenance.source == PolicySource::kBuiltinDefault) {
    return origin.provenance.ToString();
  }
  return absl::StrCat(origin.provenance.ToString(), " (priority ", origin.priority, ")");
}

}  // namespace

bool SetsField(const RxAggSettings& settings, std::string_view field) {
  if (field == "hold_us") return settings.hold_us.has_value();
  if (field == "count_threshold") return settings.count_threshold.has_value();
  if (field == "buffer_kib") return settings.buffer_kib.has_value();
  if (field == "enable") return settings.enable.has_value();
  return false;
}

Policy ArmPolicy(const ArmInEffect& arm, std::string_view adapter_id) {
  Policy policy;
  policy.name = arm.experiment;
  policy.labels[std::string(kExperimentLabel)] = arm.experiment;
  policy.labels[std::string(kExperimentArmLabel)] = arm.arm;
  policy.priority = arm.priority;
  policy.selector.adapters = {std::string(adapter_id)};
  policy.settings = arm.settings;
  policy.source = "server";
  return policy;
}

LayeredSettings ResolveLayers(const AdapterAttributes& adapter, const PolicyLayers& layers) {
  std::vector<Policy> arm_policies;
  arm_policies.reserve(layers.experiments.size());
  for (const ArmInEffect& arm : layers.experiments) {
    arm_policies.push_back(ArmPolicy(arm, adapter.adapter_id));
  }
  const PolicyLayer resolver_layers[] = {
      {PolicySource::kLocalFile, layers.local},
      {PolicySource::kServerPolicy, layers.server},
      {PolicySource::kExperiment, &arm_policies},
  };
  LayeredSettings out;
  out.resolved = Resolve(adapter, resolver_layers);

  auto origin = [&](const Provenance& provenance) {
    SettingOrigin o;
    o.provenance = provenance;
    switch (provenance.source) {
      case PolicySource::kBuiltinDefault:
        break;
      case PolicySource::kLocalFile:
        if (const Policy* p = FindByName(layers.local, provenance.name)) {
          o.priority = p->priority;
          o.location = p->source;
        }
        break;
      case PolicySource::kServerPolicy:
        if (const Policy* p = FindByName(layers.server, provenance.name)) o.priority = p->priority;
        o.bundle_version = layers.bundle_version;
        break;
      case PolicySource::kExperiment:
        for (const ArmInEffect& arm : layers.experiments) {
          if (provenance.name == absl::StrCat("experiment ", arm.experiment, " arm ", arm.arm)) {
            o.priority = arm.priority;
            o.experiment = arm.experiment;
            o.arm = arm.arm;
          }
        }
        o.bundle_version = layers.bundle_version;
        break;
    }
    return o;
  };
  for (std::string_view field : kSettingsFields) {
    if (std::optional<Provenance> p = ProvenanceOf(out.resolved, field)) {
      out.origins[std::string(field)] = origin(*p);
    }
  }
  return out;
}

std::vector<KeptField> FieldsKeptFromExperiment(const AdapterAttributes& adapter,
                                                const PolicyLayers& layers,
                                                const std::vector<ArmInEffect>& arms) {
  std::vector<KeptField> kept;
  PolicyLayers alone = layers;
  for (const ArmInEffect& arm : arms) {
    alone.experiments = {arm};
    const LayeredSettings settings = ResolveLayers(adapter, alone);
    for (std::string_view field : kSettingsFields) {
      if (!SetsField(arm.settings, field)) continue;
      auto it = settings.origins.find(std::string(field));
      if (it == settings.origins.end()) continue;  // cannot happen: the arm sets it
      if (it->second.provenance.source == PolicySource::kExperiment) continue;
      kept.push_back({arm.arm, std::string(field), it->second});
    }
  }
  return kept;
}

std::string DescribeKeptFields(const std::vector<KeptField>& kept) {
  // Decider description -> fields, in order of first appearance.
  std::vector<std::pair<std::string, std::vector<std::string>>> deciders;
  for (const KeptField& k : kept) {
    const std::string who = DescribeOrigin(k.decided);
    auto it = std::find_if(deciders.begin(), deciders.end(),
                           [&](const auto& entry) { return entry.first == who; });
    if (it == deciders.end()) {
      deciders.push_back({who, {k.field}});
    } else if (std::find(it->second.begin(), it->second.end(), k.field) == it->second.end()) {
      it->second.push_back(k.field);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [who, fields] : deciders) {
    parts.push_back(absl::StrCat(who, " decides ", absl::StrJoin(fields, ", ")));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace rxfleet::common
