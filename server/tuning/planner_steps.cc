// The steps of the hold tuning planner: rounds, rechecks, guardrail eliminations and halving
// (see planner.h for the method and its sources).

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
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

namespace rxfleet::tuning::internal {

using experiments::Window;

absl::Duration Grace(const HoldTuning& t) { return t.window_length + experiments::kEdgeTolerance; }

absl::Time PeriodStart(const HoldTuning& t, const SegmentState& s, uint32_t period) {
  return s.epoch_start + t.period_length * static_cast<int64_t>(period);
}

uint32_t PeriodIndex(const HoldTuning& t, const SegmentState& s, absl::Time time) {
  return static_cast<uint32_t>(WholePeriods(time - s.epoch_start, t.period_length));
}

// The most periods an epoch may span: the comparison experiment's 90-day limit.
uint32_t MaxEpochPeriods(const HoldTuning& t) {
  return static_cast<uint32_t>(WholePeriods(experiments::kMaxExperimentDuration, t.period_length));
}

std::vector<std::string> AdapterOrder(const HoldTuning& t, const SegmentInput& input) {
  std::vector<std::pair<uint64_t, std::string>> keyed;
  const std::string prefix = absl::StrCat(
      t.name, std::string(1, '\0'), absl::StrJoin(input.segment, "\x1f"), std::string(1, '\0'));
  for (const common::AdapterAttributes& a : input.adapters) {
    std::string key = experiments::AdapterKey(a.host, a.adapter_id);
    keyed.emplace_back(experiments::StableHash64(prefix + key), std::move(key));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> order;
  order.reserve(keyed.size());
  for (auto& [hash, key] : keyed) order.push_back(std::move(key));
  return order;
}

// The slot s of a round -> (adapter index into adapter_order, challenger index).
std::pair<size_t, size_t> Slot(const Round& r, uint64_t s) {
  const uint64_t n = r.adapter_order.size();
  const uint64_t k = r.challengers_us.size();
  const uint64_t cycle = std::lcm(n, k);
  return {static_cast<size_t>((s + s / cycle) % n), static_cast<size_t>(s % k)};
}

CandidateState Challenger(uint32_t hold) {
  CandidateState c;
  c.hold_us = hold;
  return c;
}

CandidateState* FindChallenger(SegmentState& s, uint32_t hold) {
  for (CandidateState& c : s.challengers) {
    if (c.hold_us == hold) return &c;
  }
  return nullptr;
}

const CandidateState* FindChallenger(const SegmentState& s, uint32_t hold) {
  return FindChallenger(const_cast<SegmentState&>(s), hold);
}

// A slot's challenger no longer runs from its guardrail elimination on.
bool RunsAt(const CandidateState* c, absl::Time time) {
  return c != nullptr && !(c->status == CandidateStatus::kGuardrail && c->changed <= time);
}

std::vector<uint32_t> AllHolds(const SegmentState& s) {
  std::vector<uint32_t> holds;
  for (const CandidateState& c : s.challengers) holds.push_back(c.hold_us);
  return holds;
}

std::vector<ChallengerInfo> Infos(const SegmentState& s) {
  std::vector<ChallengerInfo> out;
  for (const CandidateState& c : s.challengers) {
    out.push_back({c.hold_us, std::string(CandidateStatusName(c.status)), c.message});
  }
  return out;
}

uint32_t EndPeriod(const SegmentState& s) {
  return s.rounds.empty() ? 0 : s.rounds.back().end_period;
}

std::vector<Window> PairedWindows(const SegmentState& s, uint32_t hold, uint32_t first_period,
                                  uint32_t end_period, std::span<const Window> windows) {
  std::set<std::pair<std::string, uint32_t>> blocks;  // (adapter, block) with a slot on hold
  for (const Round& r : s.rounds) {
    if (r.explorers == 0) continue;
    for (uint64_t sl = 0; sl < r.slots; ++sl) {
      const auto [adapter, challenger] = Slot(r, sl);
      if (r.challengers_us[challenger] != hold) continue;
      blocks.emplace(r.adapter_order[adapter],
                     r.first_period / 2 + static_cast<uint32_t>(sl / r.explorers));
    }
  }
  const std::string challenger_arm = HoldArmName(hold);
  const std::string incumbent_arm = HoldArmName(s.incumbent_hold_us);
  std::vector<Window> out;
  for (const Window& w : windows) {
    if (w.segment != s.segment || w.period_index < first_period || w.period_index >= end_period) {
      continue;
    }
    if (w.arm == challenger_arm ||
        (w.arm == incumbent_arm && blocks.contains({w.adapter, w.period_index / 2}))) {
      out.push_back(w);
    }
  }
  return out;
}

absl::StatusOr<Evidence> PairedEvidence(const HoldTuning& t, const SegmentState& s,
                                        std::span<const ChallengerInfo> infos,
                                        uint32_t first_period, uint32_t end_period,
                                        std::span<const Window> windows, absl::Time now) {
  absl::StatusOr<Evidence> all =
      ComputeEvidence(t, s.segment, s.incumbent_hold_us, infos, s.epoch_start, first_period,
                      end_period, windows, now);
  if (!all.ok()) return all.status();
  for (size_t i = 0; i < infos.size(); ++i) {
    const std::vector<Window> paired =
        PairedWindows(s, infos[i].hold_us, first_period, end_period, windows);
    absl::StatusOr<Evidence> one =
        ComputeEvidence(t, s.segment, s.incumbent_hold_us, infos.subspan(i, 1), s.epoch_start,
                        first_period, end_period, paired, now);
    if (!one.ok()) return one.status();
    all->candidates[i] = one->candidates.front();
  }
  return all;
}

void Transition(SegmentState& s, Phase phase, std::string_view reason, std::string message,
                absl::Time now) {
  s.phase = phase;
  s.reason = std::string(reason);
  s.message = std::move(message);
  s.last_transition = now;
}

// Ends the exploration with the incumbent kept, with the evidence of the whole epoch.
void EndActiveChallengers(SegmentState& s, std::string_view why, absl::Time now) {
  for (CandidateState& c : s.challengers) {
    if (c.status != CandidateStatus::kActive) continue;
    c.status = CandidateStatus::kEnded;
    c.changed = now;
    c.message = std::string(why);
  }
}

absl::Status KeepIncumbent(const HoldTuning& t, SegmentState& s, std::string message,
                           std::span<const Window> windows, absl::Time now) {
  EndActiveChallengers(s, message, now);
  if (!s.challengers.empty() && EndPeriod(s) > 0) {
    std::vector<ChallengerInfo> infos = Infos(s);
    absl::StatusOr<Evidence> ev = PairedEvidence(t, s, infos, 0, EndPeriod(s), windows, now);
    if (!ev.ok()) return ev.status();
    s.final_evidence = *std::move(ev);
  }
  Transition(s, Phase::kStopped, kReasonIncumbentKept, std::move(message), now);
  return absl::OkStatus();
}

// Starts the next exploration round at `first_period` (even), or ends the exploration.
absl::Status StartRound(const HoldTuning& t, SegmentState& s, const SegmentInput& input,
                        uint32_t first_period, std::span<const Window> windows, absl::Time now) {
  std::vector<uint32_t> survivors;
  for (const CandidateState& c : s.challengers) {
    if (c.status == CandidateStatus::kActive) survivors.push_back(c.hold_us);
  }
  if (survivors.empty()) {
    return KeepIncumbent(t, s, "every challenger was eliminated by a guardrail", windows, now);
  }
  const size_t n = input.adapters.size();
  const uint32_t m = static_cast<uint32_t>(t.budget.adapter_share * static_cast<double>(n));
  if (m == 0) {
    return KeepIncumbent(t, s,
                         absl::StrCat("the segment has ", n, " adapters; adapterShare ",
                                      t.budget.adapter_share, " lets none run a challenger"),
                         windows, now);
  }
  const uint64_t committed = CommittedWindows(t, s);
  const uint64_t remaining = s.budget_windows > committed ? s.budget_windows - committed : 0;
  const uint32_t rounds_left = ExplorationRounds(survivors.size());
  const uint64_t per_challenger = remaining / (uint64_t{rounds_left} * survivors.size());
  const uint64_t periods_each = per_challenger / t.WindowsPerPeriod();
  if (periods_each == 0) {
    return KeepIncumbent(t, s,
                         absl::StrCat("the exploration budget is spent (", committed, " of ",
                                      s.budget_windows, " windows)"),
                         windows, now);
  }
  Round r;
  r.number = s.rounds.empty() ? 1 : s.rounds.back().number + 1;
  r.confirmation = survivors.size() == 1;
  r.first_period = first_period;
  r.challengers_us = survivors;
  r.windows_per_challenger = per_challenger;
  r.slots = periods_each * survivors.size();
  r.explorers = m;
  r.adapter_order = AdapterOrder(t, input);
  const uint64_t blocks = (r.slots + m - 1) / m;
  if (first_period + 2 * blocks > MaxEpochPeriods(t)) {
    return KeepIncumbent(t, s,
                         absl::StrCat("round ", r.number,
                                      " would end after the 90-day limit of "
                                      "an exploration; raise adapterShare or lower maxWindows"),
                         windows, now);
  }
  r.end_period = first_period + static_cast<uint32_t>(2 * blocks);
  for (uint32_t hold : survivors) FindChallenger(s, hold)->last_round = r.number;
  if (s.reason == kReasonExploring) {  // a reversal's message stays until the next decision
    s.message = r.confirmation
                    ? absl::StrCat("round ", r.number,
                                   " (confirmation): ", common::FormatHoldUs(survivors.front()),
                                   " against ", common::FormatHoldUs(s.incumbent_hold_us))
                    : absl::StrCat("round ", r.number, " of ", r.number - 1 + rounds_left, ": ",
                                   survivors.size(), " challengers against ",
                                   common::FormatHoldUs(s.incumbent_hold_us));
  }
  s.rounds.push_back(std::move(r));
  return absl::OkStatus();
}

// The recheck epoch of an adopted hold, starting at `now`.
void StartRecheck(const HoldTuning& t, SegmentState& s, const SegmentInput& input, absl::Time now) {
  s.epoch_start = now;
  s.rounds.clear();
  // A previous hold that broke a guardrail while rechecking stays out in later epochs.
  const bool broke_guardrail = s.challengers.size() == 1 &&
                               s.challengers.front().hold_us == *s.previous_hold_us &&
                               s.challengers.front().status == CandidateStatus::kGuardrail;
  if (!broke_guardrail) {
    s.challengers = {CandidateState{*s.previous_hold_us, CandidateStatus::kActive, 1, now, ""}};
  }
  Round r;
  r.recheck = true;
  r.challengers_us = {*s.previous_hold_us};
  r.explorers = static_cast<uint32_t>(t.recheck_share * static_cast<double>(input.adapters.size()));
  r.adapter_order = AdapterOrder(t, input);
  const uint32_t blocks = std::min(kRecheckEpochBlocks, MaxEpochPeriods(t) / 2);
  r.end_period = 2 * blocks;
  r.slots = uint64_t{r.explorers} * blocks;
  s.rounds.push_back(std::move(r));
  s.budget_windows = 0;
}

// Eliminates challengers whose guardrails are credibly broken in the epoch's windows.
absl::Status ApplyGuardrails(const HoldTuning& t, SegmentState& s, std::span<const Window> windows,
                             absl::Time now) {
  if (t.guardrails.empty() || s.challengers.empty()) return absl::OkStatus();
  const std::vector<uint32_t> holds = AllHolds(s);
  absl::StatusOr<experiments::Experiment> e = ComparisonExperiment(
      t, s.segment, s.incumbent_hold_us, holds, t.period_length * EndPeriod(s));
  if (!e.ok()) return e.status();
  std::vector<Window> used;
  for (const Window& w : windows) {
    if (w.segment == s.segment && w.period_index < EndPeriod(s)) used.push_back(w);
  }
  std::vector<experiments::StoppedArm> stopped;
  for (const CandidateState& c : s.challengers) {
    if (c.status != CandidateStatus::kActive) {
      stopped.push_back({HoldArmName(c.hold_us), s.segment, "Eliminated", c.message, c.changed});
    }
  }
  absl::StatusOr<std::vector<experiments::GuardrailDecision>> decisions =
      experiments::EvaluateGuardrails(*e, s.epoch_start, used, stopped);
  if (!decisions.ok()) return decisions.status();
  for (const experiments::GuardrailDecision& d : *decisions) {
    for (CandidateState& c : s.challengers) {
      if (HoldArmName(c.hold_us) != d.arm) continue;
      c.status = CandidateStatus::kGuardrail;
      c.changed = now;
      c.message = d.message;
    }
  }
  return absl::OkStatus();
}

// Ranks the round's active challengers by the round's paired relative difference and keeps
// the better ceil(n / 2) (Karnin et al. 2013, Algorithm 1).
absl::Status Halve(const HoldTuning& t, SegmentState& s, std::span<const Window> windows,
                   absl::Time now) {
  const Round& r = s.rounds.back();
  absl::StatusOr<experiments::Experiment> e = ComparisonExperiment(
      t, s.segment, s.incumbent_hold_us, AllHolds(s), t.period_length * r.end_period);
  if (!e.ok()) return e.status();
  struct Scored {
    double score;
    size_t order;
    uint32_t hold;
  };
  std::vector<Scored> scored;
  for (size_t i = 0; i < s.challengers.size(); ++i) {
    const CandidateState& c = s.challengers[i];
    if (c.status != CandidateStatus::kActive) continue;
    double score = -std::numeric_limits<double>::infinity();
    // Only this round's windows, and the incumbent's only in the blocks paired with c.
    const std::vector<Window> paired =
        PairedWindows(s, c.hold_us, r.first_period, r.end_period, windows);
    absl::StatusOr<experiments::Aggregate> aggregate =
        experiments::AggregateWindows(*e, s.epoch_start, paired);
    if (!aggregate.ok()) return aggregate.status();
    std::vector<double> treatment, control;
    for (const experiments::SegmentData& d : aggregate->segments) {
      if (d.values == s.segment) d.Pairs(i + 1, 0, t.objective.metric, &treatment, &control);
    }
    if (!treatment.empty()) {
      // Same number of pairs on both sides: the ratio of sums is the ratio of means.
      const double sum_t = std::accumulate(treatment.begin(), treatment.end(), 0.0);
      const double sum_c = std::accumulate(control.begin(), control.end(), 0.0);
      const double rel = sum_c != 0 ? (sum_t - sum_c) / std::fabs(sum_c)
                                    : (sum_t - sum_c) / static_cast<double>(treatment.size());
      score = t.objective.direction == Direction::kMaximize ? rel : -rel;
    }
    scored.push_back({score, i, c.hold_us});
  }
  // A challenger without a paired value this round (its adapters were away: an experiment
  // took them, a host or the server was down) is not ranked below the others on no
  // evidence: it stays in play, and only those with a value are halved among themselves.
  std::vector<Scored> ranked;
  for (const Scored& c : scored) {
    if (std::isfinite(c.score)) {
      ranked.push_back(c);
      s.challengers[c.order].message.clear();
    } else {
      s.challengers[c.order].message =
          absl::StrCat("no paired windows in round ", r.number, ": runs again");
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Scored& a, const Scored& b) { return a.score > b.score; });
  const size_t keep = (ranked.size() + 1) / 2;
  for (size_t rank = keep; rank < ranked.size(); ++rank) {
    CandidateState& c = s.challengers[ranked[rank].order];
    c.status = CandidateStatus::kHalved;
    c.changed = now;
    c.message = absl::StrFormat("ranked %d of %d in round %d, paired relative difference %+.2f %%",
                                rank + 1, ranked.size(), r.number, ranked[rank].score * 100);
  }
  return absl::OkStatus();
}

absl::Status CheckInput(const HoldTuning& t, const SegmentInput& input) {
  if (input.segment.size() != t.segment_keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat("segment has ", input.segment.size(),
                                                   " values for ", t.segment_keys.size(),
                                                   " segment keys"));
  }
  for (const std::string& name : t.selector.families) {
    absl::StatusOr<common::ChipFamily> family = common::ParseChipFamily(name);
    if (family.ok() && !common::FamilyManaged(*family)) {
      return absl::FailedPreconditionError(
          absl::StrCat("hold tuning '", t.name,
                       "' sets RX aggregation settings on observe-only adapters: "
                       "spec.selector.families lists ",
                       name,
                       ", which rxfleet never writes; narrow "
                       "spec.selector (e.g. families: [rtw89])"));
    }
  }
  std::vector<std::string> keys;
  for (const common::AdapterAttributes& a : input.adapters) {
    absl::StatusOr<common::ChipFamily> family = common::ParseChipFamily(a.family);
    if (family.ok() && !common::FamilyManaged(*family)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "hold tuning '", t.name, "' would set RX aggregation settings on ", a.host, "/",
          a.adapter_id, ": observe-only chip family ", a.family,
          " (rxfleet reads its RX aggregation registers and never writes them); narrow "
          "spec.selector (e.g. families: [rtw89])"));
    }
    keys.push_back(experiments::AdapterKey(a.host, a.adapter_id));
  }
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
    return absl::InvalidArgumentError("duplicate adapter keys in the segment");
  }
  common::RxAggSettings settings;
  settings.hold_us = input.incumbent_hold_us;
  return common::ValidateRxAggSettings(settings);
}

}  // namespace rxfleet::tuning::internal
