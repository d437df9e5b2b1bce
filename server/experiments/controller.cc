// ExperimentController's state: loading, the running experiments, which adapter each takes
// (the assignments of bundles and the experiment layer of predictions), status and events.
// The RPC handlers are in experiment_api.cc, window intake and the window cache in
// window_intake.cc, guardrails and gauges in controller_guardrails.cc, the scheduler and
// retention in scheduler.cc.

#include "server/experiments/controller.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "server/api/explain.h"
#include "server/experiments/controller_internal.h"
#include "server/experiments/convert.h"
#include "server/log.h"

namespace rxfleet::server {
namespace controller_internal {

std::string PhaseName(v1::ExperimentPhase phase) {
  switch (phase) {
    case v1::EXPERIMENT_PHASE_PENDING:
      return "pending";
    case v1::EXPERIMENT_PHASE_RUNNING:
      return "running";
    case v1::EXPERIMENT_PHASE_COMPLETED:
      return "completed";
    case v1::EXPERIMENT_PHASE_STOPPED:
      return "stopped";
    default:
      return "unspecified";
  }
}

std::string SegmentLabel(const experiments::Experiment& e, const std::vector<std::string>& values) {
  if (values.empty()) return "*";
  std::vector<std::string> parts;
  for (size_t i = 0; i < values.size() && i < e.segment_keys.size(); ++i) {
    parts.push_back(absl::StrCat(e.segment_keys[i], "=", values[i].empty() ? "(none)" : values[i]));
  }
  return absl::StrJoin(parts, ",");
}

std::vector<common::KeptField> KeptFrom(const experiments::Experiment& e,
                                        const common::AdapterAttributes& adapter,
                                        const std::vector<common::Policy>& policies) {
  std::vector<common::ArmInEffect> arms;
  for (const experiments::Arm& arm : e.arms) {
    arms.push_back({e.name, arm.name, e.priority, arm.settings});
  }
  common::PolicyLayers layers;
  layers.server = &policies;
  return common::FieldsKeptFromExperiment(adapter, layers, arms);
}

}  // namespace controller_internal

using common::TimeFromProto;
using common::TimeToProto;
using controller_internal::KeptFrom;
using experiments::Experiment;

ExperimentController::ExperimentController(ExperimentControllerOptions options,
                                           ExperimentControllerDeps deps)
    : options_(std::move(options)), deps_(std::move(deps)) {}

ExperimentController::~ExperimentController() { Shutdown(); }

absl::StatusOr<std::unique_ptr<ExperimentController>> ExperimentController::Create(
    ExperimentControllerOptions options, ExperimentControllerDeps deps) {
  if (options.retention <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("experiment retention must be positive");
  }
  std::unique_ptr<ExperimentController> controller(
      new ExperimentController(std::move(options), std::move(deps)));
  if (absl::Status s = controller->Load(); !s.ok()) return s;
  return controller;
}

std::optional<ExperimentController::Entry> ExperimentController::EntryFromProto(
    v1::Experiment proto, const std::map<std::string, WindowCounts>& counts, absl::Time now) {
  const std::string name = proto.metadata().name();
  absl::StatusOr<Experiment> e = experiments::ExperimentFromProto(proto, "server");
  if (!e.ok()) {
    Log(LogLevel::kWarning,
        absl::StrCat("stored experiment ", name,
                     " fails validation and is ignored: ", e.status().message()));
    return std::nullopt;
  }
  Entry entry;
  e->seed = proto.status().seed();
  entry.experiment = *std::move(e);
  for (const v1::StoppedArm& s : proto.status().stopped_arms()) {
    absl::StatusOr<experiments::StoppedArm> arm =
        experiments::StoppedArmFromProto(entry.experiment, s);
    if (arm.ok()) entry.stopped.push_back(*std::move(arm));
  }
  if (proto.status().has_start_time()) {
    absl::StatusOr<experiments::Assigner> assigner =
        experiments::Assigner::Create(entry.experiment, TimeFromProto(proto.status().start_time()));
    if (assigner.ok()) {
      entry.assigner = *std::move(assigner);
      absl::StatusOr<uint32_t> period = entry.assigner->PeriodIndexAt(now);
      entry.period = period.ok() ? *period : 0;
    }
  }
  if (auto it = counts.find(name); it != counts.end()) {
    entry.windows = it->second.total;
    entry.valid_windows = it->second.valid;
  }
  entry.proto = std::move(proto);
  if (entry.experiment.probe && Running(entry)) {
    entry.probe_plan.emplace(entry.experiment.window_length, entry.experiment.probe->duration);
  }
  return entry;
}

absl::Status ExperimentController::Load() {
  absl::StatusOr<std::vector<v1::Experiment>> stored = deps_.store->LoadExperiments();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = deps_.store->CountWindows();
  if (!counts.ok()) return counts.status();
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  for (v1::Experiment& proto : *stored) {
    const std::string name = proto.metadata().name();
    std::optional<Entry> entry = EntryFromProto(std::move(proto), *counts, now);
    if (entry.has_value()) entries_.emplace(name, *std::move(entry));
  }
  if (absl::Status s = LoadTunings(/*reload=*/false, 0); !s.ok()) return s;
  (void)RefreshProbePlansLocked(now);
  UpdateGauges();
  return absl::OkStatus();
}

namespace {

// An experiment's resource version as a number (0 if it is not one).
uint64_t ResourceVersionOf(const v1::Experiment& experiment) {
  uint64_t version = 0;
  return absl::SimpleAtoi(experiment.metadata().resource_version(), &version) ? version : 0;
}

}  // namespace

absl::Status ExperimentController::Reload(uint64_t revision) {
  absl::StatusOr<std::vector<v1::Experiment>> stored = deps_.store->LoadExperiments();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = deps_.store->CountWindows();
  if (!counts.ok()) return counts.status();
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  std::set<std::string, std::less<>> seen;
  bool changed = false;
  for (v1::Experiment& proto : *stored) {
    const std::string name = proto.metadata().name();
    seen.insert(name);
    auto it = entries_.find(name);
    // This server's own write may be newer than what was read: keep it.
    if (it != entries_.end() && ResourceVersionOf(proto) <= ResourceVersionOf(it->second.proto)) {
      continue;
    }
    std::optional<Entry> entry = EntryFromProto(std::move(proto), *counts, now);
    if (!entry.has_value()) continue;
    if (it == entries_.end()) {
      Log(LogLevel::kInfo, absl::StrCat("experiment ", name, " was created by another server"));
      entries_.emplace(name, *std::move(entry));
    } else {
      // Its windows did not change with its status: keep what was read of them.
      entry->cache = std::move(it->second.cache);
      entry->windows = std::max(entry->windows, it->second.windows);
      entry->valid_windows = std::max(entry->valid_windows, it->second.valid_windows);
      entry->next_guardrails = it->second.next_guardrails;
      it->second = *std::move(entry);
    }
    changed = true;
  }
  // Deleted by another server: gone from the store, and written at or before `revision` (an
  // experiment this server created after the read is newer).
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!seen.contains(it->first) && ResourceVersionOf(it->second.proto) <= revision) {
      Log(LogLevel::kInfo,
          absl::StrCat("experiment ", it->first, " was deleted by another server"));
      it = entries_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) {
    (void)RefreshProbePlansLocked(now);
    UpdateGauges();
  }
  return LoadTunings(/*reload=*/true, revision);
}

