#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "agent/usb/register_io.h"
#include "common/chips/rx_agg.h"

namespace rxfleet::agent {

/// What one reconcile step of one adapter found and did. See ReconcileRegisters.
enum class StepOutcome : uint8_t {
  kInSync,            ///< 1 read: the register already holds the desired settings
  kApplied,           ///< read, write, verify read: desired settings written and verified
  kDriftRepaired,     ///< like kApplied, after the register had changed since it was verified
  kDriftHeld,         ///< drift found, but repairing it now is not allowed (rate limit); no write
  kAsleep,            ///< a read returned a sleep pattern (0xDEADBEEF, 0xEAEAEAEA); no write
  kDisabledByDriver,  ///< EN = 0 and the settings do not force it on; no write
  kInvalidSettings,   ///< the settings cannot be represented on the layout; no device access
  kVerifyMismatch,    ///< written, but the read-back differs from what was written
  kDeviceError,       ///< a transfer failed (see StepResult::status)
};

struct StepInput {
  common::RxAggLayout layout = common::RxAggLayout::kV3;
  /// Desired reg 0 fields; unset fields keep the register's value (read-modify-write).
  common::RxAggSettings desired;
  /// The reg 0 word the last step verified on this device (read back equal to its target), if
  /// the adapter was in sync. A register that no longer holds it has drifted: someone else
  /// (the driver re-initialising the chip after interface up or resume) rewrote it. When the
  /// register still holds it but the target changed, the policy changed: that is an apply, not a
  /// drift repair.
  std::optional<uint32_t> last_verified;
  /// False forbids repairing drift now (the caller's rate limit); an ordinary apply (policy
  /// change, first contact) is always allowed.
  bool drift_repair_allowed = true;
};

struct StepResult {
  StepOutcome outcome = StepOutcome::kDeviceError;
  /// The last reg 0 word read that is a real register value (sleep patterns excluded): the
  /// verify read after a write, else the first read.
  std::optional<uint32_t> observed;
  /// The word the settings ask for, given the register's current value; set once computed.
  std::optional<uint32_t> target;
  /// True if the register differed from last_verified (drift), whether repaired or held.
  bool drifted = false;
  /// A write was issued (and accepted by the device).
  bool wrote = false;
  /// A read compared the register with the target (the no-op check or the verify read).
  bool verified = false;
  /// Transfers issued, for accounting and tests.
  int reads = 0;
  int writes = 0;
  /// Why, for kDeviceError (the RegisterIo error), kInvalidSettings (InvalidArgument naming the
  /// field), kDisabledByDriver (FailedPrecondition from common::ApplyRxAggSettings) and
  /// kVerifyMismatch (DataLoss naming written and read words). OK otherwise.
  absl::Status status;
};

/// One level-based reconcile step of one adapter's RX aggregation register 0 (0x8900 on layout
/// v1, 0x6000 on v2/v3; rtw89 usb.h). Pure decision logic over a RegisterIo: never sleeps,
/// never retries, never touches any other register (register 1 at 0x6004 is not written: no
/// policy field maps to it), so it works unchanged against the real device and an in-memory fake.
///
///  1. Validate `desired` for the layout (common::ValidateRxAggSettingsForLayout); invalid ->
///     kInvalidSettings without any transfer.
///  2. Read reg 0. Error -> kDeviceError. Sleep pattern (common::IsAsleepPattern) -> kAsleep:
///     the value is not decoded, not compared and never written back, and is not drift.
///  3. target = common::ApplyRxAggSettings(layout, word, desired): only the fields the settings
///     set change; bits 30:24 are kept. FailedPrecondition (driver left EN = 0 and the settings
///     do not force it) -> kDisabledByDriver, no write.
///  4. word == target -> kInSync (one read in total).
///  5. Drift is word != last_verified while last_verified is set; if drift repair is not
///     allowed -> kDriftHeld, no write.
///  6. Write target, read back: equal -> kApplied / kDriftRepaired; sleep pattern -> kAsleep;
///     another word -> kVerifyMismatch; a failed transfer -> kDeviceError (wrote tells whether
///     the write went out).
StepResult ReconcileRegisters(RegisterIo& io, const StepInput& input);

}  // namespace rxfleet::agent
