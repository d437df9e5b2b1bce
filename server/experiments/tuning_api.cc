// ExperimentController's FleetService hold tuning RPCs: create, list, get, approve, stop and
// delete. Approval writes a policy per proposed segment through deps.apply_policy, the path
// of ApplyPolicy with its audit event.

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/experiment/experiment.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "common/proto/tuning.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "server/api/explain.h"
#include "server/api/metadata_bounds.h"
#include "server/api/paging.h"
#include "server/experiments/controller.h"
#include "server/experiments/promotion.h"
#include "server/log.h"
#include "server/tuning/evidence.h"

namespace rxfleet::server {
namespace {

using common::TimeFromProto;
using common::TimeToProto;

absl::Status CheckName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("name: required");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::CreateHoldTuningResponse> ExperimentController::CreateHoldTuning(
    const v1::CreateHoldTuningRequest& request) {
  const std::string& name = request.tuning().metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("tuning.metadata.name: required");
  absl::StatusOr<tuning::HoldTuning> t = tuning::HoldTuningFromProto(request.tuning(), "request");
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateObjectMetadata(absl::StrCat("hold tuning '", name, "'"),
                                              request.tuning().metadata());
      !s.ok()) {
    return s;
  }
  const absl::Time now = options_.clock();
  v1::HoldTuning to_store;
  to_store.mutable_metadata()->set_name(name);
  *to_store.mutable_metadata()->mutable_labels() = request.tuning().metadata().labels();
  *to_store.mutable_metadata()->mutable_annotations() = request.tuning().metadata().annotations();
  *to_store.mutable_spec() = tuning::HoldTuningSpecToProto(*t);
  v1::HoldTuningStatus* status = to_store.mutable_status();
  status->set_phase(v1::HOLD_TUNING_PHASE_RUNNING);
  *status->mutable_start_time() = TimeToProto(now);
  status->set_observed_generation(1);
  v1::CreateHoldTuningResponse response;
  {
    absl::MutexLock lock(&mu_);
    if (entries_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "an experiment is named ", name,
          " (tunings and experiments share names: their adapters report windows under them)"));
    }
    if (tunings_.contains(name)) {
      return absl::AlreadyExistsError(
          absl::StrCat("hold tuning ", name, " already exists (delete a stopped one first)"));
    }
    if (tunings_.size() >= options_.max_hold_tunings && !request.dry_run()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(tunings_.size(),
                       " hold tunings are stored, the most this server keeps; "
                       "delete stopped ones first"));
    }
    TuningEntry probe;
    probe.tuning = *t;
    probe.segmenter.name = name;
    probe.segmenter.segment_keys = t->segment_keys;
    probe.proto = to_store;
    const std::map<std::vector<std::string>, tuning::SegmentInput> inputs =
        TuningInputsLocked(probe, now, nullptr);
    uint32_t eligible = 0;
    for (const auto& [values, input] : inputs) {
      eligible += static_cast<uint32_t>(input.adapters.size());
    }
    response.set_eligible_adapters(eligible);
    // The segments the eligible adapters fall into (values, adapters, incumbent), so the caller
    // sees where they are before the first step starts them.
    const auto add_segments = [&](v1::HoldTuningStatus* out) {
      for (const auto& [values, input] : inputs) {
        v1::HoldTuningSegment* segment = out->add_segments();
        for (size_t i = 0; i < values.size() && i < t->segment_keys.size(); ++i) {
          (*segment->mutable_segment())[t->segment_keys[i]] = values[i];
        }
        segment->set_adapters(static_cast<uint32_t>(input.adapters.size()));
        segment->set_incumbent_hold_us(input.incumbent_hold_us);
      }
    };
    if (request.dry_run()) {
      *response.mutable_tuning() = to_store;
      response.mutable_tuning()->mutable_status()->set_phase(v1::HOLD_TUNING_PHASE_UNSPECIFIED);
      response.mutable_tuning()->mutable_status()->clear_start_time();
      add_segments(response.mutable_tuning()->mutable_status());
      return response;
    }
    absl::StatusOr<v1::HoldTuning> stored = deps_.store->CreateTuning(to_store, now);
    if (!stored.ok()) {
      if (!absl::IsAlreadyExists(stored.status())) deps_.metrics->store_write_failures->Increment();
      return stored.status();
    }
    TuningEntry entry = std::move(probe);
    entry.proto = *stored;
    tunings_.emplace(name, std::move(entry));
    *response.mutable_tuning() = TuningView(tunings_.at(name));
    if (response.tuning().status().segments().empty()) {
      add_segments(response.mutable_tuning()->mutable_status());
    }
  }
  RecordTuningEvent(
      name, v1::EVENT_TYPE_NORMAL, "Created",
      absl::StrCat("hold tuning started over ", response.eligible_adapters(), " adapters"), now);
  {
    absl::MutexLock lock(&run_mu_);
    wake_ = true;  // the first step starts the segments
  }
  return response;
}