bool ExperimentController::Running(const Entry& entry) {
  return entry.proto.status().phase() == v1::EXPERIMENT_PHASE_RUNNING && entry.assigner;
}

std::vector<const ExperimentController::Entry*> ExperimentController::RunningEntries() const {
  std::vector<const Entry*> out;
  for (const auto& [name, entry] : entries_) {
    if (Running(entry)) out.push_back(&entry);
  }
  std::sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) {
    const absl::Time ta = TimeFromProto(a->proto.metadata().create_time());
    const absl::Time tb = TimeFromProto(b->proto.metadata().create_time());
    return ta != tb ? ta < tb : a->proto.metadata().name() < b->proto.metadata().name();
  });
  return out;
}

std::shared_ptr<const PolicySnapshot> ExperimentController::Policies() const {
  if (deps_.policies != nullptr) return deps_.policies->snapshot();
  static const std::shared_ptr<const PolicySnapshot> none = std::make_shared<PolicySnapshot>();
  return none;
}

std::optional<ExperimentController::Claim> ExperimentController::ClaimLocked(
    const std::vector<const Entry*>& running, const common::AdapterAttributes& adapter,
    absl::Time now, const std::vector<common::Policy>& policies, std::string_view ended) const {
  for (const Entry* entry : running) {  // oldest first: the first that may take it claims it
    if (entry->experiment.name == ended) continue;
    absl::StatusOr<std::optional<experiments::Assignment>> a =
        entry->assigner->AssignAdapter(adapter, now, entry->stopped);
    if (!a.ok() || !a->has_value()) continue;
    if (!HostCanProbe(*entry, adapter)) continue;
    if (!KeptFrom(entry->experiment, adapter, policies).empty()) continue;
    Claim claim{entry, **a};
    if (entry->probe_plan) {
      claim.assignment.probe =
          entry->probe_plan->TurnOf(experiments::AdapterKey(adapter.host, adapter.adapter_id));
    }
    return claim;
  }
  return std::nullopt;
}

std::optional<v1::ExperimentAssignment> ExperimentController::AssignmentFor(
    const common::AdapterAttributes& adapter, const std::vector<common::Policy>& policies,
    std::string_view ended) const {
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  std::optional<Claim> claim = ClaimLocked(RunningEntries(), adapter, now, policies, ended);
  if (!claim) return TuningClaimLocked(RunningTunings(), adapter, now, policies, ended);
  return experiments::AssignmentToProto(claim->entry->experiment,
                                        claim->entry->proto.metadata().generation(),
                                        adapter.adapter_id, claim->assignment);
}

