#pragma once

// The rules of an Experiment document, shared by the parser (which adds positions) and
// ValidateExperiment (common/experiment/experiment.cc). The rules on single fields below are
// also used by documents with the same fields (kind: HoldTuning, common/tuning/).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/experiment/experiment.h"

namespace rxfleet::experiments {

/// A rule broken by an experiment: the field path ("spec.arms[1].weight") and the message.
struct FieldError {
  std::string field;
  std::string message;
};

using CheckResult = std::optional<FieldError>;

/// windowLength: whole seconds in 1s..1h ("spec.windowLength").
CheckResult CheckWindowLength(absl::Duration window_length);

/// burnIn: finite and not negative ("spec.burnIn").
CheckResult CheckBurnIn(absl::Duration burn_in);

/// The switchback period: periodLength set ("is required for the switchback design"), at least
/// windowLength and a multiple of it ("spec.periodLength"); burnIn + windowLength <=
/// periodLength ("spec.burnIn": every period keeps a full window).
CheckResult CheckSwitchbackPeriod(absl::Duration window_length, absl::Duration period_length,
                                  absl::Duration burn_in);

/// Guardrails: at most 32; thresholds finite, >= 0 and <= 1 for ratios; minAdapters
/// 2..100000; minWindows 1..10000000; (metric, op) unique. Fields "spec.guardrails[i]...".
CheckResult CheckGuardrails(const std::vector<Guardrail>& guardrails);

/// Segment keys: at most 4, unique, usb_speed, chip, host or a valid host label key
/// ("spec.segments[i]"). `host_allowed` only changes the message of an invalid key, which lists
/// the keys the document accepts; the caller refuses `host` itself (hold tunings do).
CheckResult CheckSegmentKeys(const std::vector<std::string>& keys, bool host_allowed = true);

/// minAdaptersPerArm in 2..100000 and minWindowsPerArm in 1..10000000.
CheckResult CheckArmMinimums(uint32_t min_adapters, uint32_t min_windows);

/// Every rule of the document, in document order; the first broken rule, or nullopt.
CheckResult CheckExperiment(const Experiment& e);

}  // namespace rxfleet::experiments