absl::StatusOr<v1::ListHoldTuningsResponse> ExperimentController::ListHoldTunings(
    const v1::ListHoldTuningsRequest& request) const {
  absl::StatusOr<size_t> page_size = PageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  const std::string query = "tunings";
  absl::StatusOr<std::string> after = ParsePageToken(request.page_token(), query);
  if (!after.ok()) return after.status();
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, const TuningEntry*>> ordered;
  for (const auto& [name, entry] : tunings_) {
    const int64_t created = absl::ToUnixNanos(TimeFromProto(entry.proto.metadata().create_time()));
    ordered.emplace_back(absl::StrCat(absl::StrFormat("%020d", created), "/", name), &entry);
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  v1::ListHoldTuningsResponse response;
  std::string last_key;
  PageFill page(*page_size);
  for (const auto& [key, entry] : ordered) {
    if (!after->empty() && key >= *after) continue;
    v1::HoldTuning view = TuningView(*entry);
    if (!page.Add(view.ByteSizeLong())) {
      response.set_next_page_token(MakePageToken(query, last_key));
      break;
    }
    *response.add_tunings() = std::move(view);
    last_key = key;
  }
  return response;
}

absl::StatusOr<v1::HoldTuning> ExperimentController::GetHoldTuning(
    const v1::GetHoldTuningRequest& request) const {
  if (absl::Status s = CheckName(request.name()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = tunings_.find(request.name());
  if (it == tunings_.end()) {
    return absl::NotFoundError(absl::StrCat("hold tuning ", request.name(), " does not exist"));
  }
  return TuningView(it->second);
}

absl::StatusOr<v1::ApproveHoldTuningResponse> ExperimentController::ApproveHoldTuning(
    const v1::ApproveHoldTuningRequest& request, std::string_view actor) {
  if (absl::Status s = CheckName(request.name()); !s.ok()) return s;
  std::vector<std::vector<std::string>> segments;
  if (!request.segment().empty()) {
    absl::MutexLock lock(&mu_);
    auto it = tunings_.find(request.name());
    if (it == tunings_.end()) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", request.name(), " does not exist"));
    }
    const std::vector<std::string>& keys = it->second.tuning.segment_keys;
    std::vector<std::string> values;
    for (const std::string& key : keys) {
      auto v = request.segment().find(key);
      if (v == request.segment().end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("segment: name a value for every segment "
                         "key of hold tuning ",
                         request.name(), " (", absl::StrJoin(keys, ", "), ")"));
      }
      values.push_back(v->second);
    }
    if (static_cast<size_t>(request.segment().size()) != keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat("segment: hold tuning ", request.name(),
                                                     " has the segment keys ",
                                                     absl::StrJoin(keys, ", "), " only"));
    }
    segments.push_back(std::move(values));
  }
  return Approve(request.name(), segments, request.resource_version(), request.dry_run(), actor);
}

