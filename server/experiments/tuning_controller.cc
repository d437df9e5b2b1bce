// ExperimentController's hold tunings: loading, which adapters each tuning takes (its segments'
// inputs) and which explore now (the assignments of bundles and the experiment layer), the
// status and events. The scheduler step is in tuning_scheduler.cc, window intake and
// retention in tuning_windows.cc, the RPC handlers and approval in tuning_api.cc.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/policy/precedence.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "common/proto/tuning.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "server/api/explain.h"
#include "server/api/family_guard.h"
#include "server/experiments/assignment.h"
#include "server/experiments/controller.h"
#include "server/log.h"
#include "server/tuning/evidence.h"
#include "server/tuning/state_proto.h"

namespace rxfleet::server {
namespace {

using common::TimeFromProto;
using common::TimeToProto;

uint64_t ResourceVersionOf(const v1::HoldTuning& tuning) {
  uint64_t version = 0;
  return absl::SimpleAtoi(tuning.metadata().resource_version(), &version) ? version : 0;
}

}  // namespace

std::string TuningSegmentText(const std::vector<std::string>& keys,
                              const std::vector<std::string>& values) {
  if (values.empty()) return "*";
  std::vector<std::string> parts;
  for (size_t i = 0; i < values.size() && i < keys.size(); ++i) {
    parts.push_back(absl::StrCat(keys[i], "=", values[i].empty() ? "(none)" : values[i]));
  }
  return absl::StrJoin(parts, ",");
}

bool ExperimentController::Running(const TuningEntry& entry) {
  return entry.proto.status().phase() == v1::HOLD_TUNING_PHASE_RUNNING;
}

std::optional<ExperimentController::TuningEntry> ExperimentController::TuningFromProto(
    v1::HoldTuning proto, const std::map<std::string, WindowCounts>& counts) {
  const std::string name = proto.metadata().name();
  absl::StatusOr<tuning::HoldTuning> t = tuning::HoldTuningFromProto(proto, "server");
  if (!t.ok()) {
    Log(LogLevel::kWarning,
        absl::StrCat("stored hold tuning ", name,
                     " fails validation and is ignored: ", t.status().message()));
    return std::nullopt;
  }
  TuningEntry entry;
  entry.tuning = *std::move(t);
  entry.segmenter.name = name;
  entry.segmenter.segment_keys = entry.tuning.segment_keys;
  for (const v1::HoldTuningSegment& stored : proto.status().segments()) {
    std::vector<std::string> values;
    for (const std::string& key : entry.tuning.segment_keys) {
      auto it = stored.segment().find(key);
      values.push_back(it == stored.segment().end() ? "" : it->second);
    }
    absl::StatusOr<tuning::SegmentState> state =
        tuning::StateFromProto(stored.planner_state(), values);
    if (!state.ok()) {
      Log(LogLevel::kWarning, absl::StrCat("hold tuning ", name, " segment ",
                                           TuningSegmentText(entry.tuning.segment_keys, values),
                                           ": stored state is ignored (the segment starts again): ",
                                           state.status().message()));
      continue;
    }
    TuningSegment segment;
    segment.state = *std::move(state);
    segment.view = stored;
    segment.view.clear_planner_state();
    entry.segments.emplace(std::move(values), std::move(segment));
  }
  if (auto it = counts.find(name); it != counts.end()) {
    entry.windows = it->second.total;
    entry.valid_windows = it->second.valid;
  }
  entry.proto = std::move(proto);
  return entry;
}

absl::Status ExperimentController::LoadTunings(bool reload, uint64_t revision) {
  absl::StatusOr<std::vector<v1::HoldTuning>> stored = deps_.store->LoadTunings();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = deps_.store->CountWindows();
  if (!counts.ok()) return counts.status();
  std::set<std::string, std::less<>> seen;
  for (v1::HoldTuning& proto : *stored) {
    const std::string name = proto.metadata().name();
    seen.insert(name);
    auto it = tunings_.find(name);
    // This server's own write may be newer than what was read: keep it.
    if (it != tunings_.end() && ResourceVersionOf(proto) <= ResourceVersionOf(it->second.proto)) {
      continue;
    }
    std::optional<TuningEntry> entry = TuningFromProto(std::move(proto), *counts);
    if (!entry.has_value()) continue;
    if (it == tunings_.end()) {
      if (reload) {
        Log(LogLevel::kInfo, absl::StrCat("hold tuning ", name, " was created by another server"));
      }
      tunings_.emplace(name, *std::move(entry));
    } else {
      entry->cache = std::move(it->second.cache);
      entry->windows = std::max(entry->windows, it->second.windows);
      entry->valid_windows = std::max(entry->valid_windows, it->second.valid_windows);
      // Keep what this server computed that the store does not hold.
      for (auto& [values, segment] : entry->segments) {
        auto old = it->second.segments.find(values);
        if (old == it->second.segments.end()) continue;
        segment.input = std::move(old->second.input);
        segment.next_update = old->second.next_update;
      }
      it->second = *std::move(entry);
    }
  }
  if (reload) {
    for (auto it = tunings_.begin(); it != tunings_.end();) {
      if (!seen.contains(it->first) && ResourceVersionOf(it->second.proto) <= revision) {
        Log(LogLevel::kInfo,
            absl::StrCat("hold tuning ", it->first, " was deleted by another server"));
        it = tunings_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return absl::OkStatus();
}

std::vector<const ExperimentController::TuningEntry*> ExperimentController::RunningTunings() const {
  std::vector<const TuningEntry*> out;
  for (const auto& [name, entry] : tunings_) {
    if (Running(entry)) out.push_back(&entry);
  }
  std::sort(out.begin(), out.end(), [](const TuningEntry* a, const TuningEntry* b) {
    const absl::Time ta = TimeFromProto(a->proto.metadata().create_time());
    const absl::Time tb = TimeFromProto(b->proto.metadata().create_time());
    return ta != tb ? ta < tb : a->proto.metadata().name() < b->proto.metadata().name();
  });
  return out;
}

bool ExperimentController::TuningKept(const TuningEntry& entry,
                                      const common::AdapterAttributes& adapter,
                                      const std::vector<common::Policy>& policies) const {
  // Every candidate sets hold_us alone, so one of them tells whether a policy keeps the field.
  common::RxAggSettings settings;
  settings.hold_us = entry.tuning.candidates_us.front();
  const std::vector<common::ArmInEffect> arms = {
      {entry.tuning.name, tuning::HoldArmName(*settings.hold_us), kTuningPriority, settings}};
  common::PolicyLayers layers;
  layers.server = &policies;
  return !common::FieldsKeptFromExperiment(adapter, layers, arms).empty();
}

std::optional<v1::ExperimentAssignment> ExperimentController::TuningClaimLocked(
    const std::vector<const TuningEntry*>& tunings, const common::AdapterAttributes& adapter,
    absl::Time now, const std::vector<common::Policy>& policies, std::string_view ended) const {
  for (const TuningEntry* entry : tunings) {  // oldest first, as experiments
    if (!common::Matches(entry->tuning.selector, adapter) ||
        TuningKept(*entry, adapter, policies)) {
      continue;
    }
    // The first tuning that may take the adapter decides it, exploring now or not.
    if (entry->tuning.name == ended) return std::nullopt;
    auto segment = entry->segments.find(experiments::SegmentValuesFor(entry->segmenter, adapter));
    if (segment == entry->segments.end()) return std::nullopt;
    RefreshAssigned(*entry, segment->second, now, /*force=*/false);
    auto a =
        segment->second.assigned.find(experiments::AdapterKey(adapter.host, adapter.adapter_id));
    if (a == segment->second.assigned.end()) return std::nullopt;
    const tuning::HoldAssignment& hold = a->second;
    const tuning::HoldTuning& t = entry->tuning;
    v1::ExperimentAssignment out;
    out.set_adapter_id(adapter.adapter_id);
    out.set_experiment(t.name);
    out.set_experiment_generation(entry->proto.metadata().generation());
    out.set_arm(hold.arm);
    common::RxAggSettings settings;
    settings.hold_us = hold.hold_us;
    *out.mutable_settings() = common::RxAggSettingsToProto(settings);
    out.set_priority(kTuningPriority);
    out.set_period_index(hold.period_index);
    *out.mutable_period_start_time() = TimeToProto(hold.period_start);
    *out.mutable_period_end_time() = TimeToProto(hold.period_end);
    *out.mutable_window_length() = common::DurationToProto(t.window_length);
    *out.mutable_burn_in() = common::DurationToProto(t.burn_in);
    return out;
  }
  return std::nullopt;
}

std::map<std::vector<std::string>, tuning::SegmentInput> ExperimentController::TuningInputsLocked(
    const TuningEntry& entry, absl::Time now, std::vector<std::string>* waiting) const {
  const std::vector<const Entry*> running = RunningEntries();
  const std::vector<const TuningEntry*> tunings = RunningTunings();
  const std::shared_ptr<const PolicySnapshot> policies = Policies();
  // Per segment: the adapters and the hold their policies set.
  std::map<std::vector<std::string>, std::vector<std::pair<common::AdapterAttributes, uint32_t>>>
      found;
  const std::shared_ptr<const std::vector<v1::Adapter>> adapters =
      deps_.registry->AdapterSnapshot();
  for (const v1::Adapter& adapter : *adapters) {
    const common::AdapterAttributes attributes = AttributesOf(adapter);
    if (!common::Matches(entry.tuning.selector, attributes)) continue;
    if (!IsManaged(adapter) || IsObserveOnly(adapter) || adapter.status().quarantined()) continue;
    if (ClaimLocked(running, attributes, now, policies->valid)) continue;  // in an experiment
    bool older = false;  // an older tuning takes it
    for (const TuningEntry* other : tunings) {
      if (other == &entry) break;
      if (common::Matches(other->tuning.selector, attributes) &&
          !TuningKept(*other, attributes, policies->valid)) {
        older = true;
        break;
      }
    }
    if (older || TuningKept(entry, attributes, policies->valid)) continue;
    const common::LayeredSettings expected =
        ExpectedSettings(attributes, policies->valid, /*experiments=*/nullptr);
    if (!expected.resolved.hold_us) continue;  // the built-in default always sets one
    found[experiments::SegmentValuesFor(entry.segmenter, attributes)].emplace_back(
        attributes, expected.resolved.hold_us->value);
  }
  std::map<std::vector<std::string>, tuning::SegmentInput> out;
  for (auto& [values, members] : found) {
    // The incumbent is the hold most of the segment's adapters run (ties: the smaller); the
    // adapters a policy gives another hold are not tuned with them.
    std::map<uint32_t, size_t> votes;
    for (const auto& [attributes, hold] : members) ++votes[hold];
    uint32_t incumbent = votes.begin()->first;
    for (const auto& [hold, count] : votes) {
      if (count > votes[incumbent]) incumbent = hold;
    }
    tuning::SegmentInput input;
    input.segment = values;
    input.incumbent_hold_us = incumbent;
    for (auto& [attributes, hold] : members) {
      if (hold == incumbent) input.adapters.push_back(std::move(attributes));
    }
    if (waiting != nullptr && votes.size() > 1) {
      waiting->push_back(absl::StrCat(TuningSegmentText(entry.tuning.segment_keys, values), ": ",
                                      members.size() - input.adapters.size(),
                                      " adapters whose policies set another hold than ",
                                      common::FormatHoldUs(incumbent), " are left out"));
    }
    out.emplace(values, std::move(input));
  }
  return out;
}

void ExperimentController::RefreshAssigned(const TuningEntry& entry, const TuningSegment& segment,
                                           absl::Time now, bool force) {
  const tuning::HoldTuning& t = entry.tuning;
  const tuning::SegmentState& s = segment.state;
  const uint32_t period =
      now < s.epoch_start
          ? UINT32_MAX
          : static_cast<uint32_t>(tuning::WholePeriods(now - s.epoch_start, t.period_length));
  if (!force && period == segment.assigned_period) return;
  segment.assigned.clear();
  segment.assigned_period = period;
  if (period == UINT32_MAX) return;
  for (const std::string& key : tuning::SlotAdaptersAt(t, s, now)) {
    absl::StatusOr<tuning::HoldAssignment> a = tuning::AssignmentFor(t, s, key, now);
    if (a.ok()) segment.assigned.emplace(key, *std::move(a));
  }
}

void ExperimentController::UpdateSegmentView(const TuningEntry& entry, TuningSegment& segment,
                                             const tuning::Evidence* evidence) const {
  const tuning::HoldTuning& t = entry.tuning;
  const tuning::SegmentState& s = segment.state;
  v1::HoldTuningSegment& v = segment.view;
  if (evidence != nullptr) {
    v.clear_comparisons();
    for (const tuning::CandidateEvidence& row : evidence->candidates) {
      *v.add_comparisons() = tuning::ComparisonToProto(row);
    }
    v.set_evidence_text(tuning::RenderEvidenceText(t, *evidence));
  }
  if (s.proposal && !s.proposal->confirmation.candidates.empty()) {
    v1::HoldTuningProposal* p = v.mutable_proposal();
    p->set_hold_us(s.proposal->hold_us);
    p->set_incumbent_hold_us(s.proposal->incumbent_hold_us);
    *p->mutable_time() = TimeToProto(s.proposal->time);
    *p->mutable_confirmation() =
        tuning::ComparisonToProto(s.proposal->confirmation.candidates.front());
    p->set_policy_name(TuningPolicyName(t.name, s.segment));
  }
}

std::string TuningPolicyName(std::string_view tuning, const std::vector<std::string>& segment) {
  const uint64_t hash =
      experiments::StableHash64(absl::StrCat(common::ToAbslView(tuning), std::string(1, '\0'),
                                             absl::StrJoin(segment, std::string(1, '\0'))));
  return absl::StrFormat("%s-%08x", tuning.substr(0, 54), static_cast<uint32_t>(hash));
}

v1::HoldTuningStatus ExperimentController::TuningStatusLocked(const TuningEntry& entry) const {
  const absl::Time now = options_.clock();
  const tuning::HoldTuning& t = entry.tuning;
  v1::HoldTuningStatus status = entry.proto.status();
  status.clear_segments();
  status.clear_conditions();
  for (const auto& [values, segment] : entry.segments) {
    const tuning::SegmentState& s = segment.state;
    v1::HoldTuningSegment* v = status.add_segments();
    *v = segment.view;
    v->clear_segment();
    for (size_t i = 0; i < values.size() && i < t.segment_keys.size(); ++i) {
      (*v->mutable_segment())[t.segment_keys[i]] = values[i];
    }
    v->set_phase(std::string(tuning::PhaseName(s.phase)));
    v->set_reason(s.reason);
    v->set_message(s.message);
    *v->mutable_last_transition_time() = TimeToProto(s.last_transition);
    v->set_incumbent_hold_us(s.incumbent_hold_us);
    if (s.previous_hold_us) {
      v->set_previous_hold_us(*s.previous_hold_us);
    } else {
      v->clear_previous_hold_us();
    }
    v->set_exploration(s.exploration);
    v->set_round(s.rounds.empty() ? 0 : s.rounds.back().number);
    v->set_confirmation(!s.rounds.empty() && s.rounds.back().confirmation);
    v->clear_candidates();
    for (const tuning::CandidateState& c : s.challengers) {
      v1::HoldTuningCandidate* out = v->add_candidates();
      out->set_hold_us(c.hold_us);
      out->set_status(std::string(tuning::CandidateStatusName(c.status)));
      out->set_message(c.message);
      out->set_last_round(c.last_round);
      if (c.changed != absl::InfinitePast()) *out->mutable_change_time() = TimeToProto(c.changed);
    }
    v->set_committed_windows(tuning::CommittedWindows(t, s));
    v->set_budget_windows(s.budget_windows);
    v->set_adapters(static_cast<uint32_t>(segment.input.adapters.size()));
    // Explorers run only while a segment explores or re-checks, and only with adapters.
    const bool exploring =
        s.phase == tuning::Phase::kExploring || s.phase == tuning::Phase::kRechecking;
    v->set_explorers(s.rounds.empty() || !exploring || segment.input.adapters.empty()
                         ? 0
                         : s.rounds.back().explorers);
    if (std::optional<absl::Time> by = tuning::ExplorationEndsBy(t, s)) {
      *v->mutable_exploration_ends_by() = TimeToProto(*by);
    } else {
      v->clear_exploration_ends_by();
    }
    if (!s.proposal) v->clear_proposal();
    *v->mutable_planner_state() = tuning::StateToProto(s);
  }
  const v1::ConditionStatus now_status =
      entry.waiting.empty() ? v1::CONDITION_STATUS_FALSE : v1::CONDITION_STATUS_TRUE;
  v1::Condition waiting;
  for (const v1::Condition& c : entry.proto.status().conditions()) {
    if (c.type() == "SegmentsWaiting") waiting = c;
  }
  if (waiting.status() != now_status || !waiting.has_last_transition_time()) {
    *waiting.mutable_last_transition_time() = TimeToProto(now);
  }
  waiting.set_type("SegmentsWaiting");
  waiting.set_status(now_status);
  waiting.set_reason(entry.waiting.empty() ? "AllSegmentsTuned" : "SegmentsNotTuned");
  waiting.set_message(absl::StrJoin(entry.waiting, "; "));
  waiting.set_observed_generation(entry.proto.metadata().generation());
  *status.add_conditions() = std::move(waiting);
  return status;
}

absl::Status ExperimentController::SaveTuningStatus(TuningEntry& entry,
                                                    const v1::HoldTuningStatus& status,
                                                    absl::Time now) {
  absl::StatusOr<v1::HoldTuning> saved =
      deps_.store->UpdateTuningStatus(entry.proto.metadata().name(), status, now, tick_fence_);
  if (!saved.ok()) {
    deps_.metrics->store_write_failures->Increment();
    return saved.status();
  }
  entry.proto = *std::move(saved);
  return absl::OkStatus();
}

v1::HoldTuning ExperimentController::TuningView(const TuningEntry& entry) const {
  v1::HoldTuning out = entry.proto;
  uint32_t assigned = 0;
  for (v1::HoldTuningSegment& segment : *out.mutable_status()->mutable_segments()) {
    segment.clear_planner_state();
  }
  if (Running(entry)) {
    for (const auto& [values, segment] : entry.segments) {
      assigned += static_cast<uint32_t>(segment.input.adapters.size());
    }
  }
  out.mutable_status()->set_assigned_adapters(assigned);
  out.mutable_status()->set_valid_windows(entry.valid_windows);
  return out;
}

void ExperimentController::RecordTuningEvent(const std::string& name, v1::EventType type,
                                             std::string reason, std::string message,
                                             absl::Time now) {
  v1::Event event;
  event.set_type(type);
  event.set_reason(std::move(reason));
  event.set_message(std::move(message));
  event.mutable_involved_object()->set_kind("HoldTuning");
  event.mutable_involved_object()->set_name(name);
  deps_.events->Record(std::move(event), now);
}

}  // namespace rxfleet::server
