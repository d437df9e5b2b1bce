#include "server/experiments/controller.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/policy/precedence.h"
#include "common/policy/selectors.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/api/explain.h"
#include "server/api/paging.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/convert.h"
#include "server/experiments/guardrails.h"
#include "server/experiments/promotion.h"
#include "server/experiments/report.h"
#include "server/log.h"

namespace rxfleet::server {
namespace {

using common::TimeFromProto;
using common::TimeToProto;
using common::ToAbslView;
using experiments::Experiment;

constexpr absl::Duration kRetentionInterval = absl::Hours(1);

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

std::string SegmentLabel(const Experiment& e, const std::vector<std::string>& values) {
  if (values.empty()) return "*";
  std::vector<std::string> parts;
  for (size_t i = 0; i < values.size() && i < e.segment_keys.size(); ++i) {
    parts.push_back(absl::StrCat(e.segment_keys[i], "=", values[i].empty() ? "(none)" : values[i]));
  }
  return absl::StrJoin(parts, ",");
}

common::AdapterAttributes Attributes(const v1::Adapter& adapter) {
  return common::AdapterAttributesFromProto(adapter,
                                            common::LabelsFromProto(adapter.metadata().labels()));
}

// Every arm of `e` as the experiment-layer entry it would become.
std::vector<common::ArmInEffect> AllArms(const Experiment& e) {
  std::vector<common::ArmInEffect> arms;
  for (const experiments::Arm& arm : e.arms) {
    arms.push_back({e.name, arm.name, e.priority, arm.settings});
  }
  return arms;
}

// The fields server `policies` keep from experiment `e` on `adapter` (empty: eligible).
std::vector<common::KeptField> KeptFrom(const Experiment& e,
                                        const common::AdapterAttributes& adapter,
                                        const std::vector<common::Policy>& policies) {
  common::PolicyLayers layers;
  layers.server = &policies;
  return common::FieldsKeptFromExperiment(adapter, layers, AllArms(e));
}

v1::ObjectReference AdapterRef(const v1::Adapter& adapter) {
  v1::ObjectReference ref;
  ref.set_kind("Adapter");
  ref.set_name(adapter.metadata().name());
  ref.set_host_id(adapter.host_id());
  return ref;
}

absl::Status CheckString(std::string_view field, const std::string& value, bool required) {
  if (required && value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric_window.", ToAbslView(field), ": required"));
  }
  if (value.size() > kMaxWindowStringLength) {
    return absl::InvalidArgumentError(absl::StrCat("metric_window.", ToAbslView(field),
                                                   ": longer than ", kMaxWindowStringLength,
                                                   " characters"));
  }
  return absl::OkStatus();
}

absl::Status CheckValue(std::string_view field, double value, double max) {
  if (!std::isfinite(value) || value < 0 || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("metric_window.", ToAbslView(field), ": ", value,
                                                   " is not a finite value in 0..", max));
  }
  return absl::OkStatus();
}

}  // namespace

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

absl::Status ExperimentController::Load() {
  absl::StatusOr<std::vector<v1::Experiment>> stored = deps_.store->LoadExperiments();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = deps_.store->CountWindows();
  if (!counts.ok()) return counts.status();
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  for (v1::Experiment& proto : *stored) {
    const std::string name = proto.metadata().name();
    absl::StatusOr<Experiment> e = experiments::ExperimentFromProto(proto, "server");
    if (!e.ok()) {
      Log(LogLevel::kWarning,
          absl::StrCat("stored experiment ", name,
                       " fails validation and is ignored: ", e.status().message()));
      continue;
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
      absl::StatusOr<experiments::Assigner> assigner = experiments::Assigner::Create(
          entry.experiment, TimeFromProto(proto.status().start_time()));
      if (assigner.ok()) {
        entry.assigner = *std::move(assigner);
        absl::StatusOr<uint32_t> period = entry.assigner->PeriodIndexAt(now);
        entry.period = period.ok() ? *period : 0;
      }
    }
    if (auto it = counts->find(name); it != counts->end()) {
      entry.windows = it->second.total;
      entry.valid_windows = it->second.valid;
    }
    entry.proto = std::move(proto);
    entries_.emplace(name, std::move(entry));
  }
  UpdateGauges();
  return absl::OkStatus();
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
    if (!KeptFrom(entry->experiment, adapter, policies).empty()) continue;
    return Claim{entry, **a};
  }
  return std::nullopt;
}

