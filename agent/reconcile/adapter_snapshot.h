#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "agent/reconcile/adapter_guard.h"
#include "agent/reconcile/policy_set.h"
#include "agent/sysfs/topology.h"
#include "agent/usb/device_source.h"
#include "agent/usb/diagnosis.h"
#include "common/chips/chip_table.h"
#include "common/chips/family.h"

namespace rxfleet::agent {

/// What the agent is doing with an adapter, as one word (the values of rxfleet.v1.AdapterState
/// without the prefix, lower case).
enum class AdapterPhase : uint8_t {
  kPending,           ///< "pending": known, not yet reconciled (new, re-enumerated, policy change)
  kApplied,           ///< "applied": register 0 read back equal to the desired settings
  kDrifted,           ///< "drifted": the register changed under us; repair held by the rate limit
  kAsleep,            ///< "asleep": reads return a sleep pattern; retried every reconcile period
  kDisabledByDriver,  ///< "disabled_by_driver": EN = 0 and no policy forces it; not written
  kUnsupported,       ///< "unsupported": Realtek id not in the rtw89 chip table; never touched
  kStorageMode,       ///< "storage_mode": 0bda:1a2b virtual CD-ROM; never touched
  kOtherVendor,  ///< "ignored_other_vendor": not an rtw89 adapter (e.g. MediaTek); never touched
  kGone,         ///< "gone": unplugged; kept for AdapterManagerOptions::gone_retention
  kError,        ///< "error": the last attempt failed; retried with exponential backoff
  kInvalidSettings,  ///< "invalid_settings": desired settings not representable; terminal
                     ///< until the policies change
  kObserved,  ///< "observed": an observe-only family (rtw88, mt76); registers read, never written
};

/// The names above.
std::string_view AdapterPhaseName(AdapterPhase phase);

/// Activity counters since the agent started.
struct AdapterCounters {
  uint64_t applies = 0;              ///< register writes of desired settings
  uint64_t verifies = 0;             ///< reads that compared the register with the desired settings
  uint64_t drift_repairs = 0;        ///< applies that repaired drift
  uint64_t failures = 0;             ///< failed opens/transfers and verify mismatches
  uint64_t asleep = 0;               ///< reconcile attempts that found the chip asleep
  uint64_t io_error_bursts = 0;      ///< bursts of failed transfers that ended (IoBurst)
  uint64_t reenumeration_loops = 0;  ///< quarantines for re-enumerating too often

  friend bool operator==(const AdapterCounters&, const AdapterCounters&) = default;
};

/// One enumeration of an adapter as the agent saw it (bus numbers change across the USB 2 -> 3
/// switch: 3-3 at high-speed, 2-2 at SuperSpeed).
struct Appearance {
  uint8_t bus = 0;
  uint8_t devnum = 0;
  std::string port_path;
  common::UsbSpeed speed = common::UsbSpeed::kUnknown;
  absl::Time at = absl::UnixEpoch();  ///< wall clock

  friend bool operator==(const Appearance&, const Appearance&) = default;
};

/// Everything the agent knows about one USB device it reports (supported or not), as one value.
/// Snapshots are copies: safe to keep and to read from any thread.
struct AdapterSnapshot {
  /// Stable adapter id (UsbSysfs::StableAdapterId), e.g. "port-2-2".
  std::string id;
  /// The device as last enumerated (bus, devnum, port path, ids, speed, strings).
  UsbDeviceInfo device;
  /// Port path of the companion USB 2 / USB 3 port; empty without a sysfs peer link.
  std::string peer_port_path;
  DeviceClass device_class = DeviceClass::kOtherVendor;
  /// Chip name, lower case: the rtw89 chip table name ("rtl8922au") for supported adapters,
  /// the first marketing name of an observe-only family entry ("rtl8822bu", "mt7921au");
  /// layout for supported adapters only.
  std::string chip;
  std::optional<common::RxAggLayout> layout;
  /// Chip family: "rtw89" (managed), "rtw88" or "mt76" (observe-only); empty for devices in no
  /// family table.
  std::string family;
  /// Register words of an observe-only adapter's last judged pass (address -> word) and their
  /// decoded fields (common::DecodeFields); empty when the pass was not judged (netdev down,
  /// implausible or failed reads).
  std::map<uint32_t, uint32_t> observed_words;
  std::vector<common::FieldValue> observed_fields;
  /// Netdev, its driver and statistics directory from sysfs; empty when there is none.
  std::string netdev;
  std::string driver;
  std::string statistics_dir;
  /// False once the device left (state kGone).
  bool present = true;

