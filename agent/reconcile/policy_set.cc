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

const common::Policy* FindByName(const std::vector<common::Policy>& policies,
                                 std::string_view name) {
  for (const common::Policy& p : policies) {
    if (p.name == name) return &p;
  }
  return nullptr;
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

common::Policy AssignmentPolicy(const ExperimentAssignment& assignment) {
  common::Policy policy;
  policy.name = assignment.experiment;
  policy.labels[std::string(common::kExperimentLabel)] = assignment.experiment;
  policy.labels[std::string(common::kExperimentArmLabel)] = assignment.arm;
  policy.priority = assignment.priority;
  policy.selector.adapters = {assignment.adapter_id};
  policy.settings = assignment.settings;
  policy.source = "server";
  return policy;
}

PolicySet::PolicySet(std::vector<common::Policy> local, std::optional<ServerBundle> server)
    : local_(std::move(local)), server_(std::move(server)) {}

DesiredSettings PolicySet::Resolve(const common::AdapterAttributes& adapter,
                                   absl::Time wall_now) const {
  DesiredSettings desired;
  desired.bundle_version = bundle_version();

  std::vector<common::Policy> experiment_policies;
  std::vector<const ExperimentAssignment*> assignments;
  if (server_) {
    for (const ExperimentAssignment& a : server_->assignments) {
      if (a.adapter_id != adapter.adapter_id || !Active(a, wall_now)) continue;
      experiment_policies.push_back(AssignmentPolicy(a));
      assignments.push_back(&a);
      desired.experiments[a.experiment] = a.arm;
    }
  }
  std::vector<common::PolicyLayer> layers = {
      {common::PolicySource::kLocalFile, &local_},
      {common::PolicySource::kServerPolicy, server_ ? &server_->policies : nullptr},
      {common::PolicySource::kExperiment, &experiment_policies},
  };
  desired.resolved = common::Resolve(adapter, layers);

  auto origin = [&](const common::Provenance& provenance) {
    SettingOrigin o;
    o.provenance = provenance;
    switch (provenance.source) {
      case common::PolicySource::kBuiltinDefault:
        break;
      case common::PolicySource::kLocalFile:
        if (const common::Policy* p = FindByName(local_, provenance.name)) {
          o.priority = p->priority;
          o.location = p->source;
        }
        break;
      case common::PolicySource::kServerPolicy:
        if (server_) {
          if (const common::Policy* p = FindByName(server_->policies, provenance.name)) {
            o.priority = p->priority;
          }
          o.bundle_version = server_->version;
        }
        break;
      case common::PolicySource::kExperiment:
        for (const ExperimentAssignment* a : assignments) {
          if (provenance.name == absl::StrCat("experiment ", a->experiment, " arm ", a->arm)) {
            o.priority = a->priority;
            o.experiment = a->experiment;
            o.arm = a->arm;
          }
        }
        o.bundle_version = bundle_version();
        break;
    }
    return o;
  };
  const common::ResolvedSettings& r = desired.resolved;
  if (r.hold_us) desired.origins["hold_us"] = origin(r.hold_us->provenance);
  if (r.count_threshold) desired.origins["count_threshold"] = origin(r.count_threshold->provenance);
  if (r.buffer_kib) desired.origins["buffer_kib"] = origin(r.buffer_kib->provenance);
  if (r.enable) desired.origins["enable"] = origin(r.enable->provenance);
  return desired;
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