std::optional<v1::ExperimentAssignment> ExperimentController::AssignmentFor(
    const common::AdapterAttributes& adapter, const std::vector<common::Policy>& policies,
    std::string_view ended) const {
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  std::optional<Claim> claim = ClaimLocked(RunningEntries(), adapter, now, policies, ended);
  if (!claim) return std::nullopt;
  return experiments::AssignmentToProto(claim->entry->experiment,
                                        claim->entry->proto.metadata().generation(),
                                        adapter.adapter_id, claim->assignment);
}

std::vector<v1::ExperimentAssignment> ExperimentController::AssignmentsLocked(
    std::string_view host_id, absl::Time now) const {
  std::vector<v1::ExperimentAssignment> out;
  const std::vector<const Entry*> running = RunningEntries();
  if (running.empty()) return out;
  const std::shared_ptr<const PolicySnapshot> policies = Policies();
  for (const v1::Adapter& adapter : deps_.registry->HostAdapters(host_id)) {
    std::optional<Claim> claim = ClaimLocked(running, Attributes(adapter), now, policies->valid);
    if (!claim) continue;
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
      std::optional<Claim> claim = ClaimLocked(running, Attributes(adapter), now, policies->valid);
      if (claim && claim->entry == &entry) ++assigned;
    }
  }
  status->set_assigned_adapters(assigned);
  return out;
}

