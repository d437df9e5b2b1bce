#include "agent/reconcile/transition.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::HasSubstr;
using Verified = std::optional<std::optional<uint32_t>>;

constexpr absl::Duration kPeriod = absl::Seconds(10);
constexpr absl::Duration kBackoff = absl::Seconds(4);
constexpr absl::Duration kRepairWait = absl::Seconds(30);

TransitionInput Input(AdapterPhase phase) {
  TransitionInput in;
  in.phase = phase;
  in.last_verified = 0x80ff2014;
  in.reg0_address = 0x6000;
  in.hold_text = "hold 32 us (policy fast)";
  in.bundle_version = 7;
  in.reconcile_period = kPeriod;
  in.backoff_delay = kBackoff;
  in.drift_repair_wait = kRepairWait;
  in.drift_repair = {2, absl::Minutes(1)};
  return in;
}

StepResult Step(StepOutcome outcome, std::optional<uint32_t> observed,
                std::optional<uint32_t> target, bool wrote, bool verified,
                absl::Status status = absl::OkStatus()) {
  StepResult step;
  step.outcome = outcome;
  step.observed = observed;
  step.target = target;
  step.wrote = wrote;
  step.writes = wrote ? 1 : 0;
  step.verified = verified;
  step.status = std::move(status);
  return step;
}

// One row: the phase before, what the step found, and everything the transition must say.
struct Row {
  std::string name;
  AdapterPhase before;
  StepResult step;
  std::optional<AdapterPhase> phase;  // unset: the phase is kept
  std::string reason;
  std::string message_part;
  std::optional<absl::Duration> requeue_after;
  BackoffAction backoff;
  bool take_repair_token;
  Verified last_verified;
  std::optional<uint64_t> bundle_version;
  AdapterEvents events;
  bool gone = false;
};

AdapterEvents Events(bool applied, bool verified, bool drift_repaired, bool asleep,
                     std::optional<std::string> failure) {
  AdapterEvents e;
  e.applied = applied;
  e.verified = verified;
  e.drift_repaired = drift_repaired;
  e.asleep = asleep;
  e.failure_reason = std::move(failure);
  return e;
}

