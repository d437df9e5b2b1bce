#include "server/tuning/state_proto.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/experiment/metric.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::tuning {
namespace {

using common::TimeFromProto;
using common::TimeToProto;

std::string_view GuardrailStateName(experiments::GuardrailState state) {
  switch (state) {
    case experiments::GuardrailState::kHolds:
      return "holds";
    case experiments::GuardrailState::kBreached:
      return "broken";
    case experiments::GuardrailState::kNotEnoughData:
      break;
  }
  return "not enough data";
}

}  // namespace

v1::HoldTuningPlannerState StateToProto(const SegmentState& s) {
  v1::HoldTuningPlannerState out;
  out.set_phase(static_cast<uint32_t>(s.phase));
  out.set_reason(s.reason);
  out.set_message(s.message);
  *out.mutable_last_transition_time() = TimeToProto(s.last_transition);
  out.set_incumbent_hold_us(s.incumbent_hold_us);
  if (s.previous_hold_us) out.set_previous_hold_us(*s.previous_hold_us);
  *out.mutable_epoch_start_time() = TimeToProto(s.epoch_start);
  out.set_exploration(s.exploration);
  for (const CandidateState& c : s.challengers) {
    v1::HoldTuningPlannerState::Candidate* p = out.add_challengers();
    p->set_hold_us(c.hold_us);
    p->set_status(static_cast<uint32_t>(c.status));
    p->set_last_round(c.last_round);
    if (c.changed != absl::InfinitePast()) *p->mutable_change_time() = TimeToProto(c.changed);
    p->set_message(c.message);
  }
  for (const Round& r : s.rounds) {
    v1::HoldTuningPlannerState::Round* p = out.add_rounds();
    p->set_number(r.number);
    p->set_confirmation(r.confirmation);
    p->set_recheck(r.recheck);
    p->set_first_period(r.first_period);
    p->set_end_period(r.end_period);
    for (uint32_t hold : r.challengers_us) p->add_challenger_hold_us(hold);
    p->set_windows_per_challenger(r.windows_per_challenger);
    p->set_slots(r.slots);
    p->set_explorers(r.explorers);
    for (const std::string& key : r.adapter_order) p->add_adapter_order(key);
  }
  out.set_budget_windows(s.budget_windows);
  if (s.proposal) {
    out.set_has_proposal(true);
    out.set_proposal_hold_us(s.proposal->hold_us);
    out.set_proposal_incumbent_hold_us(s.proposal->incumbent_hold_us);
    *out.mutable_proposal_time() = TimeToProto(s.proposal->time);
  }
  return out;
}

absl::StatusOr<SegmentState> StateFromProto(const v1::HoldTuningPlannerState& p,
                                            std::vector<std::string> segment) {
  if (p.phase() > static_cast<uint32_t>(Phase::kStopped)) {
    return absl::InvalidArgumentError(absl::StrCat("planner_state.phase: unknown ", p.phase()));
  }
  SegmentState s;
  s.segment = std::move(segment);
  s.phase = static_cast<Phase>(p.phase());
  s.reason = p.reason();
  s.message = p.message();
  s.last_transition = TimeFromProto(p.last_transition_time());
  s.incumbent_hold_us = p.incumbent_hold_us();
  if (p.has_previous_hold_us()) s.previous_hold_us = p.previous_hold_us();
  s.epoch_start = TimeFromProto(p.epoch_start_time());
  s.exploration = p.exploration();
  for (const v1::HoldTuningPlannerState::Candidate& c : p.challengers()) {
    if (c.status() > static_cast<uint32_t>(CandidateStatus::kEnded)) {
      return absl::InvalidArgumentError(
          absl::StrCat("planner_state.challengers: unknown status ", c.status()));
    }
    CandidateState out;
    out.hold_us = c.hold_us();
    out.status = static_cast<CandidateStatus>(c.status());
    out.last_round = c.last_round();
    out.changed = c.has_change_time() ? TimeFromProto(c.change_time()) : absl::InfinitePast();
    out.message = c.message();
    s.challengers.push_back(std::move(out));
  }
  uint32_t previous_end = 0;
  for (const v1::HoldTuningPlannerState::Round& r : p.rounds()) {
    if (r.end_period() < r.first_period() || r.first_period() < previous_end) {
      return absl::InvalidArgumentError(absl::StrCat("planner_state.rounds: round ", r.number(),
                                                     " spans periods [", r.first_period(), ", ",
                                                     r.end_period(), ")"));
    }
    previous_end = r.end_period();
    Round out;
    out.number = r.number();
    out.confirmation = r.confirmation();
    out.recheck = r.recheck();
    out.first_period = r.first_period();
    out.end_period = r.end_period();
    out.challengers_us.assign(r.challenger_hold_us().begin(), r.challenger_hold_us().end());
    out.windows_per_challenger = r.windows_per_challenger();
    out.slots = r.slots();
    out.explorers = r.explorers();
    out.adapter_order.assign(r.adapter_order().begin(), r.adapter_order().end());
    if (out.explorers > 0 && (out.challengers_us.empty() || out.adapter_order.empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat("planner_state.rounds: round ", r.number(), " has slots but no ",
                       out.challengers_us.empty() ? "challengers" : "adapters"));
    }
    s.rounds.push_back(std::move(out));
  }
  s.budget_windows = p.budget_windows();
  if (p.has_proposal()) {
    Proposal proposal;
    proposal.segment = s.segment;
    proposal.hold_us = p.proposal_hold_us();
    proposal.incumbent_hold_us = p.proposal_incumbent_hold_us();
    proposal.time = TimeFromProto(p.proposal_time());
    s.proposal = std::move(proposal);
  }
  return s;
}

v1::HoldTuningComparison ComparisonToProto(const CandidateEvidence& row) {
  v1::HoldTuningComparison out;
  out.set_hold_us(row.hold_us);
  out.set_status(row.status);
  out.set_pairs(static_cast<uint32_t>(row.pairs));
  out.set_windows(row.windows);
  out.set_incumbent_windows(row.incumbent_windows);
  out.set_mean(row.mean);
  out.set_incumbent_mean(row.incumbent_mean);
  const double nan = std::nan("");
  out.set_relative_diff(row.estimate && row.estimate->relative ? row.estimate->relative->value
                                                               : nan);
  out.set_always_valid_ci95_low(row.always_valid_relative ? row.always_valid_relative->ci.low
                                                          : nan);
  out.set_always_valid_ci95_high(row.always_valid_relative ? row.always_valid_relative->ci.high
                                                           : nan);
  out.set_always_valid_p_value(row.always_valid_relative ? row.always_valid_relative->p_value
                                                         : nan);
  for (const GuardrailStatus& g : row.guardrails) {
    std::string text = absl::StrFormat(
        "%s %s %g: %s", common::ToAbslView(experiments::MetricName(g.guardrail.metric)),
        common::ToAbslView(experiments::GuardrailOpSymbol(g.guardrail.op)), g.guardrail.threshold,
        common::ToAbslView(GuardrailStateName(g.check.state)));
    if (g.check.bound) absl::StrAppend(&text, absl::StrFormat(" (bound %g)", *g.check.bound));
    out.add_guardrails(std::move(text));
  }
  return out;
}

}  // namespace rxfleet::tuning
