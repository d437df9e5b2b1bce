#include "common/policy/resolver.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/units.h"

namespace rxfleet::common {
namespace {

// Builtin-default holds (seed measurements, see BuiltinDefaultPolicy in resolver.h).
constexpr uint32_t kUsb3HoldUs = 32;
constexpr uint32_t kUsb2HoldUs = 1024;

int SourceRank(PolicySource source) {
  switch (source) {
    case PolicySource::kBuiltinDefault:
      return 0;
    case PolicySource::kLocalFile:
      return 1;
    case PolicySource::kServerPolicy:
      return 2;
    case PolicySource::kExperiment:
      return 3;
  }
  return 0;
}

Provenance MakeProvenance(PolicySource source, const Policy& policy) {
  if (source == PolicySource::kExperiment) {
    auto experiment = policy.labels.find(std::string(kExperimentLabel));
    auto arm = policy.labels.find(std::string(kExperimentArmLabel));
    if (experiment != policy.labels.end() && arm != policy.labels.end()) {
      return {source, absl::StrCat("experiment ", experiment->second, " arm ", arm->second)};
    }
  }
  return {source, policy.name};
}

struct Candidate {
  PolicySource source;
  const Policy* policy;
};

// True if a beats b: higher builtin-or-not tier, then priority, then source, then smaller name.
bool Beats(const Candidate& a, const Candidate& b) {
  const bool a_builtin = a.source == PolicySource::kBuiltinDefault;
  const bool b_builtin = b.source == PolicySource::kBuiltinDefault;
  if (a_builtin != b_builtin) return !a_builtin;
  if (a.policy->priority != b.policy->priority) return a.policy->priority > b.policy->priority;
  if (SourceRank(a.source) != SourceRank(b.source)) {
    return SourceRank(a.source) > SourceRank(b.source);
  }
  return a.policy->name < b.policy->name;
}

template <typename T, typename Getter>
std::optional<Resolved<T>> ResolveField(const std::vector<Candidate>& candidates, Getter get,
                                        const Candidate** winner_out = nullptr) {
  const Candidate* winner = nullptr;
  for (const Candidate& c : candidates) {
    if (!get(c.policy->settings).has_value()) continue;
    if (winner == nullptr || Beats(c, *winner)) winner = &c;
  }
  if (winner_out != nullptr) *winner_out = winner;
  if (winner == nullptr) return std::nullopt;
  return Resolved<T>{*get(winner->policy->settings),
                     MakeProvenance(winner->source, *winner->policy)};
}

}  // namespace

std::string_view PolicySourceName(PolicySource source) {
  switch (source) {
    case PolicySource::kBuiltinDefault:
      return "builtin-default";
    case PolicySource::kLocalFile:
      return "local-file";
    case PolicySource::kServerPolicy:
      return "server";
    case PolicySource::kExperiment:
      return "experiment";
  }
  return "unknown";
}

std::string Provenance::ToString() const {
  switch (source) {
    case PolicySource::kBuiltinDefault:
      return std::string(kBuiltinDefaultPolicyName);
    case PolicySource::kLocalFile:
      return absl::StrCat("local policy ", name);
    case PolicySource::kServerPolicy:
      return absl::StrCat("server policy ", name);
    case PolicySource::kExperiment:
      return name.starts_with("experiment ") ? name : absl::StrCat("experiment policy ", name);
  }
  return name;
}

RxAggSettings ResolvedSettings::ToSettings() const {
  RxAggSettings settings;
  if (hold_us) settings.hold_us = hold_us->value;
  if (count_threshold) settings.count_threshold = count_threshold->value;
  if (buffer_kib) settings.buffer_kib = buffer_kib->value;
  if (enable) settings.enable = enable->value;
  settings.force_enable = enable.has_value() && enable->value && force_enable;
  return settings;
}

std::optional<Resolved<ProbeSpec>> ResolveProbe(const AdapterAttributes& adapter,
                                                absl::Span<const PolicyLayer> layers) {
  std::optional<Candidate> winner;
  for (const PolicyLayer& layer : layers) {
    if (layer.policies == nullptr || layer.source == PolicySource::kBuiltinDefault) continue;
    for (const Policy& policy : *layer.policies) {
      if (!policy.probe.has_value() || !Matches(policy.selector, adapter)) continue;
      const Candidate candidate{layer.source, &policy};
      if (!winner.has_value() || Beats(candidate, *winner)) winner = candidate;
    }
  }
  if (!winner.has_value()) return std::nullopt;
  return Resolved<ProbeSpec>{*winner->policy->probe,
                             MakeProvenance(winner->source, *winner->policy)};
}

Policy BuiltinDefaultPolicy(UsbSpeed usb_speed) {
  Policy policy;
  policy.name = std::string(kBuiltinDefaultPolicyName);
  policy.priority = 0;
  if (usb_speed != UsbSpeed::kUnknown) policy.selector.usb_speeds = {usb_speed};
  policy.settings.hold_us = IsUsb3(usb_speed) ? kUsb3HoldUs : kUsb2HoldUs;
  policy.source = "builtin";
  return policy;
}

ResolvedSettings Resolve(const AdapterAttributes& adapter, absl::Span<const PolicyLayer> layers) {
  const Policy builtin = BuiltinDefaultPolicy(adapter.usb_speed);
  std::vector<Candidate> candidates = {{PolicySource::kBuiltinDefault, &builtin}};
  for (const PolicyLayer& layer : layers) {
    if (layer.policies == nullptr) continue;
    for (const Policy& policy : *layer.policies) {
      if (Matches(policy.selector, adapter)) candidates.push_back({layer.source, &policy});
    }
  }
  ResolvedSettings resolved;
  resolved.hold_us =
      ResolveField<uint32_t>(candidates, [](const RxAggSettings& s) { return s.hold_us; });
  resolved.count_threshold =
      ResolveField<uint32_t>(candidates, [](const RxAggSettings& s) { return s.count_threshold; });
  resolved.buffer_kib =
      ResolveField<uint32_t>(candidates, [](const RxAggSettings& s) { return s.buffer_kib; });
  const Candidate* enable_winner = nullptr;
  resolved.enable = ResolveField<bool>(
      candidates, [](const RxAggSettings& s) { return s.enable; }, &enable_winner);
  resolved.force_enable = enable_winner != nullptr && enable_winner->policy->settings.force_enable;
  return resolved;
}

}  // namespace rxfleet::common