std::vector<Row> Rows() {
  const uint32_t driver = 0x80ff2014;
  const uint32_t fast = 0x80200020;
  return {
      {"in_sync_from_pending", AdapterPhase::kPending,
       Step(StepOutcome::kInSync, fast, fast, false, true), AdapterPhase::kApplied, "AlreadyInSync",
       "0x6000 = 0x80200020 already as desired: hold 32 us (policy fast)", kPeriod,
       BackoffAction::kReset, false, Verified(fast), 7,
       Events(false, true, false, false, std::nullopt)},
      {"in_sync_while_applied_keeps_the_phase", AdapterPhase::kApplied,
       Step(StepOutcome::kInSync, fast, fast, false, true), std::nullopt, "", "", kPeriod,
       BackoffAction::kReset, false, Verified(fast), 7,
       Events(false, true, false, false, std::nullopt)},
      {"applied", AdapterPhase::kPending, Step(StepOutcome::kApplied, fast, fast, true, true),
       AdapterPhase::kApplied, "Applied", "0x6000: wrote 0x80200020 and verified", kPeriod,
       BackoffAction::kReset, false, Verified(fast), 7,
       Events(true, true, false, false, std::nullopt)},
      {"drift_repaired_takes_a_token", AdapterPhase::kApplied,
       Step(StepOutcome::kDriftRepaired, fast, fast, true, true), AdapterPhase::kApplied,
       "DriftRepaired", "0x6000 had drifted from 0x80ff2014; wrote 0x80200020", kPeriod,
       BackoffAction::kReset, true, Verified(fast), 7,
       Events(true, true, true, false, std::nullopt)},
      {"drift_held_waits_for_a_token", AdapterPhase::kApplied,
       Step(StepOutcome::kDriftHeld, fast, driver, false, false), AdapterPhase::kDrifted,
       "DriftRateLimited", "repairs are rate limited (2 per 1m), next in 30s", kRepairWait,
       BackoffAction::kKeep, false, Verified(), std::nullopt,
       Events(false, false, false, false, std::nullopt)},
      {"asleep", AdapterPhase::kApplied,
       Step(StepOutcome::kAsleep, std::nullopt, std::nullopt, false, false), AdapterPhase::kAsleep,
       "Asleep", "not written, retrying every 10s", kPeriod, BackoffAction::kReset, false,
       Verified(), std::nullopt, Events(false, false, false, true, std::nullopt)},
      {"disabled_by_driver_forgets_the_verified_word", AdapterPhase::kApplied,
       Step(StepOutcome::kDisabledByDriver, 0x00ff2014, std::nullopt, false, false,
            absl::FailedPreconditionError("EN is 0")),
       AdapterPhase::kDisabledByDriver, "DisabledByDriver", "0x6000 = 0x00ff2014: EN is 0", kPeriod,
       BackoffAction::kReset, false, Verified(std::optional<uint32_t>()), std::nullopt,
       Events(false, false, false, false, std::nullopt)},
      {"invalid_settings_is_terminal", AdapterPhase::kPending,
       Step(StepOutcome::kInvalidSettings, std::nullopt, std::nullopt, false, false,
            absl::InvalidArgumentError("hold 9000us is out of range")),
       AdapterPhase::kInvalidSettings, "InvalidSettings",
       "hold 9000us is out of range; waiting for a policy change", std::nullopt,
       BackoffAction::kKeep, false, Verified(), std::nullopt,
       Events(false, false, false, false, std::nullopt)},
      {"verify_mismatch_backs_off", AdapterPhase::kApplied,
       Step(StepOutcome::kVerifyMismatch, driver, fast, true, true,
            absl::DataLossError("read back 0x80ff2014")),
       AdapterPhase::kError, "VerifyMismatch", "read back 0x80ff2014; retry in 4s", kBackoff,
       BackoffAction::kAdvance, false, Verified(std::optional<uint32_t>()), std::nullopt,
       Events(true, true, false, false, "verify_mismatch")},
      {"read_timeout_backs_off", AdapterPhase::kApplied,
       Step(StepOutcome::kDeviceError, std::nullopt, std::nullopt, false, false,
            absl::DeadlineExceededError("control transfer timed out")),
       AdapterPhase::kError, "TransferFailed",
       "read failed (timeout): control transfer timed out; retry in 4s", kBackoff,
       BackoffAction::kAdvance, false, Verified(), std::nullopt,
       Events(false, false, false, false, "timeout")},
      {"verify_read_stall_after_a_write", AdapterPhase::kPending,
       Step(StepOutcome::kDeviceError, driver, fast, true, false,
            absl::FailedPreconditionError("stall")),
       AdapterPhase::kError, "TransferFailed", "verify read failed (stall): stall", kBackoff,
       BackoffAction::kAdvance, false, Verified(), std::nullopt,
       Events(true, false, false, false, "stall")},
      {"device_gone_mid_pass", AdapterPhase::kApplied,
       Step(StepOutcome::kDeviceError, std::nullopt, std::nullopt, false, false,
            absl::UnavailableError("no device")),
       AdapterPhase::kGone, "DeviceGone", "read failed: no device", std::nullopt,
       BackoffAction::kKeep, false, Verified(), std::nullopt,
       Events(false, false, false, false, "no_device"), /*gone=*/true},
  };
}

class StepTransitionTest : public ::testing::TestWithParam<Row> {};

TEST_P(StepTransitionTest, GivesTheNextState) {
  const Row& row = GetParam();
  const AdapterTransition t = StepTransition(Input(row.before), row.step);
  if (row.phase) {
    ASSERT_TRUE(t.phase.has_value());
    EXPECT_EQ(t.phase->phase, *row.phase);
    EXPECT_EQ(t.phase->reason, row.reason);
    EXPECT_THAT(t.phase->message, HasSubstr(row.message_part));
  } else {
    EXPECT_FALSE(t.phase.has_value());
  }
  EXPECT_EQ(t.gone, row.gone);
  EXPECT_EQ(t.requeue_after, row.requeue_after);
  EXPECT_EQ(t.backoff, row.backoff);
  EXPECT_EQ(t.take_repair_token, row.take_repair_token);
  EXPECT_EQ(t.last_verified, row.last_verified);
  EXPECT_EQ(t.applied_bundle_version, row.bundle_version);
  EXPECT_EQ(t.events.applied, row.events.applied);
  EXPECT_EQ(t.events.verified, row.events.verified);
  EXPECT_EQ(t.events.drift_repaired, row.events.drift_repaired);
  EXPECT_EQ(t.events.asleep, row.events.asleep);
  EXPECT_EQ(t.events.failure_reason, row.events.failure_reason);
}