absl::Status ExperimentController::SaveStatus(Entry& entry, const v1::ExperimentStatus& status,
                                              absl::Time now) {
  absl::StatusOr<v1::Experiment> saved =
      deps_.store->UpdateExperimentStatus(entry.proto.metadata().name(), status, now);
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

absl::StatusOr<v1::CreateExperimentResponse> ExperimentController::CreateExperiment(
    const v1::CreateExperimentRequest& request) {
  const std::string& name = request.experiment().metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("experiment.metadata.name: required");
  absl::StatusOr<Experiment> e = experiments::ExperimentFromProto(request.experiment(), "server");
  if (!e.ok()) return e.status();
  const absl::Time now = options_.clock();
  uint64_t seed = e->seed;
  while (seed == 0) {
    thread_local absl::BitGen gen;
    seed = absl::Uniform<uint64_t>(gen);
  }
  e->seed = seed;
  absl::StatusOr<experiments::Assigner> assigner = experiments::Assigner::Create(*e, now);
  if (!assigner.ok()) return assigner.status();

  v1::CreateExperimentResponse response;
  v1::Experiment to_store;
  to_store.mutable_metadata()->set_name(name);
  *to_store.mutable_metadata()->mutable_labels() = request.experiment().metadata().labels();
  *to_store.mutable_metadata()->mutable_annotations() =
      request.experiment().metadata().annotations();
  *to_store.mutable_spec() = experiments::ExperimentSpecToProto(*e);
  to_store.mutable_spec()->set_seed(request.experiment().spec().seed());
  v1::ExperimentStatus* status = to_store.mutable_status();
  status->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  *status->mutable_start_time() = TimeToProto(now);
  status->set_seed(seed);
  status->set_observed_generation(1);
  {
    absl::MutexLock lock(&mu_);
    if (entries_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "experiment ", name, " already exists (names are never reused, even after it ended)"));
    }
    // Eligible: the selector matches, the adapter is managed, no older experiment takes it
    // and no policy keeps it from this one (the rule of ClaimLocked).
    const std::vector<const Entry*> running = RunningEntries();
    const std::shared_ptr<const PolicySnapshot> policies = Policies();
    for (const v1::Adapter& adapter : deps_.registry->ListAdapters(false)) {
      const common::AdapterAttributes attributes = Attributes(adapter);
      if (!common::Matches(e->selector, attributes)) continue;
      std::string reason;
      if (!IsManaged(adapter)) {
        reason = absl::StrCat("adapter state ", v1::AdapterState_Name(adapter.status().state()),
                              ": its RX aggregation is not managed");
      } else if (std::optional<Claim> claim =
                     ClaimLocked(running, attributes, now, policies->valid)) {
        reason = absl::StrCat("in the older experiment ", claim->entry->experiment.name,
                              " (one experiment per adapter)");
      } else {
        reason = common::DescribeKeptFields(KeptFrom(*e, attributes, policies->valid));
      }
      if (reason.empty()) {
        *response.add_eligible_adapters() = AdapterRef(adapter);
      } else {
        v1::IneligibleAdapter* ineligible = response.add_ineligible_adapters();
        *ineligible->mutable_adapter() = AdapterRef(adapter);
        ineligible->set_reason(std::move(reason));
      }
    }
    if (request.dry_run()) {
      *response.mutable_experiment() = to_store;
      response.mutable_experiment()->mutable_status()->set_phase(v1::EXPERIMENT_PHASE_PENDING);
      response.mutable_experiment()->mutable_status()->clear_start_time();
      return response;
    }
    absl::StatusOr<v1::Experiment> stored = deps_.store->CreateExperiment(to_store, now);
    if (!stored.ok()) {
      if (!absl::IsAlreadyExists(stored.status())) deps_.metrics->store_write_failures->Increment();
      return stored.status();
    }
    Entry entry;
    entry.proto = *stored;
    entry.experiment = *std::move(e);
    entry.assigner = *std::move(assigner);
    entries_.emplace(name, std::move(entry));
    *response.mutable_experiment() = View(entries_.at(name));
    UpdateGauges();
  }
  RecordEvent(name, v1::EVENT_TYPE_NORMAL, "Created",
              absl::StrCat("experiment started with ", response.eligible_adapters_size(),
                           " eligible adapters, seed ", seed),
              now);
  Publish();
  {
    absl::MutexLock lock(&run_mu_);
    wake_ = true;
  }
  return response;
}

absl::StatusOr<v1::ListExperimentsResponse> ExperimentController::ListExperiments(
    const v1::ListExperimentsRequest& request) const {
  absl::StatusOr<common::LabelSelector> selector =
      common::ParseLabelSelector(request.label_selector());
  if (!selector.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label_selector: ", selector.status().message()));
  }
  absl::StatusOr<size_t> page_size = PageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  const std::string query = absl::StrCat(request.label_selector(), "\n", request.phase());
  absl::StatusOr<std::string> after = ParsePageToken(request.page_token(), query);
  if (!after.ok()) return after.status();
  absl::MutexLock lock(&mu_);
  // Newest first; the key orders by create time then name, descending.
  std::vector<std::pair<std::string, const Entry*>> ordered;
  for (const auto& [name, entry] : entries_) {
    if (request.phase() != v1::EXPERIMENT_PHASE_UNSPECIFIED &&
        entry.proto.status().phase() != request.phase()) {
      continue;
    }
    if (!selector->Matches(common::LabelsFromProto(entry.proto.metadata().labels()))) continue;
    const int64_t created = absl::ToUnixNanos(TimeFromProto(entry.proto.metadata().create_time()));
    ordered.emplace_back(absl::StrCat(absl::StrFormat("%020d", created), "/", name), &entry);
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  v1::ListExperimentsResponse response;
  std::string last_key;
  for (const auto& [key, entry] : ordered) {
    if (!after->empty() && key >= *after) continue;
    if (static_cast<size_t>(response.experiments_size()) == *page_size) {
      response.set_next_page_token(MakePageToken(query, last_key));
      break;
    }
    *response.add_experiments() = View(*entry);
    last_key = key;
  }
  return response;
}

absl::StatusOr<v1::Experiment> ExperimentController::GetExperiment(
    const v1::GetExperimentRequest& request) const {
  if (request.name().empty()) return absl::InvalidArgumentError("name: required");
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(request.name());
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("experiment ", request.name(), " does not exist"));
  }
  return View(it->second);
}

