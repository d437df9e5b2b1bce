#include "agent/reconcile/reconciler.h"

#include <memory>

#include "agent/reconcile/backoff.h"
#include "common/chips/rx_agg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/reconcile/fake_device.h"

namespace rxfleet::agent {
namespace {

using common::RxAggLayout;
using ::testing::ElementsAre;
using testing::FakeChip;
using testing::FakeRegisterIo;
using testing::Transfer;

constexpr uint32_t kReg0V3 = 0x6000;
constexpr uint32_t kReg0V1 = 0x8900;

struct Rig {
  Rig(RxAggLayout layout, uint32_t reg0)
      : layout(layout),
        chip(std::make_shared<FakeChip>(std::map<uint32_t, uint32_t>{
            {common::GetRxAggLayoutSpec(layout).reg0_address, reg0}, {0x6004, 0x1F}})),
        io(chip, common::RxAggRegisterAddresses(layout)) {}

  StepResult Step(common::RxAggSettings desired, std::optional<uint32_t> last_verified = {},
                  bool repair_allowed = true) {
    StepInput input;
    input.layout = layout;
    input.desired = desired;
    input.last_verified = last_verified;
    input.drift_repair_allowed = repair_allowed;
    return ReconcileRegisters(io, input);
  }

  RxAggLayout layout;
  std::shared_ptr<FakeChip> chip;
  FakeRegisterIo io;
};

common::RxAggSettings Hold(uint32_t hold_us) {
  common::RxAggSettings s;
  s.hold_us = hold_us;
  return s;
}

TEST(ReconcileRegistersTest, NoOpCostsExactlyOneRead) {
  Rig rig(RxAggLayout::kV3, 0x80FF0114);
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kInSync);
  EXPECT_TRUE(r.verified);
  EXPECT_FALSE(r.wrote);
  EXPECT_EQ(r.observed, 0x80FF0114u);
  EXPECT_THAT(rig.chip->log, ElementsAre(Transfer{Transfer::kRead, kReg0V3, 0x80FF0114}));
}

TEST(ReconcileRegistersTest, ApplyIsReadWriteVerifyOnV3) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kApplied);
  EXPECT_TRUE(r.wrote);
  EXPECT_TRUE(r.verified);
  EXPECT_FALSE(r.drifted);
  EXPECT_EQ(r.observed, 0x80FF0114u);
  EXPECT_THAT(rig.chip->log, ElementsAre(Transfer{Transfer::kRead, kReg0V3, 0x80FF2014},
                                         Transfer{Transfer::kWrite, kReg0V3, 0x80FF0114},
                                         Transfer{Transfer::kRead, kReg0V3, 0x80FF0114}));
  // Register 1 (0x6004) is never touched: no policy field maps to it.
  EXPECT_EQ(rig.chip->reg(0x6004), 0x1Fu);
}

TEST(ReconcileRegistersTest, ApplyOnV1UsesRegister8900AndKeepsOtherFields) {
  Rig rig(RxAggLayout::kV1, 0x80002005);
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kApplied);
  EXPECT_EQ(rig.chip->reg(kReg0V1), 0x80000105u);
  EXPECT_EQ(rig.chip->Reads(), 2);
  EXPECT_EQ(rig.chip->Writes(), 1);
}

TEST(ReconcileRegistersTest, ReadModifyWriteKeepsBits30To24) {
  Rig rig(RxAggLayout::kV3, 0xA0FF2014);  // bit 29 (vendor SW enable) set
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kApplied);
  EXPECT_EQ(rig.chip->reg(kReg0V3), 0xA0FF0114u);
}

TEST(ReconcileRegistersTest, AsleepChipIsNotWrittenAndNotDrift) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);
  rig.chip->asleep = true;
  const StepResult r = rig.Step(Hold(32), /*last_verified=*/0x80FF0114u);
  EXPECT_EQ(r.outcome, StepOutcome::kAsleep);
  EXPECT_FALSE(r.drifted);
  EXPECT_FALSE(r.observed.has_value());
  EXPECT_EQ(rig.chip->Writes(), 0);
  EXPECT_EQ(rig.chip->Reads(), 1);
}

TEST(ReconcileRegistersTest, EaeaPatternCountsAsAsleepToo) {
  Rig rig(RxAggLayout::kV2, 0xEAEAEAEA);
  EXPECT_EQ(rig.Step(Hold(32)).outcome, StepOutcome::kAsleep);
  EXPECT_EQ(rig.chip->Writes(), 0);
}

