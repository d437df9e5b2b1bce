#pragma once

// The state machine of one adapter's reconcile pass, as pure functions: the phase before the
// pass and what the pass found (a StepResult, a device that would not open, or settings the
// layout cannot hold) give the next phase with its reason and message, when to requeue, what
// happens to the backoff, the drift-repair token and the last verified word, and the events
// for observers. AdapterManager applies the result to its record; nothing here does I/O, reads
// a clock or changes state, so every transition is unit-tested as a table
// (tests/agent/reconcile/transition_test.cc).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/reconcile/adapter_snapshot.h"
#include "agent/reconcile/backoff.h"
#include "agent/reconcile/reconciler.h"
#include "common/chips/rx_agg.h"

namespace rxfleet::agent {

/// The adapter's state a pass starts from, and the facts the transition's messages need.
struct TransitionInput {
  /// Phase before the pass.
  AdapterPhase phase = AdapterPhase::kPending;
  /// The reg 0 word last verified on the device, as given to the step
  /// (StepInput::last_verified).
  std::optional<uint32_t> last_verified;
  /// Address of register 0 on the adapter's layout (0x8900 on v1, 0x6000 on v2/v3).
  uint32_t reg0_address = 0;
  /// The desired settings in words, e.g. "hold 32 us (policy fast)" or "hold unchanged".
  std::string hold_text;
  /// Bundle version the desired settings came from (0 without a bundle).
  uint64_t bundle_version = 0;
  /// AdapterManagerOptions::reconcile_period. > 0.
  absl::Duration reconcile_period = absl::Seconds(10);
  /// The delay the adapter's backoff gives for the next failure (Backoff::PeekDelay).
  absl::Duration backoff_delay = absl::Seconds(1);
  /// Time until the drift-repair rate limit allows the next repair; zero when allowed now.
  absl::Duration drift_repair_wait = absl::ZeroDuration();
  /// The rate limit itself, for the message of a held repair.
  RepairRatePolicy drift_repair;
};

/// What happens to the adapter's backoff.
enum class BackoffAction : uint8_t {
  kKeep,     ///< unchanged
  kReset,    ///< the pass succeeded: forget the failures
  kAdvance,  ///< one more failure: Backoff::NextDelay (equal to TransitionInput::backoff_delay)
};

/// The next state of one adapter after a pass.
struct AdapterTransition {
  /// New phase, reason (one CamelCase word, see AdapterSnapshot::reason) and message; unset
  /// keeps the current ones (an adapter already applied that is still in sync).
  struct Phase {
    AdapterPhase phase = AdapterPhase::kPending;
    std::string reason;
    std::string message;
    friend bool operator==(const Phase&, const Phase&) = default;
  };
  std::optional<Phase> phase;
  /// The device vanished during the pass (Unavailable): the adapter is marked gone (phase kGone
  /// with `phase`'s reason and message) and a rescan confirms it.
  bool gone = false;
  /// When the adapter is due again, from now; unset = not before the policies change (terminal
  /// invalid settings) or never (gone).
  std::optional<absl::Duration> requeue_after;
  BackoffAction backoff = BackoffAction::kKeep;
  /// True to take one drift-repair token (a drift was repaired).
  bool take_repair_token = false;
  /// Set to replace the last verified word: with the word the pass verified, or with nullopt
  /// to forget it (the register can no longer be trusted to hold it).
  std::optional<std::optional<uint32_t>> last_verified;
  /// Set when the pass verified the desired settings: the bundle version they came from.
  std::optional<uint64_t> applied_bundle_version;
  /// What the pass did, for counters and observers.
  AdapterEvents events;
};

/// The transition after ReconcileRegisters returned `step`:
///   kInSync            -> applied ("AlreadyInSync", only when the phase was another), period;
///   kApplied           -> applied ("Applied"), period;
///   kDriftRepaired     -> applied ("DriftRepaired"), period, one repair token taken;
///   kDriftHeld         -> drifted ("DriftRateLimited"), when a repair token is available;
///   kAsleep            -> asleep ("Asleep"), period;
///   kDisabledByDriver  -> disabled_by_driver ("DisabledByDriver"), period;
///   kInvalidSettings   -> invalid_settings ("InvalidSettings"), not requeued;
///   kVerifyMismatch    -> error ("VerifyMismatch", failure verify_mismatch), backoff;
///   kDeviceError       -> FailedTransition with "TransferFailed".
/// Successes (in sync, applied, repaired, asleep, disabled) reset the backoff; the verified
/// word is kept after in sync/applied/repaired and forgotten after disabled and mismatch.
AdapterTransition StepTransition(const TransitionInput& input, const StepResult& step);

/// The transition after a failed open or transfer with `status`: Unavailable -> gone
/// ("DeviceGone", a rescan is requested); anything else -> error with `reason` ("OpenFailed",
/// "TransferFailed"), again after the backoff. The failure reason is
/// FailureReasonFromStatus(status); `what` says what failed ("cannot open the device").
AdapterTransition FailedTransition(const TransitionInput& input, const absl::Status& status,
                                   std::string_view reason, std::string_view what);

/// The transition when the desired settings are not valid on `layout` (`invalid`, from
/// common::ValidateRxAggSettingsForLayout), before any device access: invalid_settings, not
/// requeued until the policies change; the failure (invalid_policy) counts once, on entering
/// the phase.
AdapterTransition InvalidSettingsTransition(const TransitionInput& input,
                                            common::RxAggLayout layout,
                                            const absl::Status& invalid);

}  // namespace rxfleet::agent
