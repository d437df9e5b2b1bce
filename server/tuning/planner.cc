// The hold tuning planner (see planner.h for the method and its sources).

#include "server/tuning/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/chips/family.h"
#include "common/chips/rx_agg.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "server/experiments/assignment.h"
#include "server/experiments/guardrails.h"
#include "server/tuning/planner_internal.h"

namespace rxfleet::tuning {
namespace {

using experiments::Window;
using internal::ApplyGuardrails;
using internal::Challenger;
using internal::CheckInput;
using internal::FindChallenger;
using internal::Grace;
using internal::Halve;
using internal::Infos;
using internal::KeepIncumbent;
using internal::PairedEvidence;
using internal::PeriodIndex;
using internal::PeriodStart;
using internal::RunsAt;
using internal::Slot;
using internal::StartRecheck;
using internal::StartRound;
using internal::Transition;

absl::StatusOr<SegmentState> UpdateExploring(const HoldTuning& t, SegmentState s,
                                             const SegmentInput& input,
                                             std::span<const Window> windows, absl::Time now) {
  if (absl::Status st = ApplyGuardrails(t, s, windows, now); !st.ok()) return st;
  const Round& r = s.rounds.back();
  const CandidateState* survivor =
      r.confirmation ? FindChallenger(s, r.challengers_us[0]) : nullptr;
  if (r.confirmation && survivor != nullptr && survivor->status == CandidateStatus::kActive) {
    const ChallengerInfo info{survivor->hold_us, "active", ""};
    absl::StatusOr<Evidence> ev =
        PairedEvidence(t, s, {&info, 1}, r.first_period, r.end_period, windows, now);
    if (!ev.ok()) return ev.status();
    const CandidateEvidence& c = ev->candidates.front();
    absl::StatusOr<Evidence> table = absl::UnknownError("not computed");
    bool guardrails_known = false;
    if (c.conclusive && c.always_valid_relative &&
        ClearsMinEffect(t.objective.direction, c.always_valid_relative->ci, t.min_effect)) {
      // Every guardrail must have been evaluated on enough of the winner's windows (its own
      // minimums may exceed the comparison's).
      table = PairedEvidence(t, s, Infos(s), 0, r.end_period, windows, now);
      if (!table.ok()) return table.status();
      guardrails_known = true;
      for (const CandidateEvidence& row : table->candidates) {
        if (row.hold_us != survivor->hold_us) continue;
        for (const GuardrailStatus& g : row.guardrails) {
          if (g.check.state != experiments::GuardrailState::kHolds) guardrails_known = false;
        }
      }
    }
    if (guardrails_known) {
      FindChallenger(s, survivor->hold_us)->status = CandidateStatus::kProposed;
      FindChallenger(s, survivor->hold_us)->changed = now;
      for (CandidateEvidence& row : table->candidates) {
        if (row.hold_us == survivor->hold_us) {
          row.status = CandidateStatusName(CandidateStatus::kProposed);
        }
      }
      Proposal p{s.segment, survivor->hold_us, s.incumbent_hold_us,
                 now,       *std::move(table), *std::move(ev)};
      const experiments::Interval ci = c.always_valid_relative->ci;
      Transition(s, Phase::kProposed, kReasonChallengerWon,
                 absl::StrFormat("%s beats %s: always-valid 95 %% interval of the relative "
                                 "difference [%+.2f %%, %+.2f %%] clears minEffect %.2f %%",
                                 common::FormatHoldUs(p.hold_us),
                                 common::FormatHoldUs(p.incumbent_hold_us), ci.low * 100,
                                 ci.high * 100, t.min_effect * 100),
                 now);
      s.proposal = std::move(p);
      return s;
    }
  }
  const bool all_out =
      std::none_of(s.challengers.begin(), s.challengers.end(),
                   [](const CandidateState& c) { return c.status == CandidateStatus::kActive; });
  if (all_out) {
    if (absl::Status st = KeepIncumbent(t, s, "every challenger was eliminated", windows, now);
        !st.ok()) {
      return st;
    }
    return s;
  }
  if (now < PeriodStart(t, s, r.end_period) + Grace(t)) return s;
  if (r.confirmation) {
    if (absl::Status st = KeepIncumbent(
            t, s,
            absl::StrCat("the budget is spent: ", common::FormatHoldUs(r.challengers_us[0]),
                         " did not beat the incumbent by minEffect ", t.min_effect * 100, " %"),
            windows, now);
        !st.ok()) {
      return st;
    }
    return s;
  }
  if (absl::Status st = Halve(t, s, windows, now); !st.ok()) return st;
  uint32_t first = std::max(s.rounds.back().end_period, PeriodIndex(t, s, now) + 1);
  first += first % 2;
  if (absl::Status st = StartRound(t, s, input, first, windows, now); !st.ok()) return st;
  return s;
}

absl::StatusOr<SegmentState> UpdateRechecking(const HoldTuning& t, SegmentState s,
                                              const SegmentInput& input,
                                              std::span<const Window> windows, absl::Time now) {
  if (absl::Status st = ApplyGuardrails(t, s, windows, now); !st.ok()) return st;
  const Round& r = s.rounds.back();
  CandidateState& previous = s.challengers.front();
  if (previous.status == CandidateStatus::kActive) {
    const ChallengerInfo info{previous.hold_us, "active", ""};
    absl::StatusOr<Evidence> ev = PairedEvidence(t, s, {&info, 1}, 0, r.end_period, windows, now);
    if (!ev.ok()) return ev.status();
    const CandidateEvidence& c = ev->candidates.front();
    if (c.conclusive && c.always_valid_relative &&
        ClearsMinEffect(t.objective.direction, c.always_valid_relative->ci, t.min_effect)) {
      SegmentState next;
      next.segment = s.segment;
      next.incumbent_hold_us = s.incumbent_hold_us;
      next.exploration = s.exploration + 1;
      next.epoch_start = now;
      next.budget_windows = t.budget.max_windows;
      for (uint32_t hold : t.candidates_us) {
        if (hold != next.incumbent_hold_us) next.challengers.push_back(Challenger(hold));
      }
      Transition(next, Phase::kExploring, kReasonReversalDetected,
                 absl::StrFormat("%s is credibly better than the adopted %s again (always-valid "
                                 "95 %% interval [%+.2f %%, %+.2f %%]); exploring anew",
                                 common::FormatHoldUs(previous.hold_us),
                                 common::FormatHoldUs(s.incumbent_hold_us),
                                 c.always_valid_relative->ci.low * 100,
                                 c.always_valid_relative->ci.high * 100),
                 now);
      if (absl::Status st = StartRound(t, next, input, 0, {}, now); !st.ok()) return st;
      return next;
    }
  }
  if (now >= PeriodStart(t, s, r.end_period)) StartRecheck(t, s, input, now);
  return s;
}

}  // namespace

std::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kExploring:
      return "exploring";
    case Phase::kProposed:
      return "proposed";
    case Phase::kRechecking:
      return "rechecking";
    case Phase::kStopped:
      break;
  }
  return "stopped";
}

