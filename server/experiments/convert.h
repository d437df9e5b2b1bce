#pragma once

// Conversions between the experiment value types and the v1 API (proto/rxfleet/v1):
// experiments, assignments, stopped arms, metric windows and reports.
//
// Mapping notes:
//  - Guardrail ops are the condition to keep; the API's comparator is the direction that
//    trips: "<=" <-> COMPARATOR_GREATER_THAN, ">=" <-> COMPARATOR_LESS_THAN.
//  - minAdaptersPerArm, minWindowsPerArm and a guardrail's minAdapters/minWindows map to the
//    spec fields of the same name; 0 in the API means the default. relative_to_control
//    guardrails are not supported (InvalidArgument).
//  - ReportToProto: a summary without an interval (fewer than 2 adapters) has ci95_low and
//    ci95_high NaN; comparisons without an estimate are left out (a `not_enough_data` note
//    says why); relative_diff is 0 when the control mean is 0; `text` is RenderReportText.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/experiment/experiment.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "rxfleet/v1/experiment.pb.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"
#include "server/experiments/report.h"

namespace rxfleet::experiments {

/// Experiment -> v1::ExperimentSpec (see the mapping notes).
v1::ExperimentSpec ExperimentSpecToProto(const Experiment& experiment);

/// Experiment -> v1::Experiment: metadata name, labels, resource_version and the spec; status
/// is left empty (the server owns it).
v1::Experiment ExperimentToProto(const Experiment& experiment);

/// v1::Experiment -> validated Experiment. An empty control_arm means the first arm; an unset
/// window_length means 60 s. `source` becomes Experiment::source. Errors: InvalidArgument
/// starting with "experiment 'NAME': " for an unspecified design or comparator, unknown
/// metric names, relative_to_control guardrails, bad selectors and every ValidateExperiment
/// failure.
absl::StatusOr<Experiment> ExperimentFromProto(const v1::Experiment& experiment,
                                               std::string_view source);

/// The v1::ExperimentAssignment of an adapter for a bundle: the arm in effect with its
/// settings, the experiment's priority, period_index, period_start_time, period_end_time,
/// window_length and burn_in.
v1::ExperimentAssignment AssignmentToProto(const Experiment& experiment, int64_t generation,
                                           std::string_view adapter_id,
                                           const Assignment& assignment);

/// StoppedArm <-> v1::StoppedArm (segment values <-> map by the experiment's segment keys; an
/// empty map is every segment). FromProto: InvalidArgument when the map's keys are not the
/// experiment's segment keys or the arm is unknown.
v1::StoppedArm StoppedArmToProto(const Experiment& experiment, const StoppedArm& stopped);
absl::StatusOr<StoppedArm> StoppedArmFromProto(const Experiment& experiment,
                                               const v1::StoppedArm& stopped);

/// v1::MetricWindow -> Window, with the adapter key AdapterKey(host_id, window.adapter_id)
/// and the adapter's segment values (SegmentValuesFor at the time the window was received).
Window WindowFromProto(const v1::MetricWindow& window, std::string_view host_id,
                       std::vector<std::string> segment);

/// Report -> v1::ExperimentReport with the server's generation and phase.
v1::ExperimentReport ReportToProto(const Report& report, int64_t generation,
                                   v1::ExperimentPhase phase);

}  // namespace rxfleet::experiments
