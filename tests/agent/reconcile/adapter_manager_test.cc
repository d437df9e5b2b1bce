#include "agent/reconcile/adapter_manager.h"

#include <memory>
#include <string>
#include <vector>

#include "agent/reconcile/policy_set.h"
#include "common/policy/policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/reconcile/fake_device.h"

namespace rxfleet::agent {
namespace {

using common::UsbSpeed;
using testing::FakeChip;
using testing::FakeDeviceSource;
using ::testing::HasSubstr;
using testing::MakeDevice;

constexpr absl::Duration kPeriod = absl::Seconds(10);

class Recorder : public AdapterObserver {
 public:
  void OnAdapterChanged(const AdapterSnapshot& snapshot, const AdapterEvents& events,
                        bool status_changed) override {
    changes.push_back({snapshot.id, AdapterPhaseName(snapshot.phase), status_changed});
    if (events.drift_repaired) ++drift_repairs;
  }
  void OnAdapterRemoved(const std::string& adapter_id) override { removed.push_back(adapter_id); }

  struct Change {
    std::string id;
    std::string_view phase;
    bool status_changed;
  };
  std::vector<Change> changes;
  std::vector<std::string> removed;
  int drift_repairs = 0;
};

class AdapterManagerTest : public ::testing::Test {
 protected:
  AdapterManagerTest() {
    AdapterManagerOptions options;
    options.reconcile_period = kPeriod;
    options.backoff = {absl::Seconds(1), absl::Seconds(8), 2.0};
    options.drift_repair = {2, absl::Minutes(1)};
    options.gone_retention = absl::Minutes(5);
    options.monotonic_now = [this] { return mono_; };
    options.wall_now = [this] { return absl::FromUnixSeconds(1'800'000'000) + (mono_ - t0_); };
    options.log = [this](LogLevel, std::string_view line) { log_.emplace_back(line); };
    // No sysfs: ids fall back to the device's own port path.
    manager_ = std::make_unique<AdapterManager>(source_, UsbSysfs("/nonexistent-sysfs"), options);
    manager_->AddObserver(&recorder_);
  }

  // Adds an RTL8922AU (v3) at SuperSpeed on 2-2 with the driver's 0x80FF2014.
  std::shared_ptr<FakeChip> AddV3(UsbSpeed speed = UsbSpeed::kSuper, uint8_t bus = 2,
                                  uint8_t port = 2, uint8_t devnum = 3,
                                  uint32_t reg0 = 0x80FF2014) {
    source_.devices.push_back(MakeDevice(0x0bda, 0x8912, speed, bus, port, devnum));
    auto chip =
        std::make_shared<FakeChip>(std::map<uint32_t, uint32_t>{{0x6000, reg0}, {0x6004, 0x1F}});
    source_.chips[source_.devices.back().port_path] = chip;
    return chip;
  }

  AdapterSnapshot Get(const std::string& id) {
    auto s = manager_->Find(id);
    EXPECT_TRUE(s.has_value()) << id;
    return s.value_or(AdapterSnapshot{});
  }

  void Advance(absl::Duration d) { mono_ += d; }

  const absl::Time t0_ = absl::FromUnixSeconds(5000);
  absl::Time mono_ = t0_;
  FakeDeviceSource source_;
  Recorder recorder_;
  std::vector<std::string> log_;
  std::unique_ptr<AdapterManager> manager_;
};

TEST_F(AdapterManagerTest, AppliesBuiltinDefaultThenChecksWithOneRead) {
  auto chip = AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kPending);
  EXPECT_EQ(manager_->ReconcileDue(), t0_ + kPeriod);

  AdapterSnapshot s = Get("port-2-2");
  EXPECT_EQ(s.phase, AdapterPhase::kApplied);
  EXPECT_EQ(s.reason, "Applied");
  EXPECT_EQ(s.chip, "rtl8922au");
  EXPECT_EQ(s.observed_reg0, 0x80FF0114u);
  ASSERT_TRUE(s.desired.has_value());
  EXPECT_EQ(s.desired->resolved.hold_us->value, 32u);
  EXPECT_EQ(s.desired->resolved.hold_us->provenance.ToString(), "builtin-default");
  EXPECT_EQ(s.counters.applies, 1u);
  EXPECT_EQ(s.counters.verifies, 1u);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);
  // The handle was opened with the layout's allow-list only.
  ASSERT_EQ(source_.opens.size(), 1u);
  EXPECT_EQ(source_.opens[0].second, (std::vector<uint32_t>{0x6000, 0x6004}));

