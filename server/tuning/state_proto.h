#pragma once

// The planner's segment state (planner.h SegmentState) <-> v1::HoldTuningPlannerState, the form
// the server stores it in with its tuning (proto/rxfleet/v1/tuning.proto), and the evidence as
// the v1 comparison rows operators read.
//
// What is not stored: a proposal's evidence (Proposal::evidence and ::confirmation) and
// final_evidence. The server keeps their rendering in the segment's status instead
// (HoldTuningSegment.comparisons and evidence_text); the planner never reads them back.

#include "absl/status/statusor.h"
#include "rxfleet/v1/tuning.pb.h"
#include "server/tuning/evidence.h"
#include "server/tuning/planner.h"

namespace rxfleet::tuning {

v1::HoldTuningPlannerState StateToProto(const SegmentState& state);

/// `segment` are the segment values (aligned with segment_keys). Errors: InvalidArgument for
/// an unknown phase or candidate status, or rounds whose periods do not follow each other.
absl::StatusOr<SegmentState> StateFromProto(const v1::HoldTuningPlannerState& proto,
                                            std::vector<std::string> segment);

/// One row of the comparison table, with the guardrails as "metric op threshold: state".
v1::HoldTuningComparison ComparisonToProto(const CandidateEvidence& row);

}  // namespace rxfleet::tuning
