#include "agent/reconcile/policy_set.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "common/validation.h"

namespace rxfleet::agent {
namespace {

absl::Status ValidateAssignment(const ExperimentAssignment& a,
                                const std::map<std::string, common::RxAggLayout>& layouts) {
  if (absl::Status s = common::ValidateAdapterId(a.adapter_id); !s.ok()) return s;
  if (absl::Status s = common::ValidateExperimentName(a.experiment); !s.ok()) return s;
  if (a.arm.empty()) return absl::InvalidArgumentError("arm is empty");
  if (absl::Status s = common::ValidateLabelValue(a.arm); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("arm: ", s.message()));
  }
  if (a.priority < common::kMinPolicyPriority || a.priority > common::kMaxPolicyPriority) {
    return absl::InvalidArgumentError(absl::StrFormat("priority %d is outside %d..%d", a.priority,
                                                      common::kMinPolicyPriority,
                                                      common::kMaxPolicyPriority));
  }
  if (a.window_length < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("window_length must not be negative");
  }
  if (a.burn_in < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("burn_in must not be negative");
  }
  if (a.period_start && a.period_end && *a.period_start > *a.period_end) {
    return absl::InvalidArgumentError("period_start_time is after period_end_time");
  }
  if (a.settings.Empty()) return absl::InvalidArgumentError("settings set no field");
  if (absl::Status s = common::ValidateRxAggSettings(a.settings); !s.ok()) return s;
  if (auto it = layouts.find(a.adapter_id); it != layouts.end()) {
    if (absl::Status s = common::ValidateRxAggSettingsForLayout(it->second, a.settings); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.message(), " (layout ", common::ToAbslView(common::RxAggLayoutName(it->second)), ")"));
    }
  }
  return absl::OkStatus();
}

bool Active(const ExperimentAssignment& a, absl::Time wall_now) {
  return !a.period_end.has_value() || *a.period_end > wall_now;
}

}  // namespace

absl::Status ValidateServerBundle(const ServerBundle& bundle,
                                  const std::map<std::string, common::RxAggLayout>& layouts) {
  if (bundle.version == 0) return absl::InvalidArgumentError("bundle version must be >= 1");
  std::set<std::string, std::less<>> names;
  for (const common::Policy& policy : bundle.policies) {
    if (absl::Status s = common::ValidatePolicy(policy); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("server policy: ", s.message()));
    }
    if (!names.insert(policy.name).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("server policy %s: duplicate name in bundle", policy.name));
    }
  }
  std::set<std::pair<std::string, std::string>> enrolled;
  for (size_t i = 0; i < bundle.assignments.size(); ++i) {
    const ExperimentAssignment& a = bundle.assignments[i];
    if (absl::Status s = ValidateAssignment(a, layouts); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("assignment %d (experiment %s, adapter %s): %s", i, a.experiment,
                          a.adapter_id, s.message()));
    }
    if (!enrolled.emplace(a.adapter_id, a.experiment).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("assignment %d: adapter %s is assigned to experiment %s twice", i,
                          a.adapter_id, a.experiment));
    }
  }
  return absl::OkStatus();
}

common::ArmInEffect ArmOf(const ExperimentAssignment& assignment) {
  return {assignment.experiment, assignment.arm, assignment.priority, assignment.settings};
}

PolicySet::PolicySet(std::vector<common::Policy> local, std::optional<ServerBundle> server)
    : local_(std::move(local)), server_(std::move(server)) {}

DesiredSettings PolicySet::Resolve(const common::AdapterAttributes& adapter,
                                   absl::Time wall_now) const {
  DesiredSettings desired;
  desired.bundle_version = bundle_version();

  common::PolicyLayers layers;
  layers.local = &local_;
  if (server_) {
    layers.server = &server_->policies;
    layers.bundle_version = server_->version;
    for (const ExperimentAssignment& a : server_->assignments) {
      if (a.adapter_id != adapter.adapter_id || !Active(a, wall_now)) continue;
      layers.experiments.push_back(ArmOf(a));
      desired.experiments[a.experiment] = a.arm;
    }
  }
  common::LayeredSettings layered = common::ResolveLayers(adapter, layers);
  desired.resolved = std::move(layered.resolved);
  desired.origins = std::move(layered.origins);
  return desired;
}

std::optional<common::Resolved<common::ProbeSpec>> PolicySet::ResolveProbe(
    const common::AdapterAttributes& adapter) const {
  std::vector<common::PolicyLayer> layers = {{common::PolicySource::kLocalFile, &local_}};
  if (server_) layers.push_back({common::PolicySource::kServerPolicy, &server_->policies});
  return common::ResolveProbe(adapter, layers);
}

std::optional<absl::Duration> PolicySet::ProbeSlot(const std::string& adapter_id,
                                                   const std::string& policy) const {
  if (!server_) return std::nullopt;
  auto it = server_->probe_slots.find(adapter_id);
  if (it == server_->probe_slots.end() || it->second.first != policy) return std::nullopt;
  return it->second.second;
}

std::optional<absl::Time> PolicySet::NextExpiry(absl::Time wall_now) const {
  std::optional<absl::Time> next;
  if (!server_) return next;
  for (const ExperimentAssignment& a : server_->assignments) {
    if (!a.period_end || *a.period_end <= wall_now) continue;
    if (!next || *a.period_end < *next) next = *a.period_end;
  }
  return next;
}

}  // namespace rxfleet::agent
