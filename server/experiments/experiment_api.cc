// ExperimentController's FleetService RPCs: create (with eligibility), list, get, stop,
// delete, report and promote.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/policy/precedence.h"
#include "common/policy/selectors.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "server/api/bundle_limit.h"
#include "server/api/explain.h"
#include "server/api/metadata_bounds.h"
#include "server/api/paging.h"
#include "server/experiments/controller.h"
#include "server/experiments/controller_internal.h"
#include "server/experiments/convert.h"
#include "server/experiments/promotion.h"
#include "server/experiments/report.h"

namespace rxfleet::server {
namespace {

v1::ObjectReference AdapterRef(const v1::Adapter& adapter) {
  v1::ObjectReference ref;
  ref.set_kind("Adapter");
  ref.set_name(adapter.metadata().name());
  ref.set_host_id(adapter.host_id());
  return ref;
}

/// Index of segment key `key` in experiment `name`'s segment keys (report filters and
/// promotion segments name keys; both refuse an unknown one the same way).
/// INVALID_ARGUMENT naming the experiment's keys when `key` is not one of them.
absl::StatusOr<size_t> SegmentKeyIndex(const experiments::Experiment& e, const std::string& name,
                                       const std::string& key) {
  auto k = std::find(e.segment_keys.begin(), e.segment_keys.end(), key);
  if (k == e.segment_keys.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment: '", key, "' is not a segment key of experiment ", name,
                     " (keys: ", absl::StrJoin(e.segment_keys, ", "), ")"));
  }
  return static_cast<size_t>(k - e.segment_keys.begin());
}

}  // namespace

using common::TimeFromProto;
using common::TimeToProto;
using controller_internal::KeptFrom;
using controller_internal::PhaseName;
using experiments::Experiment;

absl::StatusOr<v1::CreateExperimentResponse> ExperimentController::CreateExperiment(
    const v1::CreateExperimentRequest& request) {
  const std::string& name = request.experiment().metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("experiment.metadata.name: required");
  absl::StatusOr<Experiment> e = experiments::ExperimentFromProto(request.experiment(), "server");
  if (!e.ok()) return e.status();
  if (absl::Status s = ValidateObjectMetadata(absl::StrCat("experiment '", name, "'"),
                                              request.experiment().metadata());
      !s.ok()) {
    return s;
  }
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
    if (tunings_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a hold tuning is named ", name,
          " (experiments and tunings share names: their adapters report windows under them)"));
    }
    if (entries_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "experiment ", name,
          " already exists (names are not reused while it is stored, even after it ended; "
          "delete an ended one first)"));
    }
    if (e->probe) {
      const std::string server = common::ProbeServerAddress(*e->probe);
      if (const Entry* other = ProbeServerUserLocked(server, name)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "spec.probe.server: the running experiment ", other->experiment.name,
            " already probes against ", server,
            "; an iperf3 server runs one test at a time and the two experiments' windows "
            "are not aligned, so use another iperf3 server (or port) or wait until it ends"));
      }
    }
    // Eligible: the selector matches, the adapter is managed and not quarantined, no older
    // experiment takes it and no policy keeps it from this one (the rule of ClaimLocked).
    const std::vector<const Entry*> running = RunningEntries();
    const std::shared_ptr<const PolicySnapshot> policies = Policies();
    // Every host's assignments with this experiment running, for the bundle size bound.
    HostFieldBytes host_bytes;
    HostFieldBytes added_bytes;
    for (const v1::Adapter& adapter : deps_.registry->ListAdapters(false)) {
      const common::AdapterAttributes attributes = AttributesOf(adapter);
      const std::optional<Claim> claim = ClaimLocked(running, attributes, now, policies->valid);
      if (claim) {
        AddAssignmentBytes(
            host_bytes, adapter.host_id(),
            experiments::AssignmentToProto(claim->entry->experiment,
                                           claim->entry->proto.metadata().generation(),
                                           adapter.metadata().name(), claim->assignment));
      }
      if (!common::Matches(e->selector, attributes)) continue;
      std::string reason;
      if (!IsManaged(adapter)) {
        reason = absl::StrCat("adapter state ", v1::AdapterState_Name(adapter.status().state()),
                              ": its RX aggregation is not managed");
      } else if (adapter.status().quarantined()) {
        // The agent writes nothing to it until it stops re-enumerating: its windows would
        // measure the hold it already has, not the arm's.
        reason =
            "quarantined for re-enumerating too often (no writes until it is stable again; "
            "see rxfleet_adapter_reenumeration_loops_total)";
      } else if (e->probe &&
                 !deps_.registry->HostHasCapability(adapter.host_id(), kProbesCapability)) {
        reason = absl::StrCat("the agent of host ", adapter.host_id(), " does not run probes (no `",
                              kProbesCapability,
                              "` capability in its Hello) and the experiment measures probe "
                              "metrics");
      } else if (claim) {
        reason = absl::StrCat("in the older experiment ", claim->entry->experiment.name,
                              " (one experiment per adapter)");
      } else {
        reason = common::DescribeKeptFields(KeptFrom(*e, attributes, policies->valid));
      }
      if (reason.empty()) {
        *response.add_eligible_adapters() = AdapterRef(adapter);
        absl::StatusOr<std::optional<experiments::Assignment>> assignment =
            assigner->AssignAdapter(attributes, now, {});
        if (assignment.ok() && assignment->has_value()) {
          // Counted with the largest probe fields (offset and rotation set).
          if (e->probe) {
            (*assignment)->probe =
                experiments::ProbeTurn{.offset = absl::Seconds(59), .rounds = 1000, .round = 999};
          }
          const v1::ExperimentAssignment proto =
              experiments::AssignmentToProto(*e, 1, adapter.metadata().name(), **assignment);
          AddAssignmentBytes(host_bytes, adapter.host_id(), proto);
          AddAssignmentBytes(added_bytes, adapter.host_id(), proto);
        }
      } else {
        v1::IneligibleAdapter* ineligible = response.add_ineligible_adapters();
        *ineligible->mutable_adapter() = AdapterRef(adapter);
        ineligible->set_reason(std::move(reason));
      }
    }
    // The hosts' probe slots stay as they are (experiments do not decide policy probes).
    AddProbeSlotBytes(host_bytes, deps_.registry->ListAdapters(false), policies->valid,
                      [this](const std::string& host) {
                        return deps_.registry->HostHasCapability(host, kProbesCapability);
                      });
    size_t most_added = 0;
    for (const auto& [host, bytes] : added_bytes) most_added = std::max(most_added, bytes);
    if (absl::Status too_big = CheckBundleFits(
            absl::StrCat("experiment '", name, "'"), policies->Bundle()->bytes.size(), host_bytes,
            static_cast<int64_t>(most_added), options_.max_bundle_bytes);
        !too_big.ok()) {
      return too_big;
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
    if (entry.experiment.probe) {
      entry.probe_plan.emplace(entry.experiment.window_length, entry.experiment.probe->duration);
    }
    const bool has_probe = entry.probe_plan.has_value();
    entries_.emplace(name, std::move(entry));
    if (has_probe) (void)RefreshProbePlansLocked(now);  // the first bundle carries the probes
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
  PageFill page(*page_size);
  for (const auto& [key, entry] : ordered) {
    if (!after->empty() && key >= *after) continue;
    v1::Experiment experiment = View(*entry);
    if (!page.Add(experiment.ByteSizeLong())) {
      response.set_next_page_token(MakePageToken(query, last_key));
      break;
    }
    *response.add_experiments() = std::move(experiment);
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

absl::StatusOr<ExperimentController::Entry*> ExperimentController::EntryForWrite(
    const std::string& name, const std::string& resource_version) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("experiment ", name, " does not exist"));
  }
  const std::string& stored = it->second.proto.metadata().resource_version();
  if (!resource_version.empty() && resource_version != stored) {
    return absl::AbortedError(absl::StrCat("experiment ", name, " was modified (resource version ",
                                           stored, ", you have ", resource_version,
                                           "); get it again and retry"));
  }
  return &it->second;
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
    absl::StatusOr<Entry*> found = EntryForWrite(request.name(), request.resource_version());
    if (!found.ok()) return found.status();
    Entry& entry = **found;
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

