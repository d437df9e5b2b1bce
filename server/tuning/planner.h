#pragma once

// The decision core of hold auto-tuning, per segment: which hold every adapter runs in every
// switchback period, when a challenger is eliminated, when a hold is proposed, and when an
// adopted hold is re-examined. Pure and deterministic: no I/O, no clock (time is an argument),
// no randomness beyond the stable hashes of server/experiments/assignment.h.
//
// Method. The challengers are the candidates other than the incumbent (the segment's current
// policy hold). They are explored by Sequential Halving (Karnin, Koren & Somekh, "Almost
// Optimal Exploration in Multi-Armed Bandits", ICML 2013, Algorithm 1): with n challengers
// there are ceil(log2 n) halving rounds; at the start of each round the remaining budget B is
// split evenly over the rounds left (the halving rounds plus one confirmation round), and the
// round's share evenly over its |S| survivors: t = floor(B / (rounds_left * |S|)) windows per
// challenger, as the paper's t_r = floor(T / (|S_r| ceil(log2 n))). At the end of a round the
// survivors are ranked by that round's paired relative difference against the incumbent (only
// the round's windows, as in the paper) and the better ceil(|S| / 2) go on. Every comparison
// pairs a challenger's periods with the incumbent periods of the same blocks on the same
// adapters (PairedWindows in planner_internal.h), never with other times of day. The last survivor
// then runs a confirmation round with all the budget left, judged on its own windows only (so
// the choice among challengers does not bias the test), by the always-valid (mSPRT) interval of
// the relative difference (AlwaysValidRelative, evidence.h): it is proposed as soon as that
// interval clears minEffect in the objective's direction with at least minAdaptersPerArm pairs
// and minWindowsPerArm windows, and every guardrail holds on enough of its windows (each
// guardrail's own minimums); if the round ends first, the incumbent is kept.
//
// Exposure. Time is cut into periods of periodLength from the epoch start; periods 2b and 2b+1
// form block b. In a round, m = floor(adapterShare * N) of the segment's N adapters explore in
// every block (fewer in the round's last block): slot s of the round (s = b * m + j, j < m) goes
// to challenger S[s mod |S|] on adapter order[(s + floor(s / lcm(N, |S|))) mod N] (order: the
// adapters sorted by StableHash64), and that adapter runs the challenger in one period of the
// block and the incumbent in the other, in the random balanced order of a two-arm switchback
// Assigner. So at most m adapters run a challenger at any time, comparisons are paired within
// adapters, and every challenger meets many adapters. A slot costs WindowsPerPeriod windows of
// the budget (burn-in included); the committed windows never exceed budget.maxWindows.
//
// Guardrails. At every Update each challenger still in play is checked with EvaluateGuardrails
// on all its windows of the epoch; a breach eliminates it at once: from that time it is never
// assigned again and its future slots run the incumbent (and are not counted as spent).
//
// After adoption (Adopt) the segment rechecks: floor(recheckShare * N) adapters per block
// alternate the adopted hold with the previous incumbent, in recheck epochs of
// kRecheckEpochBlocks blocks (evidence from the current epoch only, so old data cannot mask a
// change); a previous hold that breaks a guardrail is not rechecked again. When the previous hold
// is credibly better than the adopted one by minEffect, the segment reopens exploring with the
// adopted hold as incumbent and a fresh budget.
//
// The server runs it per segment of every HoldTuning (ExperimentController, the tuning files
// tuning_*.cc) and stores the state with the tuning (state_proto.h).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/policy/selectors.h"
#include "common/tuning/hold_tuning.h"
#include "server/experiments/aggregate.h"
#include "server/tuning/evidence.h"