std::string_view CandidateStatusName(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kActive:
      return "active";
    case CandidateStatus::kHalved:
      return "halved";
    case CandidateStatus::kGuardrail:
      return "guardrail";
    case CandidateStatus::kProposed:
      return "proposed";
    case CandidateStatus::kEnded:
      break;
  }
  return "ended";
}

absl::StatusOr<SegmentState> StartSegment(const HoldTuning& t, const SegmentInput& input,
                                          absl::Time now) {
  if (absl::Status s = ValidateHoldTuning(t); !s.ok()) return s;
  if (absl::Status s = CheckInput(t, input); !s.ok()) return s;
  SegmentState s;
  s.segment = input.segment;
  s.incumbent_hold_us = input.incumbent_hold_us;
  s.epoch_start = now;
  s.last_transition = now;
  s.budget_windows = t.budget.max_windows;
  for (uint32_t hold : t.candidates_us) {
    if (hold != input.incumbent_hold_us) s.challengers.push_back(Challenger(hold));
  }
  if (absl::Status st = StartRound(t, s, input, 0, {}, now); !st.ok()) return st;
  return s;
}

absl::StatusOr<HoldAssignment> AssignmentFor(const HoldTuning& t, const SegmentState& s,
                                             std::string_view adapter_key, absl::Time time) {
  if (time < s.epoch_start) {
    return absl::InvalidArgumentError(absl::StrCat("time ", absl::FormatTime(time),
                                                   " is before the epoch start ",
                                                   absl::FormatTime(s.epoch_start)));
  }
  HoldAssignment a;
  a.adapter = std::string(adapter_key);
  a.period_index = PeriodIndex(t, s, time);
  a.period_start = PeriodStart(t, s, a.period_index);
  a.period_end = a.period_start + t.period_length;
  a.in_burn_in = time < a.period_start + t.burn_in;
  a.hold_us = s.incumbent_hold_us;
  a.arm = HoldArmName(a.hold_us);
  if (s.phase != Phase::kExploring && s.phase != Phase::kRechecking) return a;
  for (const Round& r : s.rounds) {
    if (a.period_index < r.first_period || a.period_index >= r.end_period) continue;
    const auto self = std::find(r.adapter_order.begin(), r.adapter_order.end(), adapter_key);
    if (self == r.adapter_order.end() || r.explorers == 0) return a;
    const uint64_t block = (a.period_index - r.first_period) / 2;
    for (uint64_t sl = block * r.explorers; sl < (block + 1) * r.explorers && sl < r.slots; ++sl) {
      const auto [adapter, challenger] = Slot(r, sl);
      if (adapter != static_cast<size_t>(self - r.adapter_order.begin())) continue;
      const uint32_t hold = r.challengers_us[challenger];
      if (!RunsAt(FindChallenger(s, hold), time)) return a;
      // The two periods of the block in the random balanced order of a two-arm switchback.
      absl::StatusOr<experiments::Experiment> pair =
          ComparisonExperiment(t, s.segment, s.incumbent_hold_us, {&hold, 1}, t.period_length * 2);
      if (!pair.ok()) return pair.status();
      absl::StatusOr<experiments::Assigner> assigner =
          experiments::Assigner::Create(*std::move(pair), s.epoch_start);
      if (!assigner.ok()) return assigner.status();
      if (assigner->ScheduledArm(adapter_key, a.period_index) == 1) {
        a.hold_us = hold;
        a.arm = HoldArmName(hold);
        a.role = Role::kChallenger;
      }
      return a;
    }
    return a;
  }
  return a;
}

