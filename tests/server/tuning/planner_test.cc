#include "server/tuning/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/experiments/guardrails.h"
#include "tests/server/tuning/tuning_sim.h"

namespace rxfleet::tuning {
namespace {

using testing::ArmEffect;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kStart;
using testing::MustParseTuning;
using testing::Segment;
using testing::SegmentSim;

// 10 windows per period; the smallest budget would be 4 rounds x 6 x 3 x 10 = 720 windows.
constexpr char kTuning[] = R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: hold-peak}
spec:
  segments: [usb_speed]
  candidates: [32us, 64us, 128us, 256us, 512us, 1024us]
  objective: {metric: rx_throughput_bps, direction: maximize}
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
  budget: {adapterShare: 0.2, maxWindows: 2400}
  minEffect: 0.02
  windowLength: 60s
  periodLength: 10m
  burnIn: 1m
  recheckShare: 0.2
)";

// SYNTHETIC: throughput peaks at 128 µs and falls 6 % per doubling or halving of the hold
// (1024 µs is 18 % below the peak); drops stay low everywhere.
ArmEffect PeakAt128(uint32_t hold_us) {
  const double octaves = std::fabs(std::log2(static_cast<double>(hold_us) / 128.0));
  return {500e6 * (1 - 0.06 * octaves), 0.01, 0.002, 0.2};
}

// SYNTHETIC: shorter holds give more throughput (+5 % per halving below 1024 µs) but holds
// below 512 µs drop 12 % of the frames, past the 5 % guardrail.
ArmEffect DropsBelow512(uint32_t hold_us) {
  const double halvings = std::log2(1024.0 / static_cast<double>(hold_us));
  return {300e6 * (1 + 0.05 * halvings), hold_us < 512 ? 0.12 : 0.01, 0.002, 0.2};
}

// SYNTHETIC: every hold within 0.5 % of the others.
ArmEffect Flat(uint32_t hold_us) {
  return {400e6 * (1 + 0.005 * std::sin(static_cast<double>(hold_us))), 0.01, 0.002, 0.2};
}

const CandidateState& Challenger(const SegmentState& s, uint32_t hold) {
  for (const CandidateState& c : s.challengers) {
    if (c.hold_us == hold) return c;
  }
  ADD_FAILURE() << "no challenger " << hold;
  static const CandidateState none;
  return none;
}

TEST(PlannerTest, StartsWithEveryOtherCandidateAndTheFirstRoundsBudget) {
  const HoldTuning t = MustParseTuning(kTuning);
  absl::StatusOr<SegmentState> s = StartSegment(t, Segment(10, 1024), kStart);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->phase, Phase::kExploring);
  ASSERT_EQ(s->rounds.size(), 1u);
  const Round& r = s->rounds[0];
  EXPECT_THAT(r.challengers_us, ElementsAre(32u, 64u, 128u, 256u, 512u));
  // 5 challengers: ceil(log2 5) = 3 halving rounds + 1 confirmation; 2400 / (4 * 5) = 120.
  EXPECT_EQ(r.windows_per_challenger, 120u);
  EXPECT_EQ(r.slots, 60u);  // 12 periods of 10 windows per challenger
  EXPECT_EQ(r.explorers, 2u);
  EXPECT_EQ(r.end_period, 60u);  // 30 blocks of 2 periods
  EXPECT_EQ(CommittedWindows(t, *s), 600u);
}

TEST(PlannerTest, ChallengerPeriodsArePairedWithTheIncumbentWithinAdapters) {
  const HoldTuning t = MustParseTuning(kTuning);
  absl::StatusOr<SegmentState> s = StartSegment(t, Segment(10, 1024), kStart);
  ASSERT_TRUE(s.ok());
  std::set<std::pair<std::string, uint32_t>> met;  // (adapter, challenger)
  for (uint32_t block = 0; block < 30; ++block) {
    size_t exploring = 0;
    for (const std::string& key : s->rounds[0].adapter_order) {
      int on_challenger = 0;
      for (uint32_t p : {2 * block, 2 * block + 1}) {
        absl::StatusOr<HoldAssignment> a =
            AssignmentFor(t, *s, key, kStart + t.period_length * p + absl::Minutes(3));
        ASSERT_TRUE(a.ok());
        EXPECT_EQ(a->period_index, p);
        if (a->role == Role::kChallenger) {
          ++on_challenger;
          met.insert({key, a->hold_us});
          EXPECT_EQ(a->arm, HoldArmName(a->hold_us));
        } else {
          EXPECT_EQ(a->hold_us, 1024u);
        }
      }
      EXPECT_LE(on_challenger, 1) << key << " block " << block;
      exploring += on_challenger;
    }
    EXPECT_EQ(exploring, 2u) << "block " << block;  // m = floor(0.2 * 10) every block
  }
  // Every challenger meets at least minAdaptersPerArm distinct adapters.
  for (uint32_t hold : {32u, 64u, 128u, 256u, 512u}) {
    size_t adapters = 0;
    for (const auto& [key, h] : met) adapters += h == hold ? 1 : 0;
    EXPECT_GE(adapters, 3u) << hold;
  }
}