absl::StatusOr<v1::Experiment> ExperimentController::StopExperiment(
    const v1::StopExperimentRequest& request) {
  if (request.name().empty()) return absl::InvalidArgumentError("name: required");
  if (request.reason().size() > 1024) {
    return absl::InvalidArgumentError("reason: longer than 1024 characters");
  }
  const absl::Time now = options_.clock();
  v1::Experiment out;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(request.name());
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("experiment ", request.name(), " does not exist"));
    }
    Entry& entry = it->second;
    if (!request.resource_version().empty() &&
        request.resource_version() != entry.proto.metadata().resource_version()) {
      return absl::AbortedError(
          absl::StrCat("experiment ", request.name(), " was modified (resource version ",
                       entry.proto.metadata().resource_version(), ", you have ",
                       request.resource_version(), "); get it again and retry"));
    }
    if (!Running(entry)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "experiment ", request.name(), " is ", PhaseName(entry.proto.status().phase()),
          "; only a running experiment can be stopped"));
    }
    const std::string message = request.reason().empty()
                                    ? "stopped by StopExperiment"
                                    : absl::StrCat("stopped by StopExperiment: ", request.reason());
    if (absl::Status s = End(entry, v1::EXPERIMENT_PHASE_STOPPED, now, "Stopped", message, now);
        !s.ok()) {
      return s;
    }
    out = View(entry);
    UpdateGauges();
  }
  Publish();
  return out;
}

absl::StatusOr<const std::vector<experiments::Window>*> ExperimentController::Windows(
    Entry& entry) {
  if (entry.cache.has_value()) return &*entry.cache;
  if (!Running(entry)) {  // one ended experiment in memory at a time
    for (auto& [name, other] : entries_) {
      if (!Running(other)) other.cache.reset();
    }
  }
  std::vector<experiments::Window> windows;
  windows.reserve(entry.windows);
  const std::string& name = entry.proto.metadata().name();
  absl::Status read = deps_.store->ForEachWindow(
      name, [&](const std::string& host_id, std::vector<std::string> segment,
                const v1::MetricWindow& window) {
        windows.push_back(experiments::WindowFromProto(window, host_id, std::move(segment)));
      });
  if (!read.ok()) return read;
  for (const StoredWindow& w : pending_) {
    if (w.experiment == name) {
      windows.push_back(experiments::WindowFromProto(w.window, w.host_id, w.segment));
    }
  }
  // A window whose segment does not fit the experiment (impossible unless the database was
  // edited) would fail the whole aggregation: leave it out.
  std::erase_if(windows, [&](const experiments::Window& w) {
    return w.segment.size() != entry.experiment.segment_keys.size() ||
           w.duration <= absl::ZeroDuration();
  });
  entry.cache = std::move(windows);
  return &*entry.cache;
}