absl::StatusOr<std::vector<HoldAssignment>> PlanAt(const HoldTuning& t, const SegmentState& s,
                                                   absl::Time time) {
  std::vector<HoldAssignment> out;
  if (s.rounds.empty()) return out;
  for (const std::string& key : s.rounds.back().adapter_order) {
    absl::StatusOr<HoldAssignment> a = AssignmentFor(t, s, key, time);
    if (!a.ok()) return a.status();
    out.push_back(*std::move(a));
  }
  return out;
}

std::vector<std::string> SlotAdaptersAt(const HoldTuning& t, const SegmentState& s,
                                        absl::Time time) {
  std::vector<std::string> out;
  if (time < s.epoch_start || (s.phase != Phase::kExploring && s.phase != Phase::kRechecking)) {
    return out;
  }
  const uint32_t period = PeriodIndex(t, s, time);
  for (const Round& r : s.rounds) {
    if (period < r.first_period || period >= r.end_period || r.explorers == 0) continue;
    const uint64_t block = (period - r.first_period) / 2;
    for (uint64_t sl = block * r.explorers; sl < (block + 1) * r.explorers && sl < r.slots; ++sl) {
      const auto [adapter, challenger] = Slot(r, sl);
      if (!RunsAt(FindChallenger(s, r.challengers_us[challenger]), time)) continue;
      const std::string& key = r.adapter_order[adapter];
      if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
    }
  }
  return out;
}