TEST(PlannerTest, HalvesInOrderAndProposesThePeakHold) {
  SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), PeakAt128);
  ASSERT_TRUE(sim.Start().ok());
  ASSERT_TRUE(sim.RunWhile(Phase::kExploring, kStart, 400).ok());
  const SegmentState& s = sim.state();
  ASSERT_EQ(s.phase, Phase::kProposed) << s.message;
  ASSERT_TRUE(s.proposal.has_value());
  EXPECT_EQ(s.proposal->hold_us, 128u);
  EXPECT_EQ(s.proposal->incumbent_hold_us, 1024u);
  EXPECT_EQ(s.reason, kReasonChallengerWon);
  // 5 -> 3 -> 2 -> 1 survivors, then the confirmation round of the survivor.
  ASSERT_EQ(s.rounds.size(), 4u);
  EXPECT_THAT(s.rounds[0].challengers_us, ElementsAre(32u, 64u, 128u, 256u, 512u));
  EXPECT_THAT(s.rounds[1].challengers_us, ElementsAre(64u, 128u, 256u));
  EXPECT_EQ(s.rounds[2].challengers_us.size(), 2u);
  EXPECT_THAT(s.rounds[3].challengers_us, ElementsAre(128u));
  EXPECT_TRUE(s.rounds[3].confirmation);
  for (size_t i = 1; i < s.rounds.size(); ++i) {
    EXPECT_GE(s.rounds[i].first_period, s.rounds[i - 1].end_period);
    EXPECT_EQ(s.rounds[i].first_period % 2, 0u);
  }
  EXPECT_EQ(Challenger(s, 32).status, CandidateStatus::kHalved);
  EXPECT_EQ(Challenger(s, 32).last_round, 1u);
  EXPECT_EQ(Challenger(s, 512).status, CandidateStatus::kHalved);
  EXPECT_EQ(Challenger(s, 128).status, CandidateStatus::kProposed);
  // The evidence: the confirmation's always-valid interval clears +2 %, the table has every
  // challenger, and the windows used are named.
  const CandidateEvidence& decisive = s.proposal->confirmation.candidates.at(0);
  ASSERT_TRUE(decisive.always_valid_relative.has_value());
  EXPECT_GE(decisive.always_valid_relative->ci.low, 0.02);
  EXPECT_TRUE(decisive.conclusive);
  EXPECT_EQ(s.proposal->confirmation.first_period, s.rounds[3].first_period);
  EXPECT_EQ(s.proposal->evidence.candidates.size(), 5u);
  EXPECT_EQ(s.proposal->evidence.first_period, 0u);
  const std::string text = RenderEvidenceText(sim.tuning(), s.proposal->evidence);
  EXPECT_THAT(text, HasSubstr("128µs [proposed]"));
  EXPECT_THAT(text, HasSubstr("32µs [halved]"));
  EXPECT_THAT(text, HasSubstr("rx_drop_ratio <= 5.000 %: holds"));
  // Once proposed, everybody runs the incumbent until the proposal is adopted.
  absl::StatusOr<std::vector<HoldAssignment>> plan =
      PlanAt(sim.tuning(), s, s.last_transition + absl::Hours(1));
  ASSERT_TRUE(plan.ok());
  for (const HoldAssignment& a : *plan) EXPECT_EQ(a.hold_us, 1024u);
  EXPECT_FALSE(ShouldAutoApply(sim.tuning(), s));
}

