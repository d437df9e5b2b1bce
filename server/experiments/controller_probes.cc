// ExperimentController's probes: which hosts can run them, the sticky probe plan of every
// running experiment with a probe (who probes in which slot and round, probe_schedule.h), the
// one-experiment-per-iperf3-server rule and the `ProbeSchedule` status condition.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/api/explain.h"
#include "server/experiments/controller.h"

namespace rxfleet::server {

bool ExperimentController::HostCanProbe(const Entry& entry,
                                        const common::AdapterAttributes& adapter) const {
  if (!entry.experiment.probe) return true;
  return deps_.registry->HostHasCapability(adapter.host, kProbesCapability);
}

bool ExperimentController::RefreshProbePlansLocked(absl::Time now) {
  next_probe_plans_ = now + kProbePlanRefresh;
  const std::vector<const Entry*> running = RunningEntries();
  std::map<std::string, std::vector<std::string>> members;  // experiment -> adapter keys
  for (const Entry* entry : running) {
    if (entry->probe_plan) members[entry->experiment.name];
  }
  if (members.empty()) return false;
  const std::shared_ptr<const PolicySnapshot> policies = Policies();
  for (const v1::Adapter& adapter : deps_.registry->ListAdapters(false)) {
    const common::AdapterAttributes attributes = AttributesOf(adapter);
    std::optional<Claim> claim = ClaimLocked(running, attributes, now, policies->valid);
    if (!claim) continue;
    auto it = members.find(claim->entry->experiment.name);
    if (it == members.end()) continue;
    it->second.push_back(experiments::AdapterKey(attributes.host, attributes.adapter_id));
  }
  bool changed = false;
  for (auto& [name, keys] : members) {
    auto entry = entries_.find(name);
    if (entry->second.probe_plan->Update(std::move(keys))) changed = true;
  }
  return changed;
}

const ExperimentController::Entry* ExperimentController::ProbeServerUserLocked(
    const std::string& server, std::string_view name) const {
  for (const Entry* entry : RunningEntries()) {
    if (entry->experiment.name == name || !entry->experiment.probe) continue;
    if (common::ProbeServerAddress(*entry->experiment.probe) == server) return entry;
  }
  return nullptr;
}

v1::Condition ExperimentController::ProbeConditionLocked(const Entry& entry) const {
  const experiments::ProbePlan& plan = *entry.probe_plan;
  const common::ProbeSpec& probe = *entry.experiment.probe;
  v1::Condition c;
  c.set_type("ProbeSchedule");
  c.set_status(plan.members() > 0 ? v1::CONDITION_STATUS_TRUE : v1::CONDITION_STATUS_FALSE);
  const std::string fit = absl::StrCat(
      plan.slots_per_window(), plan.slots_per_window() == 1 ? " probe" : " probes", " of ",
      absl::FormatDuration(probe.duration), " (slots of ", absl::FormatDuration(plan.slot_length()),
      ") fit in a ", absl::FormatDuration(entry.experiment.window_length), " window against ",
      common::ProbeServerAddress(probe));
  if (plan.members() == 0) {
    c.set_reason("NoAdapters");
    c.set_message(absl::StrCat(fit, "; no adapter under test probes yet (agents need the `",
                               kProbesCapability, "` capability)"));
  } else if (plan.rounds() <= 1) {
    c.set_reason("EveryWindow");
    c.set_message(absl::StrCat(fit, "; ", plan.members(),
                               plan.members() == 1 ? " adapter probes" : " adapters probe",
                               " in every window"));
  } else {
    c.set_reason("Rotating");
    c.set_message(absl::StrCat(fit, "; ", plan.members(), " adapters probe in ", plan.rounds(),
                               " rounds: each probes every ", plan.rounds(), " windows"));
  }
  c.set_observed_generation(entry.proto.metadata().generation());
  return c;
}

}  // namespace rxfleet::server