namespace rxfleet::tuning {

/// Blocks (pairs of periods) in a recheck epoch.
inline constexpr uint32_t kRecheckEpochBlocks = 168;

/// Where a segment's tuning stands.
enum class Phase : uint8_t {
  kExploring,   ///< halving or confirmation rounds are running
  kProposed,    ///< a challenger won; waiting for approval (or autoApply); all on incumbent
  kRechecking,  ///< the proposal was adopted; a small share re-checks the previous hold
  kStopped,     ///< ended: see SegmentState::reason
};

/// "exploring", "proposed", "rechecking", "stopped".
std::string_view PhaseName(Phase phase);

/// SegmentState::reason values (CamelCase machine words).
inline constexpr std::string_view kReasonExploring = "Exploring";
inline constexpr std::string_view kReasonChallengerWon = "ChallengerWon";
inline constexpr std::string_view kReasonAdopted = "Adopted";
inline constexpr std::string_view kReasonReversalDetected = "ReversalDetected";
inline constexpr std::string_view kReasonIncumbentKept = "IncumbentKept";
inline constexpr std::string_view kReasonStoppedByUser = "StoppedByUser";

/// One round of exploration (or the recheck epoch).
struct Round {
  uint32_t number = 1;                     ///< 1-based within the exploration
  bool confirmation = false;               ///< the last survivor against the incumbent
  bool recheck = false;                    ///< a recheck epoch (Phase::kRechecking)
  uint32_t first_period = 0;               ///< epoch period index, even (a block boundary)
  uint32_t end_period = 0;                 ///< exclusive; first_period + 2 * blocks
  std::vector<uint32_t> challengers_us;    ///< S: survivors at the round's start, candidate order
  uint64_t windows_per_challenger = 0;     ///< t of the method (0 for recheck)
  uint64_t slots = 0;                      ///< periods on a challenger in the round (all)
  uint32_t explorers = 0;                  ///< m: adapters on a challenger per block
  std::vector<std::string> adapter_order;  ///< adapter keys in StableHash64 order
  friend bool operator==(const Round&, const Round&) = default;
};

/// How a challenger stands.
enum class CandidateStatus : uint8_t {
  kActive,     ///< still in play
  kHalved,     ///< ranked in the worse half at the end of a round
  kGuardrail,  ///< a guardrail was credibly broken
  kProposed,   ///< the winner (proposed or adopted)
  kEnded,      ///< still in play when the segment stopped (incumbent kept, stopped by an operator)
};

/// "active", "halved", "guardrail", "proposed", "ended".
std::string_view CandidateStatusName(CandidateStatus status);

struct CandidateState {
  uint32_t hold_us = 0;
  CandidateStatus status = CandidateStatus::kActive;
  uint32_t last_round = 0;                    ///< the last round it took part in
  absl::Time changed = absl::InfinitePast();  ///< when the status last changed
  std::string message;  ///< why it was eliminated, e.g. the guardrail decision
  friend bool operator==(const CandidateState&, const CandidateState&) = default;
};

/// A proposed policy for one segment.
struct Proposal {
  std::vector<std::string> segment;
  uint32_t hold_us = 0;            ///< the winner
  uint32_t incumbent_hold_us = 0;  ///< the hold it replaces
  absl::Time time;
  Evidence evidence;      ///< every challenger over the whole exploration (the table)
  Evidence confirmation;  ///< the winner over its confirmation round only (the decision)
};

/// Everything the planner knows about one segment; a plain value (to be stored by the server).
struct SegmentState {
  std::vector<std::string> segment;  ///< values aligned with HoldTuning::segment_keys
  Phase phase = Phase::kExploring;
  std::string reason = std::string(kReasonExploring);
  std::string message;
  absl::Time last_transition;
  uint32_t incumbent_hold_us = 0;
  std::optional<uint32_t> previous_hold_us;  ///< rechecking: the hold before adoption
  absl::Time epoch_start;                    ///< period 0 of the current exploration/recheck
  uint32_t exploration = 1;                  ///< explorations so far (reopening adds one)
  std::vector<CandidateState> challengers;   ///< candidate order; rechecking: the previous hold
  std::vector<Round> rounds;                 ///< of the current epoch; the last one is current
  uint64_t budget_windows = 0;               ///< budget.maxWindows (0 while rechecking)
  std::optional<Proposal> proposal;          ///< set from kProposed on
  std::optional<Evidence> final_evidence;    ///< when the incumbent was kept
};

/// The segment as the server sees it at a point in time.
struct SegmentInput {
  std::vector<std::string> segment;                 ///< aligned with segment_keys
  std::vector<common::AdapterAttributes> adapters;  ///< the adapters of the segment
  uint32_t incumbent_hold_us = 0;                   ///< the hold its policy sets now
};

/// The role of an adapter's hold in a period.
enum class Role : uint8_t {
  kIncumbent,   ///< the current policy hold
  kChallenger,  ///< exploring: a challenger; rechecking: the previous hold
};

/// What one adapter runs in one period.
struct HoldAssignment {
  std::string adapter;  ///< adapter key
  uint32_t hold_us = 0;
  std::string arm;  ///< HoldArmName(hold_us): the arm name its windows must carry
  Role role = Role::kIncumbent;
  uint32_t period_index = 0;  ///< of the epoch
  absl::Time period_start;
  absl::Time period_end;
  bool in_burn_in = false;
};

/// Starts tuning a segment at `now` (period 0 starts there). The challengers are the
/// candidates other than input.incumbent_hold_us; without any, or when floor(adapterShare *
/// N) is 0, the state is kStopped/IncumbentKept at once (message says why).
/// Errors: InvalidArgument for an invalid tuning, a segment with the wrong number of values,
/// duplicate adapter keys or an incumbent that is not a valid hold; FailedPrecondition
/// "... observe-only chip family ..." when an adapter's family is observe-only (rtw88, mt76)
/// or the selector's families list one, as experiments refuse them at their API.
absl::StatusOr<SegmentState> StartSegment(const HoldTuning& tuning, const SegmentInput& input,
                                          absl::Time now);

/// The hold of every adapter of the current round's order at `time` (adapters not in it run
/// the incumbent: pass them to AssignmentFor). Outside exploring/rechecking every adapter runs
/// the incumbent. Errors: InvalidArgument when time is before the epoch start.
absl::StatusOr<std::vector<HoldAssignment>> PlanAt(const HoldTuning& tuning,
                                                   const SegmentState& state, absl::Time time);

/// The hold of one adapter at `time` (see PlanAt).
absl::StatusOr<HoldAssignment> AssignmentFor(const HoldTuning& tuning, const SegmentState& state,
                                             std::string_view adapter_key, absl::Time time);

/// The adapters with a slot in the switchback block (two periods) holding `time`: those that
/// run a challenger in one of its periods and the incumbent in the other, each once, in slot
/// order. Every other adapter runs the incumbent throughout the block, so a server need not
/// assign it anything. Empty outside exploring/rechecking and before the epoch start.
std::vector<std::string> SlotAdaptersAt(const HoldTuning& tuning, const SegmentState& state,
                                        absl::Time time);

/// Windows on challengers committed so far: periods started plus planned ones of the current
/// round, times WindowsPerPeriod; never above budget_windows.
uint64_t CommittedWindows(const HoldTuning& tuning, const SegmentState& state);

/// While exploring: the latest time the exploration decides, if every remaining round runs
/// with the current round's explorers per block and the rest of the budget is spent (each
/// later round starts at the second period after the previous one's end; the last is judged
/// windowLength + kEdgeTolerance after its end). A confirmation that clears minEffect ends it
/// sooner; a guardrail drop frees budget for the later rounds and moves it later at once;
/// adapters joining or leaving, or a challenger without windows in a round (Halve keeps it),
/// move it when the next round starts. nullopt in every other phase.
std::optional<absl::Time> ExplorationEndsBy(const HoldTuning& tuning, const SegmentState& state);

/// Advances the state to `now` given every window of the segment since the epoch start
/// (others are ignored: AggregateWindows' exclusions). Applies, in order: guardrail
/// eliminations; the end of a round (ranking and halving, or the confirmation's verdict) once
/// now >= the round's end + windowLength + kEdgeTolerance (late windows); the proposal as soon
/// as the confirmation clears minEffect; in rechecking, a reversal reopening exploration and
/// the roll-over of the recheck epoch. `input` gives the current adapters (used when a round or
/// epoch starts). Errors: InvalidArgument for invalid input or windows (AggregateWindows).
absl::StatusOr<SegmentState> Update(const HoldTuning& tuning, const SegmentState& state,
                                    const SegmentInput& input,
                                    std::span<const experiments::Window> windows, absl::Time now);

/// True when the state holds a proposal the tuning applies unattended (autoApply).
bool ShouldAutoApply(const HoldTuning& tuning, const SegmentState& state);

/// Records that the proposal was written as the segment's policy at `now` and starts
/// rechecking. Errors: FailedPrecondition unless the phase is kProposed.
absl::StatusOr<SegmentState> Adopt(const HoldTuning& tuning, const SegmentState& state,
                                   const SegmentInput& input, absl::Time now);

/// Ends the tuning of the segment (StoppedByUser); every adapter returns to the incumbent.
SegmentState Stop(const SegmentState& state, absl::Time now, std::string_view message);

}  // namespace rxfleet::tuning
