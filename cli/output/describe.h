#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/experiment.pb.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "rxfleet/v1/policy.pb.h"
#include "rxfleet/v1/probe.pb.h"
#include "rxfleet/v1/tuning.pb.h"

namespace rxfleet::cli {

// `rxfleetctl describe`: everything about one object as "Label: value" lines and indented
// sections, ending with its recent events (layout in docs/CLI.md).

/// A host: identity, labels, connection, agent, machine facts, bundle ACK/NACK state,
/// conditions, its adapters (table) and recent events.
void DescribeHost(const v1::Host& host, const std::vector<v1::Adapter>& adapters,
                  const std::vector<v1::Event>& events, absl::Time now, std::ostream& out);

/// The throughput probe the server's policies decide for one adapter: common::ResolveProbe over
/// the server's valid policies, as the server plans probe slots (ResolveAdapterProbe in
/// cli/commands/describe.h).
struct AdapterProbe {
  std::string policy;  ///< the deciding server policy
  v1::ProbeSpec spec;  ///< its probe (PolicySpec.probe)
};

/// An adapter from ExplainAdapter: identity, USB link, state, sync and bundle versions, the
/// effective settings per field (expected by the server, desired by the agent, observed in the
/// registers) with provenance (policy, built-in default, local file or experiment), the
/// differences, every policy and whether it matches, raw registers, conditions, diagnoses,
/// counters, the experiment assignment and recent events. `probe` (nullopt: none) adds "probe"
/// to the DECIDES cell of the deciding policy and a "Probe:" line.
void DescribeAdapter(const v1::ExplainAdapterResponse& explain,
                     const std::optional<AdapterProbe>& probe, const std::vector<v1::Event>& events,
                     absl::Time now, std::ostream& out);

/// A policy: metadata, priority, selector terms, settings, matched/effective adapter counts,
/// conditions and recent events.
void DescribePolicy(const v1::Policy& policy, const std::vector<v1::Event>& events, absl::Time now,
                    std::ostream& out);

/// An experiment: metadata, phase with start and (planned) end, the spec (design, selector,
/// arms with weights and settings, control, durations, metrics, guardrails as the condition
/// that trips them, segment keys, priority, seed), status (assigned adapters, valid windows,
/// conditions), the arms stopped per segment with reasons, and recent events.
void DescribeExperiment(const v1::Experiment& experiment, const std::vector<v1::Event>& events,
                        absl::Time now, std::ostream& out);

/// A hold tuning (`tune describe`): metadata, phase with start and end, the spec (candidates,
/// objective, segment keys, budget, min effect, timing, auto apply, recheck share, minimums,
/// selector, guardrails), status (assigned adapters, valid windows, conditions), then per
/// segment: its values, phase (reason), message, since, incumbent and previous hold,
/// exploration, round (and whether it is the confirmation round), committed/budget windows,
/// adapters and explorers, the candidates (HOLD, STATUS, LAST ROUND, MESSAGE), the proposal
/// (hold vs incumbent, policy name, time, the confirmation row), the comparison table (HOLD,
/// STATUS, PAIRS, WINDOWS challenger/incumbent, MEAN, INCUMBENT, DIFF relative, ALWAYS-VALID
/// 95% CI, P, GUARDRAILS) and the applied policy. Last, each segment's evidence_text as the
/// server rendered it. Means print in the objective metric's unit (FormatMetricValue).
void DescribeHoldTuning(const v1::HoldTuning& tuning, absl::Time now, std::ostream& out);

}  // namespace rxfleet::cli
