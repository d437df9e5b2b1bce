#include "agent/reconcile/transition.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/reconcile/failure_reason.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

std::string Hex32(uint32_t word) { return absl::StrFormat("0x%08x", word); }

std::string Hex32Or(const std::optional<uint32_t>& word) { return word ? Hex32(*word) : "?"; }

AdapterTransition::Phase MakePhase(AdapterPhase phase, std::string reason, std::string message) {
  return AdapterTransition::Phase{phase, std::move(reason), std::move(message)};
}

// The register holds the desired settings: in sync, applied or repaired.
AdapterTransition Verified(const TransitionInput& in, const StepResult& step) {
  AdapterTransition t;
  t.last_verified = step.observed;
  t.backoff = BackoffAction::kReset;
  t.requeue_after = in.reconcile_period;
  t.applied_bundle_version = in.bundle_version;
  return t;
}

}  // namespace

AdapterTransition StepTransition(const TransitionInput& in, const StepResult& step) {
  AdapterTransition t;
  const uint32_t address = in.reg0_address;
  switch (step.outcome) {
    case StepOutcome::kInSync:
      t = Verified(in, step);
      if (in.phase != AdapterPhase::kApplied) {
        t.phase = MakePhase(AdapterPhase::kApplied, "AlreadyInSync",
                            absl::StrFormat("0x%04x = %s already as desired: %s", address,
                                            Hex32Or(step.observed), in.hold_text));
      }
      break;
    case StepOutcome::kApplied:
      t = Verified(in, step);
      t.phase = MakePhase(AdapterPhase::kApplied, "Applied",
                          absl::StrFormat("0x%04x: wrote %s and verified: %s", address,
                                          Hex32Or(step.target), in.hold_text));
      break;
    case StepOutcome::kDriftRepaired:
      t = Verified(in, step);
      t.take_repair_token = true;
      t.events.drift_repaired = true;
      t.phase = MakePhase(
          AdapterPhase::kApplied, "DriftRepaired",
          absl::StrFormat("0x%04x had drifted from %s; wrote %s and verified: %s", address,
                          Hex32Or(in.last_verified), Hex32Or(step.target), in.hold_text));
      break;
    case StepOutcome::kDriftHeld:
      t.requeue_after = in.drift_repair_wait;
      t.phase = MakePhase(
          AdapterPhase::kDrifted, "DriftRateLimited",
          absl::StrFormat("0x%04x changed to %s (verified %s); repairs are rate limited "
                          "(%d per %s), next in %s",
                          address, Hex32Or(step.observed), Hex32Or(in.last_verified),
                          in.drift_repair.burst, absl::FormatDuration(in.drift_repair.refill),
                          absl::FormatDuration(in.drift_repair_wait)));
      break;
    case StepOutcome::kAsleep:
      t.events.asleep = true;
      t.backoff = BackoffAction::kReset;
      t.requeue_after = in.reconcile_period;
      t.phase = MakePhase(AdapterPhase::kAsleep, "Asleep",
                          absl::StrFormat("0x%04x reads a sleep pattern (chip asleep or "
                                          "clock-gated); not written, retrying every %s",
                                          address, absl::FormatDuration(in.reconcile_period)));
      break;
    case StepOutcome::kDisabledByDriver:
      t.last_verified = std::optional<uint32_t>();
      t.backoff = BackoffAction::kReset;
      t.requeue_after = in.reconcile_period;
      t.phase = MakePhase(AdapterPhase::kDisabledByDriver, "DisabledByDriver",
                          absl::StrFormat("0x%04x = %s: %s", address, Hex32Or(step.observed),
                                          step.status.message()));
      break;
    case StepOutcome::kInvalidSettings:
      t.phase = MakePhase(AdapterPhase::kInvalidSettings, "InvalidSettings",
                          absl::StrCat(step.status.message(), "; waiting for a policy change"));
      break;
    case StepOutcome::kVerifyMismatch:
      t.last_verified = std::optional<uint32_t>();
      t.events.failure_reason = "verify_mismatch";
      t.backoff = BackoffAction::kAdvance;
      t.requeue_after = in.backoff_delay;
      t.phase = MakePhase(AdapterPhase::kError, "VerifyMismatch",
                          absl::StrFormat("%s; retry in %s", step.status.message(),
                                          absl::FormatDuration(in.backoff_delay)));
      break;
    case StepOutcome::kDeviceError:
      t = FailedTransition(
          in, step.status, "TransferFailed",
          step.wrote ? "verify read failed" : (step.writes > 0 ? "write failed" : "read failed"));
      break;
  }
  t.events.verified = step.verified;
  t.events.applied = step.wrote;
  return t;
}

AdapterTransition FailedTransition(const TransitionInput& in, const absl::Status& status,
                                   std::string_view reason, std::string_view what) {
  AdapterTransition t;
  const std::string failure(FailureReasonFromStatus(status));
  t.events.failure_reason = failure;
  if (absl::IsUnavailable(status)) {
    t.gone = true;
    t.phase = MakePhase(AdapterPhase::kGone, "DeviceGone",
                        absl::StrCat(ToAbslView(what), ": ", status.message()));
    return t;
  }
  t.backoff = BackoffAction::kAdvance;
  t.requeue_after = in.backoff_delay;
  t.phase = MakePhase(AdapterPhase::kError, std::string(reason),
                      absl::StrFormat("%s (%s): %s; retry in %s", what, failure, status.message(),
                                      absl::FormatDuration(in.backoff_delay)));
  return t;
}

AdapterTransition InvalidSettingsTransition(const TransitionInput& in, common::RxAggLayout layout,
                                            const absl::Status& invalid) {
  AdapterTransition t;
  if (in.phase != AdapterPhase::kInvalidSettings) t.events.failure_reason = "invalid_policy";
  t.phase = MakePhase(AdapterPhase::kInvalidSettings, "InvalidSettings",
                      absl::StrCat("desired settings are not valid on layout ",
                                   ToAbslView(common::RxAggLayoutName(layout)), ": ",
                                   invalid.message(), "; waiting for a policy change"));
  return t;
}

}  // namespace rxfleet::agent