absl::StatusOr<v1::ExperimentReport> ExperimentController::GetExperimentReport(
    const v1::GetExperimentReportRequest& request) {
  if (request.name().empty()) return absl::InvalidArgumentError("name: required");
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(request.name());
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("experiment ", request.name(), " does not exist"));
  }
  Entry& entry = it->second;
  const Experiment& e = entry.experiment;
  std::vector<std::pair<size_t, std::string>> filter;
  for (const auto& [key, value] : request.segment()) {
    auto k = std::find(e.segment_keys.begin(), e.segment_keys.end(), key);
    if (k == e.segment_keys.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment: '", key, "' is not a segment key of experiment ", request.name(),
                       " (keys: ", absl::StrJoin(e.segment_keys, ", "), ")"));
    }
    filter.emplace_back(static_cast<size_t>(k - e.segment_keys.begin()), value);
  }
  if (!entry.assigner) {
    return absl::FailedPreconditionError(
        absl::StrCat("experiment ", request.name(), " has not started"));
  }
  absl::StatusOr<const std::vector<experiments::Window>*> windows = Windows(entry);
  if (!windows.ok()) return windows.status();
  experiments::ReportOptions options;
  options.start = entry.assigner->start();
  options.now = now;
  options.stopped = entry.stopped;
  absl::StatusOr<experiments::Report> report = experiments::ComputeReport(e, **windows, options);
  if (!report.ok()) return report.status();
  if (!filter.empty()) {
    auto keep = [&](const std::vector<std::string>& values) {
      for (const auto& [index, value] : filter) {
        if (index >= values.size() || values[index] != value) return false;
      }
      return true;
    };
    std::erase_if(report->segments,
                  [&](const experiments::SegmentResult& s) { return !keep(s.values); });
    std::erase_if(report->notes, [&](const experiments::ReportNote& n) {
      return n.segment.has_value() && !keep(*n.segment);
    });
  }
  return experiments::ReportToProto(*report, entry.proto.metadata().generation(),
                                    entry.proto.status().phase());
}

absl::StatusOr<v1::PromoteExperimentResponse> ExperimentController::PromoteExperiment(
    const v1::PromoteExperimentRequest& request) {
  if (request.name().empty()) return absl::InvalidArgumentError("name: required");
  if (request.arm().empty()) return absl::InvalidArgumentError("arm: required");
  Experiment e;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(request.name());
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("experiment ", request.name(), " does not exist"));
    }
    e = it->second.experiment;
  }
  if (!e.ArmIndex(request.arm())) {
    return absl::NotFoundError(
        absl::StrCat("arm: experiment ", request.name(), " has no arm ", request.arm()));
  }
  experiments::PromotionRequest promotion;
  promotion.arm = request.arm();
  promotion.policy_name = request.policy_name();
  if (request.has_priority()) promotion.priority = request.priority();
  if (!request.segment().empty()) {
    if (static_cast<size_t>(request.segment().size()) != e.segment_keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment: give a value for every segment key (",
                       absl::StrJoin(e.segment_keys, ", "), ") or none"));
    }
    for (const std::string& key : e.segment_keys) {
      auto it = request.segment().find(key);
      if (it == request.segment().end()) {
        return absl::InvalidArgumentError(absl::StrCat("segment: missing key '", key, "'"));
      }
      promotion.segment.push_back(it->second);
    }
  }
  absl::StatusOr<common::Policy> policy = experiments::BuildPromotionPolicy(e, promotion);
  if (!policy.ok()) return policy.status();
  v1::ApplyPolicyRequest apply;
  *apply.mutable_policy() = common::PolicyToProto(*policy);
  apply.set_dry_run(request.dry_run());
  absl::StatusOr<v1::ApplyPolicyResponse> applied = deps_.apply_policy(apply, request.name());
  if (!applied.ok()) return applied.status();
  v1::PromoteExperimentResponse response;
  *response.mutable_policy() = applied->policy();
  *response.mutable_affected_adapters() = applied->affected_adapters();
  if (!request.dry_run()) {
    RecordEvent(request.name(), v1::EVENT_TYPE_NORMAL, "Promoted",
                absl::StrCat("arm ", request.arm(), " promoted to policy ",
                             applied->policy().metadata().name(), " (",
                             applied->affected_adapters_size(), " adapters affected)"),
                options_.clock());
  }
  return response;
}