// 0xFFFFFFFF (a failed or dead read) decoded as "enabled" and 0xffff01ff was written back,
// keeping all ones in the count, buffer and reserved bits.
TEST(ReconcileRegistersTest, AllOnesIsUnreadableAndNeverWrittenBack) {
  for (RxAggLayout layout : {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3}) {
    Rig rig(layout, 0xFFFFFFFF);
    const StepResult r = rig.Step(Hold(32), /*last_verified=*/0x80FF0114u);
    EXPECT_EQ(r.outcome, StepOutcome::kAsleep);
    EXPECT_FALSE(r.observed.has_value());
    EXPECT_FALSE(r.drifted);
    EXPECT_EQ(rig.chip->Writes(), 0);
  }
}

TEST(ReconcileRegistersTest, ChipFallingAsleepAfterTheWriteIsAsleepNotMismatch) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);
  rig.chip->asleep_after_writes = 1;
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kAsleep);
  EXPECT_TRUE(r.wrote);
  EXPECT_FALSE(r.verified);
}

TEST(ReconcileRegistersTest, DisabledByDriverIsLeftAlone) {
  Rig rig(RxAggLayout::kV3, 0x00000000);
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kDisabledByDriver);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status)) << r.status;
  EXPECT_EQ(rig.chip->Writes(), 0);
  EXPECT_EQ(rig.chip->Reads(), 1);
}

TEST(ReconcileRegistersTest, ForceEnableTurnsDriverDisabledAggregationOn) {
  Rig rig(RxAggLayout::kV3, 0x00FF2014);
  common::RxAggSettings s = Hold(32);
  s.enable = true;
  s.force_enable = true;
  const StepResult r = rig.Step(s);
  EXPECT_EQ(r.outcome, StepOutcome::kApplied);
  EXPECT_EQ(rig.chip->reg(kReg0V3), 0x80FF0114u);
}

TEST(ReconcileRegistersTest, DriftIsRepaired) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);  // the driver rewrote its default after ifup
  const StepResult r = rig.Step(Hold(32), /*last_verified=*/0x80FF0114u);
  EXPECT_EQ(r.outcome, StepOutcome::kDriftRepaired);
  EXPECT_TRUE(r.drifted);
  EXPECT_EQ(rig.chip->reg(kReg0V3), 0x80FF0114u);
}

TEST(ReconcileRegistersTest, DriftHeldByRateLimitWritesNothing) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);
  const StepResult r = rig.Step(Hold(32), 0x80FF0114u, /*repair_allowed=*/false);
  EXPECT_EQ(r.outcome, StepOutcome::kDriftHeld);
  EXPECT_TRUE(r.drifted);
  EXPECT_EQ(rig.chip->Writes(), 0);
  EXPECT_EQ(rig.chip->reg(kReg0V3), 0x80FF2014u);
}

TEST(ReconcileRegistersTest, PolicyChangeIsAnApplyNotADrift) {
  Rig rig(RxAggLayout::kV3, 0x80FF0114);
  const StepResult r = rig.Step(Hold(1024), /*last_verified=*/0x80FF0114u,
                                /*repair_allowed=*/false);
  EXPECT_EQ(r.outcome, StepOutcome::kApplied);
  EXPECT_FALSE(r.drifted);
  EXPECT_EQ(rig.chip->reg(kReg0V3), 0x80FF2014u);
}

TEST(ReconcileRegistersTest, VerifyMismatchIsReported) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);
  rig.chip->ignore_writes = true;
  const StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kVerifyMismatch);
  EXPECT_TRUE(r.wrote);
  EXPECT_TRUE(absl::IsDataLoss(r.status));
  EXPECT_THAT(r.status.message(), ::testing::HasSubstr("0x80ff0114"));
  EXPECT_EQ(r.observed, 0x80FF2014u);
}

TEST(ReconcileRegistersTest, TransferErrorsAreReturnedNotRetried) {
  Rig rig(RxAggLayout::kV3, 0x80FF2014);
  rig.chip->fail_next.push_back(absl::DeadlineExceededError("timeout"));
  StepResult r = rig.Step(Hold(32));
  EXPECT_EQ(r.outcome, StepOutcome::kDeviceError);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status));
  EXPECT_EQ(r.reads, 1);
  EXPECT_EQ(r.writes, 0);

  // A stall on the write (first read fine) is returned as is, without a verify read.
  class StallOnWrite : public RegisterIo {
   public:
    absl::StatusOr<uint32_t> Read32(uint32_t) override { return 0x80FF2014u; }
    absl::Status Write32(uint32_t, uint32_t) override {
      return absl::FailedPreconditionError("stall");
    }
  } stalling;
  StepInput input;
  input.layout = RxAggLayout::kV3;
  input.desired = Hold(32);
  r = ReconcileRegisters(stalling, input);
  EXPECT_EQ(r.outcome, StepOutcome::kDeviceError);
  EXPECT_FALSE(r.wrote);
  EXPECT_EQ(r.writes, 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status));
}