absl::StatusOr<v1::Experiment> ExperimentController::DeleteExperiment(
    const v1::DeleteExperimentRequest& request) {
  if (request.name().empty()) return absl::InvalidArgumentError("name: required");
  const absl::Time now = options_.clock();
  v1::Experiment out;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = EntryForWrite(request.name(), request.resource_version());
    if (!found.ok()) return found.status();
    const Entry& entry = **found;
    if (Running(entry)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "experiment ", request.name(), " is ", PhaseName(entry.proto.status().phase()),
          "; stop it first (rxfleetctl experiment stop ", request.name(), ")"));
    }
    if (absl::Status s = deps_.store->DeleteExperiment(request.name()); !s.ok()) {
      if (!absl::IsNotFound(s)) deps_.metrics->store_write_failures->Increment();
      return s;
    }
    out = View(entry);
    std::erase_if(pending_, [&](const StoredWindow& w) { return w.experiment == request.name(); });
    const std::string prefix = absl::StrCat(request.name(), "\n");
    for (auto gauge = info_gauges_.lower_bound(prefix);
         gauge != info_gauges_.end() && gauge->first.starts_with(prefix);) {
      deps_.metrics->experiment_info->Remove(gauge->second);
      gauge = info_gauges_.erase(gauge);
    }
    entries_.erase(request.name());
    UpdateGauges();
  }
  RecordEvent(request.name(), v1::EVENT_TYPE_NORMAL, "Deleted",
              "experiment and its metric windows deleted", now);
  return out;
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
    absl::StatusOr<size_t> index = SegmentKeyIndex(e, request.name(), key);
    if (!index.ok()) return index.status();
    filter.emplace_back(*index, value);
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
    const v1::PromoteExperimentRequest& request, std::string_view actor) {
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
  // Any subset of the segment keys; the keys named narrow the selector.
  if (!request.segment().empty()) {
    promotion.segment.assign(e.segment_keys.size(), std::nullopt);
    for (const auto& [key, value] : request.segment()) {
      absl::StatusOr<size_t> index = SegmentKeyIndex(e, request.name(), key);
      if (!index.ok()) return index.status();
      promotion.segment[*index] = value;
    }
  }
  absl::StatusOr<common::Policy> policy = experiments::BuildPromotionPolicy(e, promotion);
  if (!policy.ok()) return policy.status();
  v1::ApplyPolicyRequest apply;
  *apply.mutable_policy() = common::PolicyToProto(*policy);
  apply.set_dry_run(request.dry_run());
  absl::StatusOr<v1::ApplyPolicyResponse> applied =
      deps_.apply_policy(apply, request.name(), actor);
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

}  // namespace rxfleet::server