absl::Status ExperimentController::AcceptWindow(std::string_view host_id,
                                                const v1::MetricWindow& window) {
  const absl::Time now = options_.clock();
  auto reject = [this](absl::Status status) {
    deps_.metrics->metric_windows_rejected->Increment();
    return status;
  };
  for (const auto& [field, value, required] :
       {std::tuple<std::string_view, const std::string&, bool>{"adapter_id", window.adapter_id(),
                                                               true},
        {"experiment", window.experiment(), true},
        {"arm", window.arm(), true},
        {"invalid_reason", window.invalid_reason(), false}}) {
    if (absl::Status s = CheckString(field, value, required); !s.ok()) return reject(s);
  }
  absl::StatusOr<v1::Adapter> adapter = deps_.registry->GetAdapter(host_id, window.adapter_id());
  if (!adapter.ok()) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("metric_window.adapter_id: ", adapter.status().message())));
  }
  for (const auto& [field, value, max] :
       {std::tuple<std::string_view, double, double>{"rtt.mean_seconds",
                                                     window.rtt().mean_seconds(), 3600},
        {"rtt.p99_seconds", window.rtt().p99_seconds(), 3600},
        {"busiest_core_ratio", window.busiest_core_ratio(), 1},
        {"host_cpu_ratio", window.host_cpu_ratio(), 1}}) {
    if (absl::Status s = CheckValue(field, value, max); !s.ok()) return reject(s);
  }
  if (!window.has_window_start_time() || !window.has_window_duration()) {
    return reject(absl::InvalidArgumentError(
        "metric_window.window_start_time and window_duration: required"));
  }
  const absl::Time start = TimeFromProto(window.window_start_time());
  const absl::Duration duration = common::DurationFromProto(window.window_duration());
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(window.experiment());
  if (it == entries_.end()) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("metric_window.experiment: no experiment ", window.experiment())));
  }
  Entry& entry = it->second;
  const Experiment& e = entry.experiment;
  if (!Running(entry)) {
    const bool recent = entry.proto.status().has_end_time() &&
                        now - TimeFromProto(entry.proto.status().end_time()) < e.window_length;
    if (!recent) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("metric_window.experiment: experiment ", window.experiment(), " is ",
                       PhaseName(entry.proto.status().phase()))));
    }
  }
  if (!e.ArmIndex(window.arm())) {
    return reject(absl::InvalidArgumentError(absl::StrCat(
        "metric_window.arm: experiment ", window.experiment(), " has no arm ", window.arm())));
  }
  if (duration <= absl::ZeroDuration() || duration > 2 * e.window_length) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("metric_window.window_duration: ", absl::FormatDuration(duration),
                     " is not in (0, ", absl::FormatDuration(2 * e.window_length), "]")));
  }
  if (start + duration > now + e.window_length) {
    return reject(absl::InvalidArgumentError(
        "metric_window.window_start_time: the window ends in the future (agent clock ahead?)"));
  }
  if (entry.windows >= options_.max_windows_per_experiment) {
    return reject(absl::ResourceExhaustedError(
        absl::StrCat("experiment ", window.experiment(), " already has ", entry.windows,
                     " windows, the most the server stores per experiment")));
  }
  if (pending_.size() >= kMaxPendingWindows) {
    return reject(
        absl::ResourceExhaustedError("too many metric windows wait for the database; dropping"));
  }
  StoredWindow stored;
  stored.experiment = window.experiment();
  stored.host_id = std::string(host_id);
  stored.segment = experiments::SegmentValuesFor(e, Attributes(*adapter));
  stored.window = window;
  if (entry.cache.has_value() && stored.segment.size() == e.segment_keys.size()) {
    entry.cache->push_back(experiments::WindowFromProto(window, host_id, stored.segment));
  }
  pending_.push_back(std::move(stored));
  ++entry.windows;
  if (window.valid()) ++entry.valid_windows;
  deps_.metrics->metric_windows_stored->Increment();
  return absl::OkStatus();
}