TEST(ReconcileRegistersTest, DeviceGoneMidApplyIsUnavailable) {
  class GoneAfterWrite : public RegisterIo {
   public:
    absl::StatusOr<uint32_t> Read32(uint32_t) override {
      if (written) return absl::UnavailableError("no device");
      return 0x80FF2014u;
    }
    absl::Status Write32(uint32_t, uint32_t) override {
      written = true;
      return absl::OkStatus();
    }
    bool written = false;
  } io;
  StepInput input;
  input.layout = RxAggLayout::kV3;
  input.desired = Hold(32);
  const StepResult r = ReconcileRegisters(io, input);
  EXPECT_EQ(r.outcome, StepOutcome::kDeviceError);
  EXPECT_TRUE(r.wrote);
  EXPECT_TRUE(absl::IsUnavailable(r.status));
}

TEST(ReconcileRegistersTest, InvalidSettingsTouchNothing) {
  Rig rig(RxAggLayout::kV1, 0x80002005);
  common::RxAggSettings s;
  s.buffer_kib = 6;  // v1 counts 4 KiB units
  const StepResult r = rig.Step(s);
  EXPECT_EQ(r.outcome, StepOutcome::kInvalidSettings);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status));
  EXPECT_TRUE(rig.chip->log.empty());
}

TEST(ReconcileRegistersTest, OnlyAllowListedRegistersAreEverAccessed) {
  for (RxAggLayout layout : {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3}) {
    const std::vector<uint32_t> allowed = common::RxAggRegisterAddresses(layout);
    for (uint32_t start : {0x80FF2014u, 0x80002005u, 0u, 0xDEADBEEFu, 0x80FF0114u}) {
      Rig rig(layout, start);
      rig.Step(Hold(32), 0x80FF0114u);
      rig.Step(Hold(1024));
      for (const Transfer& t : rig.chip->log) {
        EXPECT_THAT(allowed, ::testing::Contains(t.address));
        EXPECT_EQ(t.address, common::GetRxAggLayoutSpec(layout).reg0_address);
      }
      EXPECT_EQ(rig.chip->refused, 0);
    }
  }
}

TEST(ReconcileRegistersTest, FakeRegisterIoRefusesAddressesOutsideTheAllowList) {
  auto chip = std::make_shared<FakeChip>(std::map<uint32_t, uint32_t>{{0xC004, 0}});
  FakeRegisterIo io(chip, common::RxAggRegisterAddresses(RxAggLayout::kV3));
  EXPECT_TRUE(absl::IsPermissionDenied(io.Write32(0xC004, 0xFFFFFFFF)));
  EXPECT_TRUE(absl::IsPermissionDenied(io.Read32(0x8908).status()));
  EXPECT_TRUE(chip->log.empty());
  EXPECT_EQ(chip->reg(0xC004), 0u);
}

TEST(BackoffTest, GrowsExponentiallyAndCaps) {
  Backoff backoff({absl::Seconds(1), absl::Seconds(10), 2.0});
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(1));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(2));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(4));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(8));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(10));
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(10));
  EXPECT_EQ(backoff.failures(), 6u);
  for (int i = 0; i < 200; ++i) backoff.NextDelay();
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(10));
  backoff.Reset();
  EXPECT_EQ(backoff.NextDelay(), absl::Seconds(1));
}

TEST(BackoffTest, SanitisesBadPolicies) {
  Backoff backoff({absl::ZeroDuration(), absl::ZeroDuration(), 0.5});
  EXPECT_GT(backoff.NextDelay(), absl::ZeroDuration());
  EXPECT_EQ(backoff.NextDelay(), backoff.policy().max);
}

TEST(RepairRateLimiterTest, BurstThenRefill) {
  RepairRateLimiter limiter({2, absl::Minutes(1)});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(limiter.TryAcquire(t0));
  EXPECT_TRUE(limiter.TryAcquire(t0));
  EXPECT_FALSE(limiter.TryAcquire(t0 + absl::Seconds(30)));
  EXPECT_EQ(limiter.NextAvailable(t0 + absl::Seconds(30)), t0 + absl::Minutes(1));
  EXPECT_TRUE(limiter.TryAcquire(t0 + absl::Minutes(1)));
  EXPECT_FALSE(limiter.TryAcquire(t0 + absl::Minutes(1)));
  // Refill never exceeds the burst.
  EXPECT_TRUE(limiter.TryAcquire(t0 + absl::Hours(1)));
  EXPECT_TRUE(limiter.TryAcquire(t0 + absl::Hours(1)));
  EXPECT_FALSE(limiter.TryAcquire(t0 + absl::Hours(1)));
}

}  // namespace
}  // namespace rxfleet::agent
