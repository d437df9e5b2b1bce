#include "agent/reconcile/reconciler.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace rxfleet::agent {
namespace {

// A word no register read of a live chip returns: the asleep patterns (common/chips/rx_agg.h)
// and all ones, what a failed or dead read often looks like (decoded, it would read as
// "enabled" with every count, buffer and reserved bit set). Such a word is unreadable: never
// decoded, never the base of a read-modify-write.
bool Unreadable(uint32_t word) { return word == 0xFFFFFFFFu || common::IsAsleepPattern(word); }

}  // namespace

StepResult ReconcileRegisters(RegisterIo& io, const StepInput& input) {
  StepResult result;
  if (absl::Status valid = common::ValidateRxAggSettingsForLayout(input.layout, input.desired);
      !valid.ok()) {
    result.outcome = StepOutcome::kInvalidSettings;
    result.status = std::move(valid);
    return result;
  }
  const uint32_t address = common::GetRxAggLayoutSpec(input.layout).reg0_address;

  ++result.reads;
  absl::StatusOr<uint32_t> word = io.Read32(address);
  if (!word.ok()) {
    result.outcome = StepOutcome::kDeviceError;
    result.status = word.status();
    return result;
  }
  if (Unreadable(*word)) {
    result.outcome = StepOutcome::kAsleep;
    return result;
  }
  result.observed = *word;

  absl::StatusOr<uint32_t> target = common::ApplyRxAggSettings(input.layout, *word, input.desired);
  if (!target.ok()) {
    result.status = target.status();
    result.outcome = absl::IsFailedPrecondition(target.status()) ? StepOutcome::kDisabledByDriver
                                                                 : StepOutcome::kInvalidSettings;
    return result;
  }
  result.target = *target;
  result.verified = true;
  if (*word == *target) {
    result.outcome = StepOutcome::kInSync;
    return result;
  }

  result.drifted = input.last_verified.has_value() && *word != *input.last_verified;
  if (result.drifted && !input.drift_repair_allowed) {
    result.outcome = StepOutcome::kDriftHeld;
    result.verified = false;
    return result;
  }

  ++result.writes;
  if (absl::Status written = io.Write32(address, *target); !written.ok()) {
    result.outcome = StepOutcome::kDeviceError;
    result.status = std::move(written);
    result.verified = false;
    return result;
  }
  result.wrote = true;

  ++result.reads;
  absl::StatusOr<uint32_t> readback = io.Read32(address);
  if (!readback.ok()) {
    result.outcome = StepOutcome::kDeviceError;
    result.status = readback.status();
    result.verified = false;
    return result;
  }
  if (Unreadable(*readback)) {
    result.outcome = StepOutcome::kAsleep;
    result.verified = false;
    return result;
  }
  result.observed = *readback;
  if (*readback != *target) {
    result.outcome = StepOutcome::kVerifyMismatch;
    result.status = absl::DataLossError(
        absl::StrFormat("verify of register 0x%04x failed: wrote 0x%08x, read back 0x%08x", address,
                        *target, *readback));
    return result;
  }
  result.outcome = result.drifted ? StepOutcome::kDriftRepaired : StepOutcome::kApplied;
  return result;
}

}  // namespace rxfleet::agent