absl::Status ExperimentController::FlushLocked() {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status s = deps_.store->AddWindows(pending_);
  if (!s.ok()) {
    deps_.metrics->store_write_failures->Increment();
    if (!flush_failing_) {
      Log(LogLevel::kError, absl::StrCat("cannot store ", pending_.size(),
                                         " metric windows (will retry): ", s.message()));
    }
    flush_failing_ = true;
    return s;
  }
  if (flush_failing_) Log(LogLevel::kInfo, "metric windows are stored again");
  flush_failing_ = false;
  pending_.clear();
  return absl::OkStatus();
}

absl::Status ExperimentController::FlushWindows() {
  absl::MutexLock lock(&mu_);
  return FlushLocked();
}

bool ExperimentController::Guardrails(Entry& entry, absl::Time now) {
  const Experiment& e = entry.experiment;
  if (e.guardrails.empty()) return false;
  absl::StatusOr<const std::vector<experiments::Window>*> windows = Windows(entry);
  if (!windows.ok()) return false;
  absl::StatusOr<experiments::Aggregate> aggregate =
      experiments::AggregateWindows(e, entry.assigner->start(), **windows);
  if (!aggregate.ok()) return false;
  absl::StatusOr<std::vector<experiments::GuardrailDecision>> decisions =
      experiments::EvaluateGuardrails(e, *aggregate, entry.stopped);
  if (!decisions.ok() || decisions->empty()) return false;
  std::vector<experiments::StoppedArm> stopped = entry.stopped;
  for (const experiments::GuardrailDecision& d : *decisions) {
    stopped.push_back(experiments::ToStoppedArm(d, now));
  }
  v1::ExperimentStatus status = entry.proto.status();
  status.clear_stopped_arms();
  for (const experiments::StoppedArm& s : stopped) {
    *status.add_stopped_arms() = experiments::StoppedArmToProto(e, s);
  }
  if (!SaveStatus(entry, status, now).ok()) return false;  // retried at the next evaluation
  entry.stopped = std::move(stopped);
  const std::string& name = entry.proto.metadata().name();
  for (const experiments::GuardrailDecision& d : *decisions) {
    RecordEvent(name, v1::EVENT_TYPE_WARNING, std::string(experiments::kReasonGuardrailTripped),
                absl::StrCat("arm ", d.arm, " stopped in segment ", SegmentLabel(e, d.segment),
                             ": ", d.message),
                now);
  }
  // Every non-control arm stopped in every segment with data: nothing left to compare.
  bool all = !aggregate->segments.empty();
  for (size_t i = 0; all && i < e.arms.size(); ++i) {
    if (i == e.ControlIndex()) continue;
    for (const experiments::SegmentData& segment : aggregate->segments) {
      if (!experiments::IsStopped(entry.stopped, e.arms[i].name, segment.values)) all = false;
    }
  }
  if (all) {
    (void)End(entry, v1::EXPERIMENT_PHASE_STOPPED, now, experiments::kReasonGuardrailTripped,
              "guardrails stopped every non-control arm in every segment", now);
  }
  return true;
}

void ExperimentController::UpdateGauges() {
  for (const auto& [name, entry] : entries_) {
    const std::string phase = PhaseName(entry.proto.status().phase());
    const std::string key = absl::StrCat(name, "\n", phase);
    if (info_gauges_.contains(key)) continue;
    for (auto it = info_gauges_.lower_bound(absl::StrCat(name, "\n"));
         it != info_gauges_.end() && it->first.starts_with(absl::StrCat(name, "\n"));) {
      deps_.metrics->experiment_info->Remove(it->second);
      it = info_gauges_.erase(it);
    }
    prometheus::Gauge& gauge =
        deps_.metrics->experiment_info->Add({{"experiment", name}, {"phase", phase}});
    gauge.Set(1);
    info_gauges_[key] = &gauge;
  }
  // Stopped arms are exported while the experiment runs (an alert fires on them); an ended
  // experiment's series go away.
  for (auto it = stopped_gauges_.begin(); it != stopped_gauges_.end();) {
    const std::string name = it->first.substr(0, it->first.find('\n'));
    const auto entry = entries_.find(name);
    if (entry != entries_.end() && Running(entry->second)) {
      ++it;
      continue;
    }
    deps_.metrics->experiment_arm_stopped->Remove(it->second);
    it = stopped_gauges_.erase(it);
  }
  for (const auto& [name, entry] : entries_) {
    if (!Running(entry)) continue;
    for (const experiments::StoppedArm& s : entry.stopped) {
      const std::string segment = SegmentLabel(entry.experiment, s.segment);
      const std::string key = absl::StrCat(name, "\n", s.arm, "\n", segment);
      if (stopped_gauges_.contains(key)) continue;
      prometheus::Gauge& gauge = deps_.metrics->experiment_arm_stopped->Add(
          {{"experiment", name}, {"arm", s.arm}, {"segment", segment}});
      gauge.Set(1);
      stopped_gauges_[key] = &gauge;
    }
  }
}

