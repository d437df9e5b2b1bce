// ExperimentController's scheduler step of one hold tuning: find the segments and their
// adapters, start new segments, run the planner on the segment's windows (at most once per
// window length, and at every period boundary), record what changed as events, save the status
// and say when to run again.

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/units.h"
#include "server/experiments/controller.h"
#include "server/log.h"
#include "server/tuning/evidence.h"
#include "server/tuning/state_proto.h"

namespace rxfleet::server {
namespace {

std::string Challengers(const tuning::SegmentState& s) {
  std::vector<std::string> out;
  for (const tuning::CandidateState& c : s.challengers) {
    out.push_back(common::FormatHoldUs(c.hold_us));
  }
  return absl::StrJoin(out, ", ");
}

/// The explorers' assignments of a segment, to tell whether bundles must change.
std::string Signature(const auto& segment) {
  std::string out = absl::StrCat(segment.assigned_period, ";");
  for (const auto& [key, a] : segment.assigned) absl::StrAppend(&out, key, "=", a.hold_us, ";");
  return out;
}

/// The planner state serialised, to tell whether a step changed it.
std::string StateBytes(const tuning::SegmentState& state) {
  return tuning::StateToProto(state).SerializeAsString();
}

/// Adapters a segment needs before it starts: one explorer per block, and the comparison's
/// minimum of paired adapters.
size_t AdaptersNeeded(const tuning::HoldTuning& t) {
  const auto for_share = static_cast<size_t>(std::ceil(1.0 / t.budget.adapter_share - 1e-9));
  return std::max<size_t>(for_share, t.min_adapters_per_arm);
}

/// The start of the period after the one holding `now` in the segment's epoch.
absl::Time NextBoundary(const tuning::HoldTuning& t, const tuning::SegmentState& s,
                        absl::Time now) {
  if (now < s.epoch_start) return s.epoch_start;
  const int64_t period = tuning::WholePeriods(now - s.epoch_start, t.period_length);
  return s.epoch_start + t.period_length * (period + 1);
}

}  // namespace

ExperimentController::StepResult ExperimentController::TuningStep(
    TuningEntry& entry, absl::Time now, std::vector<std::string>& auto_apply) {
  StepResult result;
  if (!Running(entry)) return result;
  const tuning::HoldTuning& t = entry.tuning;
  const std::string& name = t.name;
  const absl::Duration update_every = std::min(t.window_length, options_.max_guardrail_interval);
  bool due = entry.segments.empty();
  for (const auto& [values, segment] : entry.segments) due = due || now >= segment.next_update;
  bool changed = false;
  if (due) {
    std::vector<std::string> waiting;
    std::map<std::vector<std::string>, tuning::SegmentInput> inputs =
        TuningInputsLocked(entry, now, &waiting);
    absl::StatusOr<const std::vector<experiments::Window>*> windows = TuningWindows(entry);
    for (auto& [values, input] : inputs) {
      const std::string where = TuningSegmentText(t.segment_keys, values);
      auto it = entry.segments.find(values);
      // The policies set another hold than the one the segment compares with (an operator
      // changed them, or another approval did): what was learnt no longer applies.
      const bool restart = it != entry.segments.end() &&
                           it->second.state.incumbent_hold_us != input.incumbent_hold_us;
      if (it == entry.segments.end() || restart) {
        if (!restart && entry.segments.size() >= options_.max_tuning_segments) {
          waiting.push_back(absl::StrCat(where, ": the tuning already has ",
                                         options_.max_tuning_segments,
                                         " segments, the most one tuning runs"));
          continue;
        }
        if (input.adapters.size() < AdaptersNeeded(t)) {
          waiting.push_back(absl::StrCat(where, ": ", input.adapters.size(), " adapters (",
                                         AdaptersNeeded(t), " needed)"));
          continue;
        }
        absl::StatusOr<tuning::SegmentState> started = tuning::StartSegment(t, input, now);
        if (!started.ok()) {
          waiting.push_back(absl::StrCat(where, ": ", started.status().message()));
          continue;
        }
        TuningSegment segment;
        segment.state = *std::move(started);
        segment.input = input;
        segment.next_update = now + update_every;
        RecordTuningEvent(
            name, v1::EVENT_TYPE_NORMAL, restart ? "IncumbentChanged" : "SegmentStarted",
            absl::StrCat(where, ": ",
                         restart ? absl::StrCat("the policies now set ",
                                                common::FormatHoldUs(input.incumbent_hold_us),
                                                "; exploring anew: ")
                                 : "",
                         input.adapters.size(), " adapters, incumbent ",
                         common::FormatHoldUs(input.incumbent_hold_us), ", challengers ",
                         Challengers(segment.state)),
            now);
        if (restart) {
          it->second = std::move(segment);
        } else {
          it = entry.segments.emplace(values, std::move(segment)).first;
        }
        changed = true;
        continue;
      }
      TuningSegment& segment = it->second;
      segment.input = input;
      if (input.adapters.size() < AdaptersNeeded(t) &&
          segment.state.phase != tuning::Phase::kStopped) {
        waiting.push_back(absl::StrCat(where, ": ", input.adapters.size(), " adapters (",
                                       AdaptersNeeded(t),
                                       " needed): no comparison can conclude until more are "
                                       "back"));
      }
      if (now < segment.next_update) continue;
      segment.next_update = now + update_every;
      if (!windows.ok()) continue;  // the store is away: decide later, on complete data
      std::vector<experiments::Window> mine;
      for (const experiments::Window& w : **windows) {
        if (w.segment == values && w.start >= segment.state.epoch_start) mine.push_back(w);
      }
      const tuning::SegmentState before = segment.state;
      absl::StatusOr<tuning::SegmentState> next =
          tuning::Update(t, segment.state, input, mine, now);
      if (!next.ok()) {
        Log(LogLevel::kWarning, absl::StrCat("hold tuning ", name, " segment ", where,
                                             ": cannot update: ", next.status().message()));
        continue;
      }
      if (StateBytes(before) == StateBytes(*next)) continue;
      segment.state = *std::move(next);
      changed = true;
      const tuning::SegmentState& s = segment.state;
      for (const tuning::CandidateState& c : s.challengers) {
        const tuning::CandidateState* old = nullptr;
        for (const tuning::CandidateState& b : before.challengers) {
          if (b.hold_us == c.hold_us) old = &b;
        }
        if (c.status == tuning::CandidateStatus::kGuardrail &&
            (old == nullptr || old->status != c.status)) {
          RecordTuningEvent(
              name, v1::EVENT_TYPE_WARNING, "GuardrailBroken",
              absl::StrCat(where, ": ", common::FormatHoldUs(c.hold_us), " dropped: ", c.message),
              now);
        }
      }
      if (s.phase != before.phase || s.reason != before.reason ||
          s.exploration != before.exploration) {
        const tuning::Evidence* evidence = nullptr;
        if (s.phase == tuning::Phase::kProposed && s.proposal) {
          evidence = &s.proposal->evidence;
        } else if (s.final_evidence) {
          evidence = &*s.final_evidence;
        }
        UpdateSegmentView(entry, segment, evidence);
        RecordTuningEvent(name,
                          s.reason == tuning::kReasonReversalDetected ? v1::EVENT_TYPE_WARNING
                                                                      : v1::EVENT_TYPE_NORMAL,
                          s.reason, absl::StrCat(where, ": ", s.message), now);
      }
    }
    // Segments none of whose adapters the tuning takes now (unplugged, taken by an experiment,
    // kept by a policy): nothing to run or learn there until they come back.
    for (auto& [values, segment] : entry.segments) {
      if (inputs.contains(values)) continue;
      if (segment.state.phase != tuning::Phase::kStopped) {
        waiting.push_back(absl::StrCat(TuningSegmentText(t.segment_keys, values),
                                       ": none of its adapters is free now (an experiment or "
                                       "an older tuning takes them, a policy at priority 1000 "
                                       "keeps them, or they are gone)"));
      }
      if (!segment.input.adapters.empty()) {
        segment.input.adapters.clear();
        changed = true;
      }
    }
    if (waiting != entry.waiting) changed = true;  // the SegmentsWaiting condition
    entry.waiting = std::move(waiting);
    if (windows.ok()) PruneTuningWindows(entry, now);
  }
  for (auto& [values, segment] : entry.segments) {
    RefreshAssigned(entry, segment, now, /*force=*/changed);
    std::string signature = Signature(segment);
    if (signature != segment.published) {
      segment.published = std::move(signature);
      result.publish = true;
    }
    if (tuning::ShouldAutoApply(t, segment.state) &&
        std::find(auto_apply.begin(), auto_apply.end(), name) == auto_apply.end()) {
      auto_apply.push_back(name);
    }
  }
  if (changed || entry.status_dirty) {
    if (absl::Status s = SaveTuningStatus(entry, TuningStatusLocked(entry), now); !s.ok()) {
      Log(LogLevel::kWarning,
          absl::StrCat("cannot save hold tuning ", name, " (will retry): ", s.message()));
      entry.status_dirty = true;
    } else {
      entry.status_dirty = false;
    }
  }
  absl::Time next = now + update_every;
  for (const auto& [values, segment] : entry.segments) {
    next = std::min(next, std::max(segment.next_update, now));
    if (segment.state.phase == tuning::Phase::kExploring ||
        segment.state.phase == tuning::Phase::kRechecking) {
      next = std::min(next, NextBoundary(t, segment.state, now));
    }
  }
  result.requeue_after = std::max(next - now, absl::ZeroDuration());
  return result;
}

}  // namespace rxfleet::server
