#pragma once

// Conversions between the Experiment document (common/experiment) and the v1 API
// (proto/rxfleet/v1/experiment.proto), shared by the server, which stores and runs
// experiments, and rxfleetctl, which sends them.
//
// Mapping notes:
//  - Guardrail ops are the condition to keep; the API's comparator is the direction that
//    trips: "<=" <-> COMPARATOR_GREATER_THAN, ">=" <-> COMPARATOR_LESS_THAN.
//  - minAdaptersPerArm, minWindowsPerArm and a guardrail's minAdapters/minWindows map to the
//    fields of the same names; 0 in the API means the document's default.
//  - relative_to_control guardrails are not supported (InvalidArgument).
//  - spec.probe <-> Experiment::probe (common/proto/probe.h); its interval is for policies
//    only: not written, and ignored when read.

#include <string_view>

#include "absl/status/statusor.h"
#include "common/experiment/experiment.h"
#include "rxfleet/v1/experiment.pb.h"

namespace rxfleet::experiments {

/// Guardrail -> v1::Guardrail (see the mapping notes); relative_to_control is false.
v1::Guardrail GuardrailToProto(const Guardrail& guardrail);

/// v1::Guardrail -> Guardrail; `path` names it in messages (e.g. "spec.guardrails[0]").
/// min_windows/min_adapters 0 leave the optional unset. Errors: InvalidArgument
/// "path.metric: ..." (unknown metric), "path.comparator: ..." (unspecified),
/// "path.relative_to_control: ..." (not supported). Ranges are ValidateExperiment's.
absl::StatusOr<Guardrail> GuardrailFromProto(const v1::Guardrail& guardrail, std::string_view path);

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

}  // namespace rxfleet::experiments