  // Not due yet: nothing happens.
  chip->log.clear();
  manager_->ReconcileDue();
  EXPECT_TRUE(chip->log.empty());
  // Due: one read, no log line for the unchanged state.
  const size_t lines = log_.size();
  Advance(kPeriod);
  manager_->ReconcileDue();
  EXPECT_EQ(chip->Reads(), 1);
  EXPECT_EQ(chip->Writes(), 0);
  EXPECT_EQ(log_.size(), lines);
  EXPECT_EQ(Get("port-2-2").counters.verifies, 2u);
}

TEST_F(AdapterManagerTest, HighSpeedKeepsTheDriverDefaultWithoutWriting) {
  auto chip = AddV3(UsbSpeed::kHigh, 3, 3, 4);
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  const AdapterSnapshot s = Get("port-3-3");
  EXPECT_EQ(s.phase, AdapterPhase::kApplied);
  EXPECT_EQ(s.reason, "AlreadyInSync");
  EXPECT_EQ(chip->Writes(), 0);
  EXPECT_EQ(chip->Reads(), 1);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF2014u);
  EXPECT_EQ(s.desired->resolved.hold_us->value, 1024u);
}

TEST_F(AdapterManagerTest, OtherDevicesAreReportedButNeverOpened) {
  source_.devices.push_back(MakeDevice(0x0cf3, 0x9271, UsbSpeed::kSuper, 2, 1, 2));  // Atheros
  source_.devices.push_back(MakeDevice(0x0bda, 0x1a2b, UsbSpeed::kHigh, 1, 4, 5));   // storage
  source_.devices.push_back(MakeDevice(0x0bda, 0x1234, UsbSpeed::kHigh, 1, 5, 6));   // unknown
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  manager_->ReconcileAllNow();
  EXPECT_TRUE(source_.opens.empty());
  EXPECT_EQ(Get("port-2-1").phase, AdapterPhase::kOtherVendor);
  EXPECT_EQ(Get("port-1-4").phase, AdapterPhase::kStorageMode);
  EXPECT_EQ(Get("port-1-5").phase, AdapterPhase::kUnsupported);
  ASSERT_FALSE(Get("port-1-4").diagnoses.empty());
  EXPECT_EQ(Get("port-1-4").diagnoses[0].code, "storage_mode");
  // No driver bound in this tree, so nothing says what it is.
  EXPECT_EQ(Get("port-2-1").diagnoses[0].code, "unknown_id_unbound");
  EXPECT_EQ(manager_->ReconcileDue(), absl::InfiniteFuture());
}

TEST_F(AdapterManagerTest, DriftIsRepairedAndRateLimited) {
  auto chip = AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  ASSERT_EQ(chip->reg(0x6000), 0x80FF0114u);

  // The driver re-initialises the chip (interface up): repaired on the next pass.
  for (int i = 0; i < 2; ++i) {
    chip->Set(0x6000, 0x80FF2014);
    Advance(kPeriod);
    manager_->ReconcileDue();
    EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);
    EXPECT_EQ(Get("port-2-2").reason, "DriftRepaired");
  }
  EXPECT_EQ(Get("port-2-2").counters.drift_repairs, 2u);
  EXPECT_EQ(recorder_.drift_repairs, 2);

  // Burst of 2 used up within 20 s: the third drift is held until a token is back.
  chip->Set(0x6000, 0x80FF2014);
  Advance(kPeriod);
  const absl::Time next = manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kDrifted);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF2014u);
  EXPECT_GT(next, mono_ + kPeriod);
  mono_ = next;
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kApplied);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);
  EXPECT_EQ(Get("port-2-2").counters.drift_repairs, 3u);
}

TEST_F(AdapterManagerTest, FailuresBackOffExponentiallyAndRecover) {
  auto chip = AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  for (int i = 0; i < 5; ++i) chip->fail_next.push_back(absl::DeadlineExceededError("timeout"));
  std::vector<absl::Duration> delays;
  for (int i = 0; i < 5; ++i) {
    const absl::Time next = manager_->ReconcileDue();
    delays.push_back(next - mono_);
    EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kError);
    EXPECT_EQ(Get("port-2-2").last_failure_reason, "timeout");
    mono_ = next;
  }
  EXPECT_EQ(delays,
            (std::vector<absl::Duration>{absl::Seconds(1), absl::Seconds(2), absl::Seconds(4),
                                         absl::Seconds(8), absl::Seconds(8)}));
  EXPECT_EQ(Get("port-2-2").counters.failures, 5u);
  // One log line for the error state, not one per failure.
  EXPECT_EQ(std::count_if(log_.begin(), log_.end(),
                          [](const std::string& l) { return l.find("state=error") != l.npos; }),
            1);
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kApplied);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);
}

