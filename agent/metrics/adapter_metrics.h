#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/reconcile/failure_reason.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

/// Identity of one adapter, exported as the labels of rxfleet_adapter_info (value 1). Only the
/// info series carries these; every other series carries `adapter` alone, so dashboards join on
/// it: `rxfleet_adapter_hold_observed_seconds * on(adapter) group_left(chip, usb_speed)
/// rxfleet_adapter_info`.
struct AdapterLabels {
  std::string adapter_id;    ///< stable id ("port-2-2"); label `adapter`
  std::string chip;          ///< "RTL8922AU"
  std::string vid;           ///< 4 lowercase hex digits, "0bda"
  std::string pid;           ///< 4 lowercase hex digits, "8912"
  std::string usb_speed;     ///< common::UsbSpeedName: "high", "super", "super_plus", ...
  std::string port_path;     ///< kernel port path at the moment, "2-2"
  std::string netdev;        ///< interface name, empty if none
  std::string driver;        ///< bound driver, "rtw89_8922au"; empty if none
  std::string family;        ///< chip family "rtw89", "rtw88", "mt76"; empty if in no table
  std::string managed;       ///< "true" when rxfleet holds RX aggregation (rtw89), else "false"
  std::string chip_source;   ///< "table", "chips.d", "driver"; empty if not identified
  std::string bus;           ///< bus number at the moment, "2"
  std::string hub_chain;     ///< "1-1:high>1-1.4:super"; empty on a root port
  std::string usb3_partner;  ///< "true" if the connector can carry SuperSpeed, else "false"

  friend bool operator==(const AdapterLabels&, const AdapterLabels&) = default;
};

/// Adapter lifecycle state as the reconcile loop sees it. Exported as
/// rxfleet_adapter_state{adapter, state} with one series per state: 1 for the current state,
/// 0 for the others (like kube_pod_status_phase).
enum class AdapterState : uint8_t {
  kApplied,           ///< "applied": desired RX aggregation settings verified on the device
  kPending,           ///< "pending": known, not yet applied/verified
  kAsleep,            ///< "asleep": device suspended (runtime PM), left alone until it wakes
  kDisabledByDriver,  ///< "disabled_by_driver": the driver turned RX aggregation off
  kUnsupported,       ///< "unsupported": chip/layout without a supported register layout
  kStorageMode,       ///< "storage_mode": enumerated as the virtual CD-ROM (0bda:1a2b)
  kOtherVendor,       ///< "ignored_other_vendor": a Wi-Fi adapter that is not rtw89
  kGone,              ///< "gone": unplugged; kept until RemoveAdapter
  kError,             ///< "error": last reconcile failed (see rxfleet_adapter_failures_total)
  kObserved,          ///< "observed": observe-only family (rtw88, mt76), read and never written
};
inline constexpr AdapterState kAllAdapterStates[] = {
    AdapterState::kApplied,          AdapterState::kPending,     AdapterState::kAsleep,
    AdapterState::kDisabledByDriver, AdapterState::kUnsupported, AdapterState::kStorageMode,
    AdapterState::kOtherVendor,      AdapterState::kGone,        AdapterState::kError,
    AdapterState::kObserved};

/// "applied", "pending", "asleep", "disabled_by_driver", "unsupported", "storage_mode",
/// "ignored_other_vendor", "gone", "error", "observed" (the API's AdapterState words).
std::string_view AdapterStateName(AdapterState state);
/// Inverse of AdapterStateName (exact match); nullopt for anything else.
std::optional<AdapterState> ParseAdapterState(std::string_view name);

/// Adapter and policy state for the reconcile loop. Thread-safe; every method is cheap (no I/O)
/// and may be called on every reconcile pass.
///
/// Series (all gauges unless `_total`; `adapter` label = adapter id):
///   rxfleet_adapter_info{adapter,chip,vid,pid,usb_speed,port_path,netdev,driver,family,
///                        managed,chip_source,bus,hub_chain,usb3_partner}  1 (identity and USB
///                        topology)
///   rxfleet_adapter_state{adapter,state}            1 for the current state, 0 for the others
///   rxfleet_adapter_hold_desired_seconds{adapter}   hold the policy wants (e.g. 3.2e-05)
///   rxfleet_adapter_hold_observed_seconds{adapter}  hold read back from the device
///   rxfleet_adapter_applies_total{adapter}          writes of the RX aggregation settings
///   rxfleet_adapter_verifies_total{adapter}         read-back verifications
///   rxfleet_adapter_drift_repairs_total{adapter}    re-applies after the device drifted
///   rxfleet_adapter_failures_total{adapter,reason}  failures by kFailureReasons
///   rxfleet_adapter_io_error_bursts_total{adapter,reason}  bursts of failed transfers that
///                                                   ended, by the reason of their first failure
///   rxfleet_adapter_reenumeration_loops_total{adapter}  quarantines for re-enumerating too
///                                                   often
///   rxfleet_adapter_diagnosis{adapter,code}         1 while a diagnosis is active
///   rxfleet_adapter_experiment_info{adapter,experiment,arm}  1 while enrolled
///   rxfleet_adapter_rx_agg_field{adapter,field}     observe-only families: raw value of a
///                                                   decoded RX aggregation field
/// Label cardinality is bounded: 10 states, at most kMaxFieldsPerAdapter fields, 9 reasons, at most
/// kMaxDiagnosesPerAdapter codes and kMaxExperimentsPerAdapter experiments per adapter.
class AdapterMetrics {
 public:
  static constexpr size_t kMaxDiagnosesPerAdapter = 16;
  static constexpr size_t kMaxExperimentsPerAdapter = 4;
  static constexpr size_t kMaxFieldsPerAdapter = 16;