std::optional<absl::Time> ExplorationEndsBy(const HoldTuning& t, const SegmentState& s) {
  if (s.phase != Phase::kExploring || s.rounds.empty()) return std::nullopt;
  const Round& r = s.rounds.back();
  uint64_t end_period = r.end_period;
  uint64_t rounds_after = 0;
  if (!r.confirmation && r.explorers > 0) {
    const uint64_t committed = CommittedWindows(t, s);
    const uint64_t remaining = s.budget_windows > committed ? s.budget_windows - committed : 0;
    rounds_after = ExplorationRounds(r.challengers_us.size()) - 1;
    // Each later round: a gap of 2 periods, then 2 periods per block of `explorers` slots
    // (one more block for the rounding up); all of them together spend at most `remaining`.
    const uint64_t windows_per_block = uint64_t{r.explorers} * t.WindowsPerPeriod();
    end_period += 2 * (remaining / windows_per_block) + 4 * rounds_after;
  }
  const uint32_t last = static_cast<uint32_t>(std::min<uint64_t>(end_period, UINT32_MAX));
  return PeriodStart(t, s, last) + Grace(t);
}

uint64_t CommittedWindows(const HoldTuning& t, const SegmentState& s) {
  uint64_t slots = 0;
  for (const Round& r : s.rounds) {
    if (r.recheck || r.explorers == 0) continue;
    for (uint64_t sl = 0; sl < r.slots; ++sl) {
      const uint64_t block = sl / r.explorers;
      const absl::Time block_start =
          PeriodStart(t, s, r.first_period + static_cast<uint32_t>(2 * block));
      if (RunsAt(FindChallenger(s, r.challengers_us[Slot(r, sl).second]), block_start)) ++slots;
    }
  }
  return slots * t.WindowsPerPeriod();
}

absl::StatusOr<SegmentState> Update(const HoldTuning& t, const SegmentState& state,
                                    const SegmentInput& input, std::span<const Window> windows,
                                    absl::Time now) {
  if (absl::Status s = CheckInput(t, input); !s.ok()) return s;
  if (state.rounds.empty()) return state;
  if (state.phase == Phase::kExploring) return UpdateExploring(t, state, input, windows, now);
  if (state.phase == Phase::kRechecking) return UpdateRechecking(t, state, input, windows, now);
  return state;
}

bool ShouldAutoApply(const HoldTuning& t, const SegmentState& s) {
  return t.auto_apply && s.phase == Phase::kProposed && s.proposal.has_value();
}

absl::StatusOr<SegmentState> Adopt(const HoldTuning& t, const SegmentState& state,
                                   const SegmentInput& input, absl::Time now) {
  if (absl::Status s = CheckInput(t, input); !s.ok()) return s;
  if (state.phase != Phase::kProposed || !state.proposal) {
    return absl::FailedPreconditionError(absl::StrCat("segment is ",
                                                      common::ToAbslView(PhaseName(state.phase)),
                                                      ", not proposed: nothing to adopt"));
  }
  SegmentState s = state;
  s.previous_hold_us = state.proposal->incumbent_hold_us;
  s.incumbent_hold_us = state.proposal->hold_us;
  StartRecheck(t, s, input, now);
  Transition(s, Phase::kRechecking, kReasonAdopted,
             s.rounds.back().explorers == 0
                 ? absl::StrCat("adopted ", common::FormatHoldUs(s.incumbent_hold_us),
                                "; recheckShare ", t.recheck_share, " of ", input.adapters.size(),
                                " adapters leaves none to recheck")
                 : absl::StrCat("adopted ", common::FormatHoldUs(s.incumbent_hold_us), "; ",
                                s.rounds.back().explorers, " adapters recheck ",
                                common::FormatHoldUs(*s.previous_hold_us)),
             now);
  return s;
}

SegmentState Stop(const SegmentState& state, absl::Time now, std::string_view message) {
  SegmentState s = state;
  internal::EndActiveChallengers(s, message, now);
  Transition(s, Phase::kStopped, kReasonStoppedByUser, std::string(message), now);
  return s;
}

}  // namespace rxfleet::tuning