TEST_F(AdapterManagerTest, StallAndPermissionErrorsAreReportedWithReasons) {
  AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  source_.open_failures.push_back(absl::PermissionDeniedError("cannot open /dev/bus/usb/002/003"));
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kError);
  EXPECT_EQ(Get("port-2-2").reason, "OpenFailed");
  EXPECT_EQ(Get("port-2-2").last_failure_reason, "permission_denied");
}

TEST_F(AdapterManagerTest, AsleepChipIsRetriedAndAppliedWhenAwake) {
  auto chip = AddV3();
  chip->asleep = true;
  ASSERT_TRUE(manager_->Rescan().ok());
  EXPECT_EQ(manager_->ReconcileDue(), mono_ + kPeriod);
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kAsleep);
  EXPECT_EQ(chip->Writes(), 0);
  Advance(kPeriod);
  manager_->ReconcileDue();
  EXPECT_EQ(chip->Writes(), 0);
  EXPECT_EQ(Get("port-2-2").counters.asleep, 2u);
  chip->asleep = false;
  Advance(kPeriod);
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kApplied);
  EXPECT_EQ(Get("port-2-2").counters.drift_repairs, 0u);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);
}

TEST_F(AdapterManagerTest, DriverDisabledAggregationIsLeftDisabled) {
  auto chip = AddV3(UsbSpeed::kSuper, 2, 2, 3, /*reg0=*/0);
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kDisabledByDriver);
  EXPECT_THAT(Get("port-2-2").message, HasSubstr("disabled by the driver"));
  Advance(kPeriod);
  manager_->ReconcileDue();
  EXPECT_EQ(chip->Writes(), 0);
  EXPECT_EQ(chip->reg(0x6000), 0u);
}

TEST_F(AdapterManagerTest, DeviceGoneMidApplyIsReportedGone) {
  AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  source_.open_failures.push_back(absl::UnavailableError("no device"));
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kGone);
  EXPECT_EQ(Get("port-2-2").reason, "DeviceGone");
  EXPECT_TRUE(manager_->TakeRescanRequest());
  EXPECT_FALSE(manager_->TakeRescanRequest());
  // The rescan still finds it: back to pending and applied.
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kApplied);
}

TEST_F(AdapterManagerTest, HotplugLeaveAndReenumerationKeepTheId) {
  AddV3(UsbSpeed::kHigh, 3, 3, 4);
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  const UsbDeviceInfo old = source_.devices[0];
  source_.devices.clear();
  manager_->PostHotplug(HotplugEvent::kLeft, old);
  manager_->ProcessEvents();
  EXPECT_EQ(Get("port-3-3").phase, AdapterPhase::kGone);
  EXPECT_FALSE(Get("port-3-3").present);
  // A left event for an unknown location is ignored.
  manager_->PostHotplug(HotplugEvent::kLeft, MakeDevice(1, 2, UsbSpeed::kHigh, 9, 9, 9));
  manager_->ProcessEvents();

  // Same port comes back at SuperSpeed with a new devnum (no sysfs peer here, so same path).
  auto chip = AddV3(UsbSpeed::kSuper, 3, 3, 7);
  manager_->PostHotplug(HotplugEvent::kArrived, source_.devices.back());
  manager_->ProcessEvents();
  EXPECT_EQ(Get("port-3-3").phase, AdapterPhase::kPending);
  EXPECT_EQ(Get("port-3-3").reason, "Reenumerated");
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-3-3").phase, AdapterPhase::kApplied);
  EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);
  // Arrival is idempotent.
  manager_->PostHotplug(HotplugEvent::kArrived, source_.devices.back());
  manager_->ProcessEvents();
  EXPECT_EQ(Get("port-3-3").phase, AdapterPhase::kApplied);
}

TEST_F(AdapterManagerTest, GoneAdaptersAreDroppedAfterRetention) {
  AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  source_.devices.clear();
  ASSERT_TRUE(manager_->Rescan().ok());
  EXPECT_EQ(Get("port-2-2").phase, AdapterPhase::kGone);
  const absl::Time next = manager_->ReconcileDue();
  EXPECT_EQ(next, mono_ + absl::Minutes(5));
  mono_ = next;
  manager_->ReconcileDue();
  EXPECT_FALSE(manager_->Find("port-2-2").has_value());
  EXPECT_EQ(recorder_.removed, std::vector<std::string>{"port-2-2"});
}

