#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/reconcile/adapter_snapshot.h"
#include "agent/reconcile/backoff.h"
#include "agent/reconcile/log.h"
#include "agent/reconcile/policy_set.h"
#include "agent/reconcile/transition.h"
#include "agent/sysfs/usb_sysfs.h"
#include "agent/usb/chip_identity.h"
#include "agent/usb/device_source.h"

namespace rxfleet::agent {

/// Monotonic time as an absl::Time (steady_clock since its epoch): used for scheduling only, so
/// wall-clock steps (NTP, RTC-less Raspberry Pi boots) never stall or rush the loop.
absl::Time MonotonicNow();

struct AdapterManagerOptions {
  /// How often an in-sync adapter is checked again (one register read). > 0. Also the retry
  /// period of asleep and driver-disabled adapters.
  absl::Duration reconcile_period = absl::Seconds(10);
  /// Backoff after failed opens/transfers and verify mismatches.
  BackoffPolicy backoff;
  /// Rate limit of drift repairs per adapter.
  RepairRatePolicy drift_repair;
  /// How long a gone adapter stays in snapshots before it is dropped.
  absl::Duration gone_retention = absl::Minutes(10);
  /// No register write within this long of an adapter's arrival after the first scan, nor while
  /// a USB 3-capable adapter at high-speed on a connector with a USB 3 partner waits for the
  /// driver's USB 2 -> 3 switch (usb3_switch_pending; the field saw the SuperSpeed
  /// re-enumeration 3.46 s after the high-speed one, morrownr/rtw89 PR#123). Zero: no settling
  /// (a high-speed adapter on such a connector is then usb3_switch_failed right away).
  absl::Duration settle = absl::ZeroDuration();
  /// Re-enumeration loop quarantine.
  ReenumerationLoopPolicy reenumeration_loop;
  /// Chip identification beyond the shipped table (chips.d extension). Null: table only.
  std::shared_ptr<const ChipCatalog> chips;
  /// One line per adapter state change: "adapter=ID chip=CHIP ...". Null: no logging.
  LogSink log;
  /// Clocks, injectable for tests. Null: MonotonicNow / absl::Now.
  std::function<absl::Time()> monotonic_now;
  std::function<absl::Time()> wall_now;
};

/// Owns the adapter records of one host and reconciles them: level-based, one adapter at a time,
/// opening each device only for the duration of its pass.
///
/// Classification (IdentifyDevice: chip tables, chips.d extension, bound driver): supported
/// rtw89 adapters are reconciled; rtw88 and mt76 adapters (observe-only families) get read-only
/// passes every reconcile_period (Observe); storage-mode (0bda:1a2b), unknown Realtek and other
/// vendors' devices are reported with their diagnoses but never opened (zero control
/// transfers). Hubs never reach here (DeviceSource excludes them). Every class gets its
/// topology (ReadUsbTopology); supported and observe-only adapters at high-speed also their BOS
/// and a speed finding (DiagnoseSpeed).
///
/// A pass of a supported adapter: resolve the desired settings (PolicySet over the host labels),
/// open register access restricted to the layout's RX aggregation registers
/// (common::RxAggRegisterAddresses), run ReconcileRegisters, close the handle, then map the
/// outcome to a phase and the next due time:
///   in sync / applied / drift repaired -> applied, again after reconcile_period;
///   drift held by the rate limit       -> drifted, again when a repair token is available;
///   asleep / disabled by driver        -> that phase, again after reconcile_period;
///   invalid settings                   -> invalid_settings, not retried until policies change;
///   device gone (Unavailable)          -> gone, a rescan is requested;
///   any other failure                  -> error, again after the adapter's backoff.
/// Each phase change is logged once ("no spam for repeated identical states").
///
/// Threading: Rescan, ProcessEvents, ReconcileDue and ReconcileAllNow must be called from one
/// owner thread (the agent loop); observers run there too. PostHotplug, SetPolicies,
/// SetHostLabels, RequeueAll and the snapshot accessors may be called from any thread.
class AdapterManager {
 public:
  /// `source` must outlive the manager.
  AdapterManager(DeviceSource& source, UsbSysfs sysfs, AdapterManagerOptions options);
  ~AdapterManager();

  AdapterManager(const AdapterManager&) = delete;
  AdapterManager& operator=(const AdapterManager&) = delete;

  /// Adds an observer (not owned; must outlive the manager). Call before the loop starts.
  void AddObserver(AdapterObserver* observer);

  /// Called whenever work was queued from another thread (hotplug event, policy change,
  /// requeue), so the owner loop can wake up. Set before the loop starts.
  void SetWakeCallback(std::function<void()> wake);

  // ---- any thread ----