std::vector<v1::ExperimentAssignment> ExperimentController::AssignmentsLocked(
    std::string_view host_id, absl::Time now) const {
  std::vector<v1::ExperimentAssignment> out;
  const std::vector<const Entry*> running = RunningEntries();
  const std::vector<const TuningEntry*> tunings = RunningTunings();
  if (running.empty() && tunings.empty()) return out;
  const std::shared_ptr<const PolicySnapshot> policies = Policies();
  for (const v1::Adapter& adapter : deps_.registry->HostAdapters(host_id)) {
    const common::AdapterAttributes attributes = AttributesOf(adapter);
    std::optional<Claim> claim = ClaimLocked(running, attributes, now, policies->valid);
    if (!claim) {
      if (tunings.empty()) continue;
      std::optional<v1::ExperimentAssignment> tuned =
          TuningClaimLocked(tunings, attributes, now, policies->valid);
      if (tuned) out.push_back(*std::move(tuned));
      continue;
    }
    out.push_back(experiments::AssignmentToProto(claim->entry->experiment,
                                                 claim->entry->proto.metadata().generation(),
                                                 adapter.metadata().name(), claim->assignment));
  }
  return out;
}

std::vector<v1::ExperimentAssignment> ExperimentController::Assignments(
    std::string_view host_id) const {
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  return AssignmentsLocked(host_id, now);
}

std::string ExperimentController::AssignmentBytes(std::string_view host_id) const {
  std::vector<v1::ExperimentAssignment> assignments = Assignments(host_id);
  if (assignments.empty()) return "";
  v1::PolicyBundle only_assignments;
  for (v1::ExperimentAssignment& a : assignments)
    *only_assignments.add_assignments() = std::move(a);
  return only_assignments.SerializeAsString();
}

v1::Experiment ExperimentController::View(const Entry& entry) const {
  v1::Experiment out = entry.proto;
  v1::ExperimentStatus* status = out.mutable_status();
  status->set_valid_windows(entry.valid_windows);
  uint32_t assigned = 0;
  if (Running(entry)) {
    const absl::Time now = options_.clock();
    const std::vector<const Entry*> running = RunningEntries();
    const std::shared_ptr<const PolicySnapshot> policies = Policies();
    for (const v1::Adapter& adapter : deps_.registry->ListAdapters(false)) {
      std::optional<Claim> claim =
          ClaimLocked(running, AttributesOf(adapter), now, policies->valid);
      if (claim && claim->entry == &entry) ++assigned;
    }
  }
  status->set_assigned_adapters(assigned);
  if (Running(entry) && entry.probe_plan) *status->add_conditions() = ProbeConditionLocked(entry);
  return out;
}

absl::Status ExperimentController::SaveStatus(Entry& entry, const v1::ExperimentStatus& status,
                                              absl::Time now) {
  absl::StatusOr<v1::Experiment> saved =
      deps_.store->UpdateExperimentStatus(entry.proto.metadata().name(), status, now, tick_fence_);
  if (!saved.ok()) {
    deps_.metrics->store_write_failures->Increment();
    return saved.status();
  }
  entry.proto = *std::move(saved);
  return absl::OkStatus();
}

void ExperimentController::RecordEvent(const std::string& name, v1::EventType type,
                                       std::string reason, std::string message, absl::Time now) {
  v1::Event event;
  event.set_type(type);
  event.set_reason(std::move(reason));
  event.set_message(std::move(message));
  event.mutable_involved_object()->set_kind("Experiment");
  event.mutable_involved_object()->set_name(name);
  deps_.events->Record(std::move(event), now);
}

absl::Status ExperimentController::End(Entry& entry, v1::ExperimentPhase phase, absl::Time end_time,
                                       std::string_view reason, std::string_view message,
                                       absl::Time now) {
  v1::ExperimentStatus status = entry.proto.status();
  status.set_phase(phase);
  *status.mutable_end_time() = TimeToProto(end_time);
  if (absl::Status s = SaveStatus(entry, status, now); !s.ok()) return s;
  entry.probe_plan.reset();
  RecordEvent(entry.proto.metadata().name(),
              phase == v1::EXPERIMENT_PHASE_COMPLETED || reason == "Stopped"
                  ? v1::EVENT_TYPE_NORMAL
                  : v1::EVENT_TYPE_WARNING,
              std::string(reason), std::string(message), now);
  return absl::OkStatus();
}

void ExperimentController::Publish() {
  if (absl::Status s = deps_.bump_bundle(); !s.ok()) {
    Log(LogLevel::kError,
        absl::StrCat("cannot publish new experiment assignments (the next change retries): ",
                     s.message()));
  }
}

}  // namespace rxfleet::server