  /// Registers the families in `registry`, which must outlive this object.
  explicit AdapterMetrics(prometheus::Registry& registry);

  /// Creates or updates the adapter's info series (re-labelled if any label changed, e.g.
  /// after a USB 2 -> USB 3 re-enumeration). An adapter seen for the first time starts in state
  /// "pending". Ignored if adapter_id is empty.
  void SetAdapter(const AdapterLabels& labels);

  /// Deletes every series of the adapter (info, state, holds, counters, diagnoses,
  /// experiments). Use SetState(kGone) instead while the adapter should stay visible.
  /// Unknown ids are ignored.
  void RemoveAdapter(std::string_view adapter_id);

  /// Desired / observed hold in seconds (32 µs = 3.2e-05); nullopt deletes the series (no
  /// policy for the adapter / hold not readable). Create the adapter with SetAdapter first;
  /// calls for unknown adapters are ignored (as are all per-adapter setters below).
  void SetDesiredHold(std::string_view adapter_id, std::optional<double> seconds);
  void SetObservedHold(std::string_view adapter_id, std::optional<double> seconds);

  /// Sets the current state.
  void SetState(std::string_view adapter_id, AdapterState state);
  /// Same by name; an unknown name is recorded as "error" and logged once per name to stderr.
  void SetState(std::string_view adapter_id, std::string_view state);
  /// Current state, nullopt for unknown adapters.
  std::optional<AdapterState> State(std::string_view adapter_id) const;

  void CountApply(std::string_view adapter_id);
  void CountVerify(std::string_view adapter_id);
  void CountDriftRepair(std::string_view adapter_id);
  /// `reason` should be one of kFailureReasons (see FailureReasonFromStatus); others count as
  /// "other".
  void CountFailure(std::string_view adapter_id, std::string_view reason);
  /// One burst of failed transfers ended (IoBurst; `reason` bounded as for CountFailure).
  void CountIoErrorBurst(std::string_view adapter_id, std::string_view reason);
  /// One re-enumeration loop quarantine started.
  void CountReenumerationLoop(std::string_view adapter_id);

  /// Marks diagnosis `code` (machine word, [a-z0-9_]{1,64}, e.g. "usb2_on_usb3_port") active
  /// (series = 1) or inactive (series deleted). Invalid codes and codes beyond
  /// kMaxDiagnosesPerAdapter active per adapter are dropped.
  void SetDiagnosis(std::string_view adapter_id, std::string_view code, bool active);

  /// Replaces the adapter's rxfleet_adapter_rx_agg_field series with `fields` (name -> raw
  /// value); an empty map deletes them (values not judged). Names must be [a-z0-9_]{1,64}; invalid
  /// ones and those beyond kMaxFieldsPerAdapter are dropped.
  void SetObservedFields(std::string_view adapter_id,
                         const std::map<std::string, uint32_t>& fields);

  /// Records the adapter's arm in `experiment` as rxfleet_adapter_experiment_info (one series
  /// per adapter and experiment, replaced when the arm changes). An empty `arm` removes the
  /// enrollment. Experiment and arm: 1..64 characters of [A-Za-z0-9._-]; invalid values and
  /// experiments beyond kMaxExperimentsPerAdapter are dropped.
  void SetExperimentArm(std::string_view adapter_id, std::string_view experiment,
                        std::string_view arm);

 private:
  struct Adapter {
    AdapterLabels labels;
    prometheus::Gauge* info = nullptr;
    AdapterState state = AdapterState::kPending;
    std::map<AdapterState, prometheus::Gauge*> states;
    prometheus::Gauge* desired = nullptr;
    prometheus::Gauge* observed = nullptr;
    prometheus::Counter* applies = nullptr;
    prometheus::Counter* verifies = nullptr;
    prometheus::Counter* drift_repairs = nullptr;
    std::map<std::string, prometheus::Counter*, std::less<>> failures;
    std::map<std::string, prometheus::Counter*, std::less<>> io_error_bursts;
    prometheus::Counter* reenumeration_loops = nullptr;
    std::map<std::string, prometheus::Gauge*, std::less<>> diagnoses;
    std::map<std::string, std::pair<std::string, prometheus::Gauge*>, std::less<>> experiments;
    std::map<std::string, prometheus::Gauge*, std::less<>> fields;
  };

  Adapter* Find(std::string_view adapter_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Increments the counter of `family` for `reason` bounded by kFailureReasons ("other").
  void CountByReason(prometheus::Family<prometheus::Counter>& family,
                     std::map<std::string, prometheus::Counter*, std::less<>>& counters,
                     const std::string& adapter_id, std::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(Adapter& adapter, AdapterState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetHoldLocked(prometheus::Family<prometheus::Gauge>& family, prometheus::Gauge*& gauge,
                     const std::string& adapter_id, std::optional<double> seconds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Gauge>& info_;
  prometheus::Family<prometheus::Gauge>& state_;
  prometheus::Family<prometheus::Gauge>& desired_;
  prometheus::Family<prometheus::Gauge>& observed_;
  prometheus::Family<prometheus::Counter>& applies_;
  prometheus::Family<prometheus::Counter>& verifies_;
  prometheus::Family<prometheus::Counter>& drift_repairs_;
  prometheus::Family<prometheus::Counter>& failures_;
  prometheus::Family<prometheus::Counter>& io_error_bursts_;
  prometheus::Family<prometheus::Counter>& reenumeration_loops_;
  prometheus::Family<prometheus::Gauge>& diagnosis_;
  prometheus::Family<prometheus::Gauge>& experiment_;
  prometheus::Family<prometheus::Gauge>& rx_agg_field_;

  mutable absl::Mutex mu_;
  std::map<std::string, Adapter, std::less<>> adapters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool, std::less<>> logged_unknown_states_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::agent