INSTANTIATE_TEST_SUITE_P(Outcomes, StepTransitionTest, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& row) { return row.param.name; });

TEST(FailedTransitionTest, OpenRefusedBacksOffWithTheReason) {
  const AdapterTransition t =
      FailedTransition(Input(AdapterPhase::kPending), absl::PermissionDeniedError("EACCES"),
                       "OpenFailed", "cannot open the device");
  ASSERT_TRUE(t.phase.has_value());
  EXPECT_EQ(t.phase->phase, AdapterPhase::kError);
  EXPECT_EQ(t.phase->reason, "OpenFailed");
  EXPECT_EQ(t.phase->message, "cannot open the device (permission_denied): EACCES; retry in 4s");
  EXPECT_EQ(t.requeue_after, kBackoff);
  EXPECT_EQ(t.backoff, BackoffAction::kAdvance);
  EXPECT_EQ(t.events.failure_reason, "permission_denied");
  EXPECT_FALSE(t.gone);
}

TEST(FailedTransitionTest, OpenOfAVanishedDeviceMarksItGone) {
  const AdapterTransition t =
      FailedTransition(Input(AdapterPhase::kApplied), absl::UnavailableError("LIBUSB_NO_DEVICE"),
                       "OpenFailed", "cannot open the device");
  EXPECT_TRUE(t.gone);
  ASSERT_TRUE(t.phase.has_value());
  EXPECT_EQ(t.phase->reason, "DeviceGone");
  EXPECT_EQ(t.phase->message, "cannot open the device: LIBUSB_NO_DEVICE");
  EXPECT_EQ(t.requeue_after, std::nullopt);
  EXPECT_EQ(t.backoff, BackoffAction::kKeep);
  EXPECT_EQ(t.events.failure_reason, "no_device");
}

TEST(InvalidSettingsTransitionTest, CountsTheFailureOnlyOnEntering) {
  const absl::Status invalid = absl::InvalidArgumentError("hold 9000us is out of range");
  const AdapterTransition entering =
      InvalidSettingsTransition(Input(AdapterPhase::kApplied), common::RxAggLayout::kV3, invalid);
  ASSERT_TRUE(entering.phase.has_value());
  EXPECT_EQ(entering.phase->phase, AdapterPhase::kInvalidSettings);
  EXPECT_EQ(entering.phase->reason, "InvalidSettings");
  EXPECT_THAT(entering.phase->message, HasSubstr("hold 9000us is out of range; waiting for a "
                                                 "policy change"));
  EXPECT_EQ(entering.events.failure_reason, "invalid_policy");
  EXPECT_EQ(entering.requeue_after, std::nullopt);

  const AdapterTransition staying = InvalidSettingsTransition(Input(AdapterPhase::kInvalidSettings),
                                                              common::RxAggLayout::kV3, invalid);
  EXPECT_EQ(staying.events.failure_reason, std::nullopt);
  EXPECT_EQ(staying.requeue_after, std::nullopt);
}

TEST(BackoffTest, PeekDelayIsTheNextDelayWithoutRecordingAFailure) {
  Backoff backoff({absl::Seconds(1), absl::Seconds(8), 2.0});
  EXPECT_EQ(backoff.PeekDelay(), absl::Seconds(1));
  EXPECT_EQ(backoff.PeekDelay(), absl::Seconds(1));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(1));
  EXPECT_EQ(backoff.PeekDelay(), absl::Seconds(2));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(2));
  EXPECT_EQ(backoff.failures(), 2u);
}

}  // namespace
}  // namespace rxfleet::agent
