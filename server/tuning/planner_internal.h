#pragma once

// The steps the hold tuning planner is made of (planner_steps.cc), shared by planner.cc.
// Internal to rxfleet_server_tuning: callers use planner.h.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/tuning/hold_tuning.h"
#include "server/experiments/aggregate.h"
#include "server/tuning/evidence.h"
#include "server/tuning/planner.h"

namespace rxfleet::tuning::internal {

/// windowLength + kEdgeTolerance: how long after a round's last period windows may still come.
absl::Duration Grace(const HoldTuning& t);

/// Start of epoch period `period`; the period holding `time` (time >= epoch start).
absl::Time PeriodStart(const HoldTuning& t, const SegmentState& s, uint32_t period);
uint32_t PeriodIndex(const HoldTuning& t, const SegmentState& s, absl::Time time);

/// The most periods an epoch may span (the comparison experiment's 90-day limit).
uint32_t MaxEpochPeriods(const HoldTuning& t);

/// The segment's adapter keys sorted by StableHash64(name NUL segment NUL key).
std::vector<std::string> AdapterOrder(const HoldTuning& t, const SegmentInput& input);

/// Slot s of a round -> (index into adapter_order, index into challengers_us), as planner.h.
std::pair<size_t, size_t> Slot(const Round& r, uint64_t s);

/// A fresh active challenger.
CandidateState Challenger(uint32_t hold);

/// The challenger with `hold`, or null.
CandidateState* FindChallenger(SegmentState& s, uint32_t hold);
const CandidateState* FindChallenger(const SegmentState& s, uint32_t hold);

/// False once the challenger was eliminated by a guardrail at or before `time` (or is null).
bool RunsAt(const CandidateState* c, absl::Time time);

/// The challengers' holds, and their names, statuses and messages for the evidence.
std::vector<uint32_t> AllHolds(const SegmentState& s);
std::vector<ChallengerInfo> Infos(const SegmentState& s);

/// The current round's end period (0 without rounds).
uint32_t EndPeriod(const SegmentState& s);

/// The windows comparing challenger `hold` with the incumbent within switchback blocks: the
/// segment's windows on `hold` and its incumbent windows in the blocks where the same adapter
/// had a slot on `hold`, in epoch periods [first_period, end_period). So each pair is the two
/// periods of one block, not a challenger period against an average over other times of day.
std::vector<experiments::Window> PairedWindows(const SegmentState& s, uint32_t hold,
                                               uint32_t first_period, uint32_t end_period,
                                               std::span<const experiments::Window> windows);

/// ComputeEvidence of `infos` on periods [first_period, end_period) whose rows use each
/// challenger's PairedWindows; the report keeps every window.
absl::StatusOr<Evidence> PairedEvidence(const HoldTuning& t, const SegmentState& s,
                                        std::span<const ChallengerInfo> infos,
                                        uint32_t first_period, uint32_t end_period,
                                        std::span<const experiments::Window> windows,
                                        absl::Time now);

/// Sets phase, reason, message and last_transition.
void Transition(SegmentState& s, Phase phase, std::string_view reason, std::string message,
                absl::Time now);

/// Marks every challenger still in play kEnded at `now`, with `why` as its message.
void EndActiveChallengers(SegmentState& s, std::string_view why, absl::Time now);

/// Ends the exploration with the incumbent kept and the evidence of the whole epoch; the
/// challengers still in play end (EndActiveChallengers).
absl::Status KeepIncumbent(const HoldTuning& t, SegmentState& s, std::string message,
                           std::span<const experiments::Window> windows, absl::Time now);

/// Starts the next exploration round at `first_period` (even), budgeted as planner.h says, or
/// ends the exploration (KeepIncumbent) when no challenger, adapter slot or budget is left.
absl::Status StartRound(const HoldTuning& t, SegmentState& s, const SegmentInput& input,
                        uint32_t first_period, std::span<const experiments::Window> windows,
                        absl::Time now);

/// Starts a recheck epoch of the adopted hold against previous_hold_us at `now`. A previous
/// hold already eliminated by a guardrail in this recheck stays eliminated.
void StartRecheck(const HoldTuning& t, SegmentState& s, const SegmentInput& input, absl::Time now);

/// Eliminates (at `now`) the challengers whose guardrails EvaluateGuardrails finds breached in
/// the epoch's windows.
absl::Status ApplyGuardrails(const HoldTuning& t, SegmentState& s,
                             std::span<const experiments::Window> windows, absl::Time now);

/// Ranks the current round's active challengers that have a paired value in it by that
/// round's paired relative difference and marks all but the better ceil(n / 2) of them halved;
/// a challenger without one stays active ("no paired windows in round N: runs again").
absl::Status Halve(const HoldTuning& t, SegmentState& s,
                   std::span<const experiments::Window> windows, absl::Time now);

/// The input rules of StartSegment/Update (segment size, observe-only adapters, duplicate
/// keys, a valid incumbent hold).
absl::Status CheckInput(const HoldTuning& t, const SegmentInput& input);

}  // namespace rxfleet::tuning::internal