  /// Host labels and host name used in selectors; requeues every adapter.
  void SetHostContext(std::map<std::string, std::string> labels, std::string host_id);
  /// Replaces the policy layers; requeues every adapter (invalid_settings ones included).
  void SetPolicies(std::shared_ptr<const PolicySet> policies);
  std::shared_ptr<const PolicySet> policies() const;
  /// Makes every present supported adapter due now.
  void RequeueAll();
  /// Queues a hotplug event for the owner thread (DeviceSource callback).
  void PostHotplug(HotplugEvent event, UsbDeviceInfo device);

  /// Copies of all adapter snapshots, ordered by id (gone ones included).
  std::vector<AdapterSnapshot> Snapshots() const;
  /// One adapter's snapshot; nullopt for unknown ids.
  std::optional<AdapterSnapshot> Find(std::string_view adapter_id) const;
  /// Layouts of the known supported adapters, by id (for bundle validation).
  std::map<std::string, common::RxAggLayout> Layouts() const;

  // ---- owner thread ----

  /// Enumerates devices and reconciles the record set with them: new devices are added (due
  /// now), changed ones updated (re-enumeration: new bus/devnum/speed, same id), missing ones
  /// marked gone. Errors: the DeviceSource's Enumerate error (records are left as they are).
  absl::Status Rescan();

  /// Applies queued hotplug events and requeue requests.
  void ProcessEvents();

  /// Runs a pass for every adapter that is due at the monotonic now, stopping early (between
  /// adapters, never inside a pass) when `should_stop` returns true; drops gone adapters past
  /// their retention. Returns the monotonic time the next adapter is due (InfiniteFuture if
  /// none).
  absl::Time ReconcileDue(const std::function<bool()>& should_stop = nullptr);

  /// Runs one pass for every present supported adapter, due or not (for --once).
  void ReconcileAllNow();

  /// True (once) if a pass saw a device vanish and a rescan should confirm it.
  bool TakeRescanRequest();

 private:
  struct Record;

  void Upsert(const UsbDeviceInfo& device);
  /// Netdev, driver and statistics directory of the record's port path, from sysfs.
  void RefreshNetdev(Record& record) const;
  void MarkGone(Record& record, std::string_view reason, std::string message);
  /// The selector facts of `record` (host labels and id included) and, in `policies`, the
  /// policy set in force.
  common::AdapterAttributes AttributesOf(const Record& record,
                                         std::shared_ptr<const PolicySet>* policies) const;
  void Reconcile(Record& record);
  /// Applies a pass's transition (agent/reconcile/transition.h) to the record and publishes it.
  void Apply(Record& record, const AdapterTransition& transition, absl::Time mono, absl::Time wall);
  /// Read-only pass of an observe-only adapter (rtw88, mt76): reads the layout's registers with
  /// the family's protocol (which refuses writes), judges them (AssessObservation) and publishes
  /// phase observed; never resolves policies or writes (adapter_manager_observe.cc).
  void Observe(Record& record);
  /// Tracks I/O error bursts of a pass (IoBurstTracker): `failed` when the pass failed on a
  /// transfer or open, `io` (may be null) the access it used. A success that ends a burst
  /// counts it, logs it and sets events.io_burst_ended.
  void TrackBurst(Record& record, bool failed, std::string_view failure, const RegisterIo* io,
                  absl::Time wall, AdapterEvents& events);
  // Settling and quarantine (adapter_manager_guard.cc): refreshes the diagnoses that depend on
  // time and returns true (having published) when the pass must not touch the device.
  bool HoldOff(Record& record, absl::Time mono);
  void RefreshDiagnoses(Record& record, absl::Time mono);
  void MaybeReleaseQuarantine(Record& record, absl::Time mono);
  void OnAppearance(Record& record, bool arrival_after_start, AdapterEvents& events);
  void Publish(Record& record, const AdapterEvents& events);
  void LogTransition(Record& record);
  Record* FindPresentByLocation(uint8_t bus, uint8_t devnum);
  absl::Time WallNow() const;
  absl::Time MonoNow() const;
  void Wake();

  DeviceSource& source_;
  const UsbSysfs sysfs_;
  AdapterManagerOptions options_;
  std::vector<AdapterObserver*> observers_;
  std::function<void()> wake_;

  // Owner thread only.
  std::map<std::string, std::unique_ptr<Record>, std::less<>> records_;
  bool rescan_requested_ = false;
  bool first_scan_done_ = false;

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> host_labels_ ABSL_GUARDED_BY(mu_);
  std::string host_id_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PolicySet> policies_ ABSL_GUARDED_BY(mu_);
  bool requeue_all_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<HotplugEvent, UsbDeviceInfo>> pending_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, AdapterSnapshot, std::less<>> published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::agent