  AdapterPhase phase = AdapterPhase::kPending;
  /// One CamelCase word for the last transition: Discovered, Applied, AlreadyInSync,
  /// DriftRepaired, DriftRateLimited, Asleep, DisabledByDriver, InvalidSettings, VerifyMismatch,
  /// TransferFailed, OpenFailed, Unplugged, DeviceGone, StorageMode, OtherVendor,
  /// UnsupportedRealtek.
  std::string reason;
  /// Human detail of the transition (error text, what was written); may be empty.
  std::string message;
  /// Failure reason of the last failure ("timeout", "stall", "no_device", "permission_denied",
  /// "verify_mismatch", "io", "unsupported", "invalid_policy", "other"); empty if none yet.
  std::string last_failure_reason;
  /// Wall-clock time of the last phase change.
  absl::Time phase_since = absl::UnixEpoch();

  /// Desired settings with origins (supported adapters; unset before the first resolution).
  std::optional<DesiredSettings> desired;
  /// The active throughput probe the policies decide for this adapter (PolicySpec.probe,
  /// PolicySet::ResolveProbe), supported and observe-only adapters alike; unset when no
  /// matching policy sets one or before the first pass.
  std::optional<common::Resolved<common::ProbeSpec>> probe;
  /// Register 0 as last read (sleep patterns are never stored here) and when.
  std::optional<uint32_t> observed_reg0;
  absl::Time observed_time = absl::UnixEpoch();

  std::vector<Diagnosis> diagnoses;
  AdapterCounters counters;
  /// When the registers were last written (wall clock).
  std::optional<absl::Time> last_apply_time;
  /// Bundle version the last successful apply or verification used (0 without a bundle).
  uint64_t applied_bundle_version = 0;

  /// Where the chip identification came from: "table", "chips.d", "driver" ("" when not
  /// identified) and its detail (TSV name, "FILE:LINE", driver name).
  std::string chip_source;
  std::string chip_origin;
  /// Port path, hub chain with speeds, USB 3 partner (ReadUsbTopology) of the last appearance.
  UsbTopology topology;
  /// The last appearances, oldest first (at most kMaxAppearances).
  std::vector<Appearance> appearances;
  static constexpr size_t kMaxAppearances = 16;
  /// The last I/O error burst that ended, if any.
  std::optional<IoBurst> last_io_burst;
  /// Quarantined for re-enumerating too often: never written while set.
  bool quarantined = false;
  /// No register write before this wall-clock time (settle period after an arrival or while
  /// the USB 3 switch is pending); UnixEpoch when not settling.
  absl::Time settle_until = absl::UnixEpoch();
};

/// What one reconcile pass of an adapter did, for counters (metrics, status).
struct AdapterEvents {
  bool applied = false;
  bool verified = false;
  bool drift_repaired = false;
  bool asleep = false;
  /// Set when this pass ended a burst of failed transfers.
  std::optional<IoBurst> io_burst_ended;
  /// Set when this appearance started a re-enumeration loop quarantine.
  bool reenumeration_loop = false;
  /// Set when the pass failed (same words as AdapterSnapshot::last_failure_reason).
  std::optional<std::string> failure_reason;

  bool Empty() const {
    return !applied && !verified && !drift_repaired && !asleep && !failure_reason &&
           !io_burst_ended && !reenumeration_loop;
  }
};

/// Receives adapter changes from the AdapterManager. Called on the manager's owner thread (the
/// agent's reconcile loop), never with a manager lock held; must not block (queue the work).
class AdapterObserver {
 public:
  virtual ~AdapterObserver();

  /// After a pass or a device event changed an adapter: `status_changed` is true when anything
  /// but counters and timestamps changed (phase, reason, desired, observed word, netdev, USB
  /// location ...), i.e. when a server should hear about it; `events` says what the pass did.
  virtual void OnAdapterChanged(const AdapterSnapshot& snapshot, const AdapterEvents& events,
                                bool status_changed) = 0;

  /// The adapter was dropped (gone for longer than the retention).
  virtual void OnAdapterRemoved(const std::string& adapter_id) = 0;
};

}  // namespace rxfleet::agent