absl::Time ExperimentController::Tick() {
  const absl::Time now = options_.clock();
  bool changed = false;
  absl::Time next = now + options_.tick;
  {
    absl::MutexLock lock(&mu_);
    (void)FlushLocked();
    for (auto& [name, entry] : entries_) {
      if (!Running(entry)) continue;
      const experiments::Assigner& assigner = *entry.assigner;
      if (now >= assigner.end()) {
        if (End(entry, v1::EXPERIMENT_PHASE_COMPLETED, assigner.end(), "Completed",
                absl::StrCat("ran for the planned ",
                             absl::FormatDuration(entry.experiment.duration)),
                now)
                .ok()) {
          changed = true;
        }
        continue;
      }
      absl::StatusOr<uint32_t> period = assigner.PeriodIndexAt(now);
      if (period.ok() && *period != entry.period) {
        entry.period = *period;
        changed = true;
      }
      if (now >= entry.next_guardrails) {
        if (Guardrails(entry, now)) changed = true;
        entry.next_guardrails =
            now + std::min(entry.experiment.window_length, options_.max_guardrail_interval);
      }
      if (!Running(entry)) continue;  // stopped by guardrails
      next = std::min(next, assigner.end());
      if (period.ok() && *period + 1 < assigner.PeriodCount()) {
        next = std::min(next, assigner.PeriodStart(*period + 1));
      }
      next = std::min(next, entry.next_guardrails);
    }
    if (now >= next_retention_) {
      next_retention_ = now + std::min(options_.retention, kRetentionInterval);
      absl::StatusOr<uint64_t> deleted =
          deps_.store->DeleteWindowsOfExperimentsEndedBefore(now - options_.retention);
      if (deleted.ok() && *deleted > 0) {
        Log(LogLevel::kInfo, absl::StrCat("deleted ", *deleted,
                                          " metric windows of experiments that ended more "
                                          "than ",
                                          absl::FormatDuration(options_.retention), " ago"));
        for (auto& [name, entry] : entries_) {
          if (!Running(entry) && entry.proto.status().has_end_time() &&
              TimeFromProto(entry.proto.status().end_time()) < now - options_.retention) {
            entry.windows = 0;
            entry.valid_windows = 0;
            entry.cache.reset();
          }
        }
      }
    }
    UpdateGauges();
  }
  if (changed) Publish();
  return next;
}

void ExperimentController::Run() {
  runner_ = std::thread([this] {
    while (true) {
      const absl::Time next = Tick();
      absl::MutexLock lock(&run_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_) { return stopping_ || wake_; };
      const absl::Duration wait =
          std::clamp(next - options_.clock(), absl::ZeroDuration(), options_.tick);
      run_mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
      if (stopping_) return;
      wake_ = false;
    }
  });
}

void ExperimentController::Shutdown() {
  {
    absl::MutexLock lock(&run_mu_);
    stopping_ = true;
  }
  if (runner_.joinable()) runner_.join();
  (void)FlushWindows();
}

}  // namespace rxfleet::server