// The deadline shown while exploring holds: the exploration decides by then, whether a
// winner is found early, guardrails drop holds, or the whole budget is spent on a flat model.
// The simulation updates at period ends, a period later at most than the server's steps.
TEST(PlannerTest, AnExplorationDecidesByItsDeadline) {
  for (const auto& [name, model] : std::vector<std::pair<std::string, testing::HoldModel>>{
           {"peak", PeakAt128}, {"drops", DropsBelow512}, {"flat", Flat}}) {
    SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), model);
    ASSERT_TRUE(sim.Start().ok());
    const std::optional<absl::Time> first = ExplorationEndsBy(sim.tuning(), sim.state());
    ASSERT_TRUE(first.has_value()) << name;
    absl::Time t = kStart;
    std::optional<absl::Time> latest = first;
    for (int i = 0; i < 600 && sim.state().phase == Phase::kExploring; ++i) {
      absl::StatusOr<absl::Time> next = sim.RunPeriod(t);
      ASSERT_TRUE(next.ok()) << next.status();
      t = *next;
      if (sim.state().phase != Phase::kExploring) break;
      latest = ExplorationEndsBy(sim.tuning(), sim.state());
      ASSERT_TRUE(latest.has_value());
      // Only a guardrail drop (budget freed for later rounds) may move it out.
      if (name != "drops") {
        EXPECT_LE(*latest, *first) << name;
      }
    }
    ASSERT_NE(sim.state().phase, Phase::kExploring) << name;
    const absl::Time decided = sim.state().last_transition;
    EXPECT_LE(decided, *first + sim.tuning().period_length) << name;
    EXPECT_LE(decided, *latest + sim.tuning().period_length) << name;
    EXPECT_FALSE(ExplorationEndsBy(sim.tuning(), sim.state()).has_value()) << name;
  }
}

// A round that gets no windows (an experiment took the adapters, the server was down) halves
// nobody: ranking on no evidence would drop holds by their order in the list.
TEST(PlannerTest, ARoundWithoutWindowsHalvesNobody) {
  const HoldTuning t = MustParseTuning(kTuning);
  absl::StatusOr<SegmentState> s = StartSegment(t, Segment(10, 1024), kStart);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->rounds.size(), 1u);
  const absl::Time after_round =
      kStart + t.period_length * s->rounds[0].end_period + t.window_length + absl::Minutes(1);
  absl::StatusOr<SegmentState> next = Update(t, *s, Segment(10, 1024), {}, after_round);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->phase, Phase::kExploring) << next->message;
  ASSERT_EQ(next->rounds.size(), 2u);
  EXPECT_EQ(next->rounds[1].challengers_us, s->rounds[0].challengers_us);
  EXPECT_EQ(s->message, "round 1 of 4: 5 challengers against 1024µs");
  EXPECT_EQ(next->message, "round 2 of 5: 5 challengers against 1024µs") << "one round more";
  for (const CandidateState& c : next->challengers) {
    EXPECT_EQ(c.status, CandidateStatus::kActive) << c.hold_us;
    EXPECT_THAT(c.message, HasSubstr("no paired windows in round 1"));
  }
}

TEST(PlannerTest, NoProposalBeforeEveryGuardrailHasItsOwnMinimumOfData) {
  // The drop guardrail wants 5000 windows of a hold, more than the whole budget: the winner
  // is never known to be safe, so the incumbent is kept.
  std::string text = kTuning;
  const std::string from = "threshold: 0.05}";
  text.replace(text.find(from), from.size(), "threshold: 0.05, minWindows: 5000}");
  SegmentSim sim(MustParseTuning(text), Segment(10, 1024), PeakAt128);
  ASSERT_TRUE(sim.Start().ok());
  ASSERT_TRUE(sim.RunWhile(Phase::kExploring, kStart, 400).ok());
  EXPECT_EQ(sim.state().reason, kReasonIncumbentKept) << sim.state().message;
  ASSERT_TRUE(sim.state().final_evidence.has_value());
  const CandidateEvidence& row = sim.state().final_evidence->candidates.at(2);  // 128 µs
  EXPECT_EQ(row.hold_us, 128u);
  EXPECT_EQ(row.guardrails.at(0).check.state, experiments::GuardrailState::kNotEnoughData);
}