absl::StatusOr<v1::ApproveHoldTuningResponse> ExperimentController::Approve(
    const std::string& name, const std::vector<std::vector<std::string>>& segments,
    const std::string& resource_version, bool dry_run, std::string_view actor) {
  struct Planned {
    std::vector<std::string> segment;
    uint32_t hold_us = 0;
    common::Policy policy;
  };
  std::vector<Planned> planned;
  {
    absl::MutexLock lock(&mu_);
    auto it = tunings_.find(name);
    if (it == tunings_.end()) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", name, " does not exist"));
    }
    TuningEntry& entry = it->second;
    const tuning::HoldTuning& t = entry.tuning;
    if (!resource_version.empty() &&
        resource_version != entry.proto.metadata().resource_version()) {
      return absl::AbortedError(
          absl::StrCat("hold tuning ", name, " was modified (resource version ",
                       entry.proto.metadata().resource_version(), ", you have ", resource_version,
                       "); get it again and retry"));
    }
    if (!Running(entry)) {
      return absl::FailedPreconditionError(
          absl::StrCat("hold tuning ", name, " is stopped; nothing can be approved"));
    }
    for (const std::vector<std::string>& named : segments) {
      if (entry.segments.contains(named)) continue;
      std::vector<std::string> known;
      for (const auto& [values, segment] : entry.segments) {
        known.push_back(TuningSegmentText(t.segment_keys, values));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "segment: hold tuning ", name, " has no segment ",
          TuningSegmentText(t.segment_keys, named),
          "; its segments: ", known.empty() ? "none yet" : absl::StrJoin(known, "; ")));
    }
    const std::shared_ptr<const PolicySnapshot> policies = Policies();
    for (const auto& [values, segment] : entry.segments) {
      if (!segments.empty() &&
          std::find(segments.begin(), segments.end(), values) == segments.end()) {
        continue;
      }
      const std::string where = TuningSegmentText(t.segment_keys, values);
      const tuning::SegmentState& s = segment.state;
      if (s.phase != tuning::Phase::kProposed || !s.proposal) {
        if (!segments.empty()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "hold tuning ", name, " segment ", where, " is ",
              common::ToAbslView(tuning::PhaseName(s.phase)), ", it has no proposal to approve"));
        }
        continue;
      }
      // The policy must outrank the ones that set the incumbent, or it would change nothing.
      int priority = 0;
      std::string decider;
      for (const common::AdapterAttributes& adapter : segment.input.adapters) {
        const common::LayeredSettings expected =
            ExpectedSettings(adapter, policies->valid, /*experiments=*/nullptr);
        auto origin = expected.origins.find("hold_us");
        if (origin == expected.origins.end() ||
            origin->second.provenance.source == common::PolicySource::kBuiltinDefault) {
          continue;
        }
        if (origin->second.provenance.name == TuningPolicyName(name, values)) continue;
        if (origin->second.priority + 1 > priority) {
          priority = origin->second.priority + 1;
          decider = origin->second.provenance.name;
        }
      }
      if (priority > common::kMaxPolicyPriority) {
        return absl::FailedPreconditionError(absl::StrCat(
            "hold tuning ", name, " segment ", where, ": policy ", decider,
            " sets the hold at the highest priority ", common::kMaxPolicyPriority,
            "; no policy can outrank it (lower its priority, or adopt the hold in it)"));
      }
      absl::StatusOr<experiments::Experiment> e = tuning::ComparisonExperiment(
          t, values, s.proposal->incumbent_hold_us, {&s.proposal->hold_us, 1}, t.period_length);
      if (!e.ok()) return e.status();
      experiments::PromotionRequest promotion;
      promotion.arm = tuning::HoldArmName(s.proposal->hold_us);
      promotion.segment.assign(values.begin(), values.end());
      promotion.policy_name = TuningPolicyName(name, values);
      promotion.priority = priority;
      absl::StatusOr<common::Policy> policy = experiments::BuildPromotionPolicy(*e, promotion);
      if (!policy.ok()) {
        return absl::FailedPreconditionError(absl::StrCat("hold tuning ", name, " segment ", where,
                                                          ": ", policy.status().message()));
      }
      policy->labels.erase(std::string(experiments::kPromotedFromExperimentLabel));
      policy->labels.erase(std::string(experiments::kPromotedFromArmLabel));
      policy->labels[std::string(kTunedByLabel)] = name;
      policy->source = absl::StrCat("hold tuning ", name, " segment ", where);
      planned.push_back({values, s.proposal->hold_us, *std::move(policy)});
    }
  }
  if (planned.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("hold tuning ", name, " has no segment with a proposal to approve"));
  }
  v1::ApproveHoldTuningResponse response;
  absl::Status failed;
  bool adopted = false;
  for (const Planned& p : planned) {
    v1::ApplyPolicyRequest apply;
    *apply.mutable_policy() = common::PolicyToProto(p.policy);
    apply.set_dry_run(dry_run);
    absl::StatusOr<v1::ApplyPolicyResponse> applied = deps_.apply_policy(apply, name, actor);
    if (!applied.ok()) {
      failed = applied.status();
      break;
    }
    *response.add_policies() = applied->policy();
    if (dry_run) continue;
    const absl::Time now = options_.clock();
    absl::MutexLock lock(&mu_);
    auto it = tunings_.find(name);
    if (it == tunings_.end()) break;
    TuningEntry& entry = it->second;
    auto segment = entry.segments.find(p.segment);
    if (segment == entry.segments.end()) continue;
    const std::string where = TuningSegmentText(entry.tuning.segment_keys, p.segment);
    TuningSegment& seg = segment->second;
    if (seg.state.phase != tuning::Phase::kProposed || !seg.state.proposal ||
        seg.state.proposal->hold_us != p.hold_us) {
      continue;  // another approval came first
    }
    // The segment's adapters run the adopted hold by policy from now on.
    tuning::SegmentInput input = seg.input;
    input.incumbent_hold_us = p.hold_us;
    absl::StatusOr<tuning::SegmentState> next = tuning::Adopt(entry.tuning, seg.state, input, now);
    if (!next.ok()) {
      failed = next.status();
      break;
    }
    seg.state = *std::move(next);
    seg.input = std::move(input);
    seg.view.set_applied_policy(applied->policy().metadata().name());
    RefreshAssigned(entry, seg, now, /*force=*/true);
    adopted = true;
    RecordTuningEvent(
        name, v1::EVENT_TYPE_NORMAL, "Adopted",
        absl::StrCat(where, ": policy ", applied->policy().metadata().name(), " sets ",
                     common::FormatHoldUs(p.hold_us), "; ", seg.state.message),
        now);
    if (absl::Status s = SaveTuningStatus(entry, TuningStatusLocked(entry), now); !s.ok()) {
      entry.status_dirty = true;  // the next step retries; the policy is written
    }
  }
  if (adopted) Publish();
  if (!failed.ok()) return failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = tunings_.find(name);
    if (it != tunings_.end()) *response.mutable_tuning() = TuningView(it->second);
  }
  return response;
}