TEST_F(AdapterManagerTest, LocalPolicyForAHostLabelOverridesTheDefault) {
  auto chip = AddV3();
  auto policies = common::ParsePolicyDocuments(R"(apiVersion: rxfleet/v1
kind: RxAggPolicy
metadata: {name: pi1-long-hold}
spec:
  selector: {matchLabels: {board: pi1}}
  settings: {hold: 1024us}
)",
                                               "pi1.yaml");
  ASSERT_TRUE(policies.ok()) << policies.status();
  manager_->SetPolicies(std::make_shared<const PolicySet>(*policies, std::nullopt));
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ProcessEvents();
  manager_->ReconcileDue();
  EXPECT_EQ(chip->reg(0x6000), 0x80FF0114u);  // no board label yet: the default

  manager_->SetHostContext({{"board", "pi1"}}, "host-a");
  manager_->ProcessEvents();
  manager_->ReconcileDue();
  const AdapterSnapshot s = Get("port-2-2");
  EXPECT_EQ(chip->reg(0x6000), 0x80FF2014u);
  EXPECT_EQ(s.reason, "Applied");  // a policy change, not a drift
  EXPECT_EQ(s.counters.drift_repairs, 0u);
  EXPECT_EQ(s.desired->resolved.hold_us->provenance.ToString(), "local policy pi1-long-hold");
  EXPECT_EQ(s.desired->origins.at("hold_us").location, "pi1.yaml:1");
}

TEST_F(AdapterManagerTest, InvalidDesiredSettingsAreTerminalWithoutDeviceAccess) {
  // RTL8852BU (v1) and a policy whose buffer is not a multiple of 4 KiB. ValidatePolicy would
  // refuse it when the selector can reach a v1 chip; an experiment arm validated for another
  // layout can still land here, so the manager must hold the line itself.
  source_.devices.push_back(MakeDevice(0x0bda, 0xb832, UsbSpeed::kSuper, 2, 4, 5));
  source_.chips["2-4"] =
      std::make_shared<FakeChip>(std::map<uint32_t, uint32_t>{{0x8900, 0x80002005}});
  ServerBundle bundle;
  bundle.version = 3;
  ExperimentAssignment a;
  a.adapter_id = "port-2-4";
  a.experiment = "buf";
  a.arm = "six";
  a.settings.buffer_kib = 6;
  bundle.assignments.push_back(a);
  manager_->SetPolicies(std::make_shared<const PolicySet>(std::vector<common::Policy>{}, bundle));
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ProcessEvents();
  EXPECT_EQ(manager_->ReconcileDue(), absl::InfiniteFuture());
  EXPECT_EQ(Get("port-2-4").phase, AdapterPhase::kInvalidSettings);
  EXPECT_TRUE(source_.opens.empty());
  // A policy change requeues it.
  manager_->SetPolicies(std::make_shared<const PolicySet>());
  manager_->ProcessEvents();
  manager_->ReconcileDue();
  EXPECT_EQ(Get("port-2-4").phase, AdapterPhase::kApplied);
  EXPECT_EQ(source_.chips["2-4"]->reg(0x8900), 0x80000105u);
}

TEST_F(AdapterManagerTest, LogLinesAreJournaldFriendlyAndDeduplicated) {
  AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  for (int i = 0; i < 3; ++i) {
    Advance(kPeriod);
    manager_->ReconcileDue();
  }
  ASSERT_EQ(log_.size(), 2u) << ::testing::PrintToString(log_);
  EXPECT_THAT(log_[0], HasSubstr("adapter=port-2-2 chip=rtl8922au family=rtw89 usb=super port=2-2 "
                                 "state=pending reason=Discovered"));
  EXPECT_THAT(log_[1], HasSubstr("state=applied reason=Applied"));
  EXPECT_THAT(log_[1], HasSubstr("wrote 0x80ff0114"));
}

TEST_F(AdapterManagerTest, ObserversHearStatusChangesAndCounterOnlyPasses) {
  AddV3();
  ASSERT_TRUE(manager_->Rescan().ok());
  manager_->ReconcileDue();
  Advance(kPeriod);
  manager_->ReconcileDue();
  ASSERT_EQ(recorder_.changes.size(), 3u);
  EXPECT_TRUE(recorder_.changes[0].status_changed);   // discovered
  EXPECT_TRUE(recorder_.changes[1].status_changed);   // applied
  EXPECT_FALSE(recorder_.changes[2].status_changed);  // a no-op verification
}

}  // namespace
}  // namespace rxfleet::agent