TEST(PlannerTest, NeverExceedsTheBudget) {
  SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), Flat);
  ASSERT_TRUE(sim.Start().ok());
  ASSERT_TRUE(sim.RunWhile(Phase::kExploring, kStart, 600).ok());
  const HoldTuning& t = sim.tuning();
  EXPECT_LE(sim.trace().max_concurrent_challengers, 2u);  // floor(0.2 * 10)
  uint64_t challenger_windows = 0;
  for (const experiments::Window& w : sim.trace().windows) {
    if (w.arm != HoldArmName(1024)) ++challenger_windows;
  }
  EXPECT_LE(challenger_windows, t.budget.max_windows);
  EXPECT_GT(challenger_windows, t.budget.max_windows * 9 / 10);  // and uses most of it
  for (const SegmentState& s : sim.trace().states) {
    EXPECT_LE(CommittedWindows(t, s), t.budget.max_windows);
  }
}

TEST(PlannerTest, KeepsTheIncumbentWhenNoCandidateBeatsMinEffect) {
  SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), Flat);
  ASSERT_TRUE(sim.Start().ok());
  ASSERT_TRUE(sim.RunWhile(Phase::kExploring, kStart, 600).ok());
  const SegmentState& s = sim.state();
  EXPECT_EQ(s.phase, Phase::kStopped);
  EXPECT_EQ(s.reason, kReasonIncumbentKept);
  EXPECT_THAT(s.message, HasSubstr("did not beat the incumbent by minEffect"));
  EXPECT_FALSE(s.proposal.has_value());
  ASSERT_TRUE(s.final_evidence.has_value());
  EXPECT_EQ(s.final_evidence->candidates.size(), 5u);
  EXPECT_EQ(s.incumbent_hold_us, 1024u);
}

TEST(PlannerTest, ATimeOfDaySwingNeitherHidesTheWinnerNorMakesAnEqualHoldWin) {
  // Traffic swings by +-30 % over the day, the same for every hold: comparisons within the
  // same blocks keep the swing out of the differences.
  SegmentSim peak(MustParseTuning(kTuning), Segment(10, 1024), PeakAt128);
  peak.set_diurnal(0.3);
  ASSERT_TRUE(peak.Start().ok());
  ASSERT_TRUE(peak.RunWhile(Phase::kExploring, kStart, 400).ok());
  ASSERT_EQ(peak.state().phase, Phase::kProposed) << peak.state().message;
  EXPECT_EQ(peak.state().proposal->hold_us, 128u);
  SegmentSim flat(MustParseTuning(kTuning), Segment(10, 1024), Flat);
  flat.set_diurnal(0.3);
  ASSERT_TRUE(flat.Start().ok());
  ASSERT_TRUE(flat.RunWhile(Phase::kExploring, kStart, 600).ok());
  EXPECT_EQ(flat.state().reason, kReasonIncumbentKept) << flat.state().message;
  // No challenger is left "active" once the incumbent is kept: the ones still in play ended,
  // each with the reason the segment gives.
  size_t ended = 0;
  for (const CandidateState& c : flat.state().challengers) {
    EXPECT_NE(c.status, CandidateStatus::kActive) << c.hold_us;
    if (c.status != CandidateStatus::kEnded) continue;
    ++ended;
    EXPECT_EQ(c.message, flat.state().message);
    EXPECT_EQ(c.changed, flat.state().last_transition);
  }
  EXPECT_GE(ended, 1u);
}