absl::StatusOr<v1::HoldTuning> ExperimentController::StopHoldTuning(
    const v1::StopHoldTuningRequest& request) {
  if (absl::Status s = CheckName(request.name()); !s.ok()) return s;
  if (request.reason().size() > 1024) {
    return absl::InvalidArgumentError("reason: longer than 1024 characters");
  }
  const absl::Time now = options_.clock();
  const std::string message = request.reason().empty()
                                  ? "stopped by StopHoldTuning"
                                  : absl::StrCat("stopped by StopHoldTuning: ", request.reason());
  v1::HoldTuning out;
  {
    absl::MutexLock lock(&mu_);
    auto it = tunings_.find(request.name());
    if (it == tunings_.end()) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", request.name(), " does not exist"));
    }
    TuningEntry& entry = it->second;
    const std::string& stored = entry.proto.metadata().resource_version();
    if (!request.resource_version().empty() && request.resource_version() != stored) {
      return absl::AbortedError(
          absl::StrCat("hold tuning ", request.name(), " was modified (resource version ", stored,
                       ", you have ", request.resource_version(), "); get it again and retry"));
    }
    if (!Running(entry)) {
      return absl::FailedPreconditionError(
          absl::StrCat("hold tuning ", request.name(), " is already stopped"));
    }
    std::map<std::vector<std::string>, TuningSegment> before = entry.segments;
    for (auto& [values, segment] : entry.segments) {
      if (segment.state.phase != tuning::Phase::kStopped) {
        segment.state = tuning::Stop(segment.state, now, message);
      }
      RefreshAssigned(entry, segment, now, /*force=*/true);  // stopped: nobody explores
    }
    v1::HoldTuningStatus status = TuningStatusLocked(entry);
    status.set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
    *status.mutable_end_time() = TimeToProto(now);
    if (absl::Status s = SaveTuningStatus(entry, status, now); !s.ok()) {
      entry.segments = std::move(before);
      return s;
    }
    out = TuningView(entry);
  }
  RecordTuningEvent(request.name(), v1::EVENT_TYPE_NORMAL, "Stopped", message, now);
  Publish();
  return out;
}

absl::StatusOr<v1::HoldTuning> ExperimentController::DeleteHoldTuning(
    const v1::DeleteHoldTuningRequest& request) {
  if (absl::Status s = CheckName(request.name()); !s.ok()) return s;
  v1::HoldTuning out;
  {
    absl::MutexLock lock(&mu_);
    auto it = tunings_.find(request.name());
    if (it == tunings_.end()) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", request.name(), " does not exist"));
    }
    const std::string& stored = it->second.proto.metadata().resource_version();
    if (!request.resource_version().empty() && request.resource_version() != stored) {
      return absl::AbortedError(
          absl::StrCat("hold tuning ", request.name(), " was modified (resource version ", stored,
                       ", you have ", request.resource_version(), "); get it again and retry"));
    }
    if (Running(it->second)) {
      return absl::FailedPreconditionError(
          absl::StrCat("hold tuning ", request.name(), " is running; stop it before deleting it"));
    }
    if (absl::Status s = deps_.store->DeleteTuning(request.name()); !s.ok()) {
      deps_.metrics->store_write_failures->Increment();
      return s;
    }
    std::erase_if(pending_, [&](const StoredWindow& w) { return w.experiment == request.name(); });
    out = TuningView(it->second);
    tunings_.erase(it);
  }
  RecordTuningEvent(request.name(), v1::EVENT_TYPE_NORMAL, "Deleted",
                    "hold tuning and its metric windows deleted", options_.clock());
  return out;
}

}  // namespace rxfleet::server