TEST(PlannerTest, GuardrailRulesOutShortHoldsAtTheFirstCredibleBreach) {
  SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), DropsBelow512);
  ASSERT_TRUE(sim.Start().ok());
  ASSERT_TRUE(sim.RunWhile(Phase::kExploring, kStart, 400).ok());
  const HoldTuning& t = sim.tuning();
  const SegmentState& s = sim.state();
  ASSERT_EQ(s.phase, Phase::kProposed) << s.message;
  EXPECT_EQ(s.proposal->hold_us, 512u);
  for (uint32_t hold : {32u, 64u, 128u, 256u}) {
    const CandidateState& c = Challenger(s, hold);
    EXPECT_EQ(c.status, CandidateStatus::kGuardrail) << hold;
    EXPECT_THAT(c.message, HasSubstr("rx_drop_ratio")) << hold;
    EXPECT_EQ(c.last_round, 1u) << hold;
    // Never assigned again: no window on the hold starts at or after the elimination.
    for (const experiments::Window& w : sim.trace().windows) {
      if (w.arm == HoldArmName(hold)) {
        EXPECT_LT(w.start, c.changed) << hold;
      }
    }
    // At once: the guardrail did not trip on the windows of the update before.
    std::vector<uint32_t> holds = {32, 64, 128, 256, 512};
    absl::StatusOr<experiments::Experiment> e =
        ComparisonExperiment(t, {"super"}, 1024, holds, absl::Hours(24 * 80));
    ASSERT_TRUE(e.ok()) << e.status();
    auto trips_before = [&](absl::Time until) {
      std::vector<experiments::Window> seen;
      for (const experiments::Window& w : sim.trace().windows) {
        if (w.start + w.duration <= until) seen.push_back(w);
      }
      absl::StatusOr<std::vector<experiments::GuardrailDecision>> d =
          experiments::EvaluateGuardrails(*e, kStart, seen, {});
      EXPECT_TRUE(d.ok()) << d.status();
      for (const experiments::GuardrailDecision& decision : *d) {
        if (decision.arm == HoldArmName(hold)) return true;
      }
      return false;
    };
    EXPECT_TRUE(trips_before(c.changed)) << hold;
    EXPECT_FALSE(trips_before(c.changed - t.period_length)) << hold;
  }
  // Eliminations return their unused slots: the confirmation got what the others left.
  for (const SegmentState& state : sim.trace().states) {
    EXPECT_LE(CommittedWindows(t, state), t.budget.max_windows);
  }
  EXPECT_GT(s.rounds.back().windows_per_challenger, 1500u);
  const CandidateEvidence& row = s.proposal->evidence.candidates.at(0);  // 32 µs
  ASSERT_FALSE(row.guardrails.empty());
  EXPECT_EQ(row.guardrails[0].check.state, experiments::GuardrailState::kBreached);
}

TEST(PlannerTest, AdoptionRechecksAndACredibleReversalReopensExploring) {
  SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), PeakAt128);
  ASSERT_TRUE(sim.Start().ok());
  absl::StatusOr<absl::Time> t = sim.RunWhile(Phase::kExploring, kStart, 400);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(sim.state().phase, Phase::kProposed);
  absl::StatusOr<SegmentState> adopted = Adopt(sim.tuning(), sim.state(), sim.input(), *t);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(adopted->phase, Phase::kRechecking);
  EXPECT_EQ(adopted->incumbent_hold_us, 128u);
  EXPECT_EQ(adopted->previous_hold_us, 1024u);
  EXPECT_EQ(adopted->rounds.back().explorers, 2u);  // floor(0.2 * 10)
  sim.state() = *adopted;
  sim.trace().max_concurrent_challengers = 0;
  // The environment changes (SYNTHETIC): 1024 µs is now 20 % better than 128 µs.
  sim.set_model([](uint32_t hold) {
    ArmEffect e = PeakAt128(hold);
    if (hold == 1024) e.rx_bps = PeakAt128(128).rx_bps * 1.2;
    return e;
  });
  ASSERT_TRUE(sim.RunWhile(Phase::kRechecking, *t, 200).ok());
  const SegmentState& s = sim.state();
  EXPECT_EQ(s.phase, Phase::kExploring);
  EXPECT_EQ(s.reason, kReasonReversalDetected);
  EXPECT_EQ(s.incumbent_hold_us, 128u);
  EXPECT_EQ(s.exploration, 2u);
  EXPECT_THAT(s.rounds.at(0).challengers_us, ElementsAre(32u, 64u, 256u, 512u, 1024u));
  EXPECT_LE(sim.trace().max_concurrent_challengers, 2u);
}

TEST(PlannerTest, StableRecheckDoesNotReopen) {
  SegmentSim sim(MustParseTuning(kTuning), Segment(10, 1024), PeakAt128);
  ASSERT_TRUE(sim.Start().ok());
  absl::StatusOr<absl::Time> t = sim.RunWhile(Phase::kExploring, kStart, 400);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<SegmentState> adopted = Adopt(sim.tuning(), sim.state(), sim.input(), *t);
  ASSERT_TRUE(adopted.ok());
  sim.state() = *adopted;
  ASSERT_TRUE(sim.RunWhile(Phase::kRechecking, *t, 100).ok());
  EXPECT_EQ(sim.state().phase, Phase::kRechecking);
}

TEST(PlannerTest, RefusesObserveOnlyAdapters) {
  SegmentInput input = Segment(10, 1024);
  input.adapters[3].family = "mt76";
  absl::StatusOr<SegmentState> s = StartSegment(MustParseTuning(kTuning), input, kStart);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("observe-only chip family mt76"));
}

TEST(PlannerTest, RefusesSelectorsNamingObserveOnlyFamilies) {
  HoldTuning t = MustParseTuning(kTuning);
  t.selector.families = {"rtw89", "rtw88"};
  absl::StatusOr<SegmentState> s = StartSegment(t, Segment(10, 1024), kStart);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("spec.selector.families lists rtw88"));
}

TEST(PlannerTest, AnIncumbentOutsideTheCandidatesMakesEveryCandidateAChallenger) {
  absl::StatusOr<SegmentState> s =
      StartSegment(MustParseTuning(kTuning), Segment(10, 2048), kStart);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->rounds[0].challengers_us, ElementsAre(32u, 64u, 128u, 256u, 512u, 1024u));
  // 6 challengers: 3 halving rounds + confirmation; 2400 / (4 * 6) = 100 windows each.
  EXPECT_EQ(s->rounds[0].windows_per_challenger, 100u);
  SegmentInput bad = Segment(10, 100);  // not a multiple of 32 µs
  EXPECT_EQ(StartSegment(MustParseTuning(kTuning), bad, kStart).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlannerTest, AutoApplyIsOnlyForProposals) {
  HoldTuning t = MustParseTuning(std::string(kTuning) + "  autoApply: true\n");
  SegmentSim sim(t, Segment(10, 1024), PeakAt128);
  ASSERT_TRUE(sim.Start().ok());
  EXPECT_FALSE(ShouldAutoApply(t, sim.state()));
  ASSERT_TRUE(sim.RunWhile(Phase::kExploring, kStart, 400).ok());
  ASSERT_EQ(sim.state().phase, Phase::kProposed);
  EXPECT_TRUE(ShouldAutoApply(t, sim.state()));
}

TEST(PlannerTest, SmallSegmentsKeepTheIncumbentAtOnce) {
  absl::StatusOr<SegmentState> s = StartSegment(MustParseTuning(kTuning), Segment(4, 1024), kStart);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->phase, Phase::kStopped);
  EXPECT_EQ(s->reason, kReasonIncumbentKept);
  EXPECT_THAT(s->message, HasSubstr("lets none run a challenger"));
}

TEST(PlannerTest, AdoptNeedsAProposalAndStopReturnsToTheIncumbent) {
  const HoldTuning t = MustParseTuning(kTuning);
  absl::StatusOr<SegmentState> s = StartSegment(t, Segment(10, 128), kStart);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(s->rounds[0].challengers_us, ElementsAre(32u, 64u, 256u, 512u, 1024u));
  EXPECT_EQ(Adopt(t, *s, Segment(10, 128), kStart).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const SegmentState stopped = Stop(*s, kStart + absl::Minutes(5), "operator");
  EXPECT_EQ(stopped.reason, kReasonStoppedByUser);
  for (const CandidateState& c : stopped.challengers) {
    EXPECT_EQ(c.status, CandidateStatus::kEnded) << c.hold_us;
    EXPECT_EQ(c.message, "operator");
  }
  absl::StatusOr<std::vector<HoldAssignment>> plan = PlanAt(t, stopped, kStart + absl::Minutes(6));
  ASSERT_TRUE(plan.ok());
  for (const HoldAssignment& a : *plan) EXPECT_EQ(a.hold_us, 128u);
}

TEST(PlannerTest, Deterministic) {
  SegmentSim a(MustParseTuning(kTuning), Segment(10, 1024), PeakAt128);
  SegmentSim b(MustParseTuning(kTuning), Segment(10, 1024), PeakAt128);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(a.RunWhile(Phase::kExploring, kStart, 80).ok());
  ASSERT_TRUE(b.RunWhile(Phase::kExploring, kStart, 80).ok());
  EXPECT_EQ(a.state().rounds, b.state().rounds);
  EXPECT_EQ(a.state().challengers, b.state().challengers);
}

}  // namespace
}  // namespace rxfleet::tuning
