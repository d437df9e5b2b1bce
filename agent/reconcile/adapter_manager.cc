#include "agent/reconcile/adapter_manager.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/metrics/adapter_metrics.h"
#include "agent/reconcile/adapter_record.h"
#include "agent/reconcile/reconciler.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

std::string Hex32(uint32_t word) { return absl::StrFormat("0x%08x", word); }

std::string HoldText(const DesiredSettings& desired) {
  if (!desired.resolved.hold_us) return "hold unchanged";
  return absl::StrCat("hold ", common::FormatHoldUs(desired.resolved.hold_us->value), " (",
                      desired.resolved.hold_us->provenance.ToString(), ")");
}

// Status equality for observers: everything but counters and timestamps.
bool SameStatus(const AdapterSnapshot& a, const AdapterSnapshot& b) {
  return a.id == b.id && a.device == b.device && a.peer_port_path == b.peer_port_path &&
         a.device_class == b.device_class && a.chip == b.chip && a.layout == b.layout &&
         a.netdev == b.netdev && a.driver == b.driver && a.present == b.present &&
         a.phase == b.phase && a.reason == b.reason && a.message == b.message &&
         a.desired == b.desired && a.observed_reg0 == b.observed_reg0 &&
         a.diagnoses == b.diagnoses && a.applied_bundle_version == b.applied_bundle_version &&
         a.chip_source == b.chip_source && a.topology == b.topology &&
         a.quarantined == b.quarantined && a.last_io_burst == b.last_io_burst;
}

LogLevel PhaseLogLevel(AdapterPhase phase) {
  switch (phase) {
    case AdapterPhase::kError:
    case AdapterPhase::kInvalidSettings:
      return LogLevel::kError;
    case AdapterPhase::kDrifted:
    case AdapterPhase::kDisabledByDriver:
      return LogLevel::kWarning;
    default:
      return LogLevel::kInfo;
  }
}

}  // namespace

absl::Time MonotonicNow() {
  return absl::UnixEpoch() + absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

AdapterManager::AdapterManager(DeviceSource& source, UsbSysfs sysfs, AdapterManagerOptions options)
    : source_(source), sysfs_(std::move(sysfs)), options_(std::move(options)) {
  if (options_.reconcile_period <= absl::ZeroDuration()) {
    options_.reconcile_period = absl::Seconds(10);
  }
  policies_ = std::make_shared<const PolicySet>();
}

AdapterManager::~AdapterManager() = default;

void AdapterManager::AddObserver(AdapterObserver* observer) { observers_.push_back(observer); }

void AdapterManager::SetWakeCallback(std::function<void()> wake) { wake_ = std::move(wake); }

void AdapterManager::Wake() {
  if (wake_) wake_();
}

absl::Time AdapterManager::WallNow() const {
  return options_.wall_now ? options_.wall_now() : absl::Now();
}

absl::Time AdapterManager::MonoNow() const {
  return options_.monotonic_now ? options_.monotonic_now() : MonotonicNow();
}

void AdapterManager::SetHostContext(std::map<std::string, std::string> labels,
                                    std::string host_id) {
  {
    absl::MutexLock lock(&mu_);
    host_labels_ = std::move(labels);
    host_id_ = std::move(host_id);
    requeue_all_ = true;
  }
  Wake();
}

void AdapterManager::SetPolicies(std::shared_ptr<const PolicySet> policies) {
  if (policies == nullptr) policies = std::make_shared<const PolicySet>();
  {
    absl::MutexLock lock(&mu_);
    policies_ = std::move(policies);
    requeue_all_ = true;
  }
  Wake();
}

std::shared_ptr<const PolicySet> AdapterManager::policies() const {
  absl::MutexLock lock(&mu_);
  return policies_;
}

void AdapterManager::RequeueAll() {
  {
    absl::MutexLock lock(&mu_);
    requeue_all_ = true;
  }
  Wake();
}

void AdapterManager::PostHotplug(HotplugEvent event, UsbDeviceInfo device) {
  {
    absl::MutexLock lock(&mu_);
    pending_.emplace_back(event, std::move(device));
  }
  Wake();
}

std::vector<AdapterSnapshot> AdapterManager::Snapshots() const {
  absl::MutexLock lock(&mu_);
  std::vector<AdapterSnapshot> out;
  out.reserve(published_.size());
  for (const auto& [id, snapshot] : published_) out.push_back(snapshot);
  return out;
}

std::optional<AdapterSnapshot> AdapterManager::Find(std::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  auto it = published_.find(adapter_id);
  if (it == published_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, common::RxAggLayout> AdapterManager::Layouts() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, common::RxAggLayout> layouts;
  for (const auto& [id, snapshot] : published_) {
    if (snapshot.layout) layouts[id] = *snapshot.layout;
  }
  return layouts;
}

bool AdapterManager::TakeRescanRequest() { return std::exchange(rescan_requested_, false); }

AdapterManager::Record* AdapterManager::FindPresentByLocation(uint8_t bus, uint8_t devnum) {
  for (auto& [id, record] : records_) {
    if (record->snap.present && record->snap.device.bus == bus &&
        record->snap.device.devnum == devnum) {
      return record.get();
    }
  }
  return nullptr;
}

void AdapterManager::Upsert(const UsbDeviceInfo& device) {
  const std::string id = sysfs_.StableAdapterId(device.port_path);
  auto [it, created] = records_.try_emplace(id, nullptr);
  if (created) it->second = std::make_unique<Record>(options_);
  Record& r = *it->second;
  const bool changed = created || !r.snap.present || !(r.snap.device == device);
  if (!changed) return;

  const bool reenumerated = !created && r.snap.present;
  const bool appeared = created || !r.snap.present || r.snap.device.bus != device.bus ||
                        r.snap.device.devnum != device.devnum;
  static const ChipCatalog kTableOnly;
  const IdentifiedDevice identified = IdentifyDevice(
      device, options_.chips ? *options_.chips : kTableOnly, BoundDriver(sysfs_, device.port_path));
  const DeviceAssessment& assessment = identified.assessment;
  r.snap.id = id;
  r.snap.device = device;
  r.snap.peer_port_path = sysfs_.PeerPortPath(device.port_path).value_or("");
  r.snap.device_class = assessment.device_class;
  r.identity_diagnoses = assessment.diagnoses;
  r.snap.chip_source = std::string(ChipSourceName(identified.source));
  r.snap.chip_origin = identified.origin;
  r.snap.chip = assessment.chip != nullptr ? std::string(assessment.chip->chip) : std::string();
  r.snap.layout =
      assessment.chip != nullptr ? std::optional(assessment.chip->layout) : std::nullopt;
  r.snap.topology = ReadUsbTopology(sysfs_, device.port_path);
  r.bos.reset();
  if (assessment.device_class == DeviceClass::kSupported &&
      device.speed == common::UsbSpeed::kHigh && device.bcd_usb >= 0x0201) {
    // bcdUSB 0x0201+ devices have a BOS (USB 2.0 LPM ECN); a USB 3 device at high-speed keeps
    // its SuperSpeed capability there.
    if (absl::StatusOr<BosSpeeds> bos = source_.ReadBos(device); bos.ok()) r.bos = *bos;
  }
  AdapterEvents appearance_events;
  if (appeared) OnAppearance(r, first_scan_done_, appearance_events);
  r.snap.present = true;
  if (auto netdev = sysfs_.Netdev(device.port_path)) {
    r.snap.netdev = netdev->name;
    r.snap.driver = netdev->driver;
    r.snap.statistics_dir = netdev->statistics_dir;
  } else {
    r.snap.netdev.clear();
    r.snap.driver.clear();
    r.snap.statistics_dir.clear();
  }
  r.last_verified.reset();
  r.backoff.Reset();
  r.gone_at = absl::InfiniteFuture();
  r.snap.observed_reg0.reset();
  r.snap.desired.reset();

  const std::string where = absl::StrFormat(
      "%s at %s on %s (bus %d dev %d)", common::FormatVidPid(device.vid, device.pid),
      common::UsbSpeedDisplayName(device.speed), device.port_path, device.bus, device.devnum);
  AdapterPhase phase = AdapterPhase::kPending;
  std::string reason = reenumerated || !created ? "Reenumerated" : "Discovered";
  std::string message = where;
  switch (assessment.device_class) {
    case DeviceClass::kSupported:
      r.next_due = absl::InfinitePast();
      if (!identified.assessment.diagnoses.empty()) {
        absl::StrAppend(&message, "; ", identified.assessment.diagnoses.front().message);
      }
      break;
    case DeviceClass::kStorageMode:
      phase = AdapterPhase::kStorageMode;
      reason = "StorageMode";
      break;
    case DeviceClass::kUnknownRealtek:
      phase = AdapterPhase::kUnsupported;
      reason = "UnsupportedRealtek";
      break;
    case DeviceClass::kOtherVendor:
      phase = AdapterPhase::kOtherVendor;
      reason = "OtherVendor";
      break;
  }
  if (assessment.device_class != DeviceClass::kSupported) {
    r.next_due = absl::InfiniteFuture();
    message = absl::StrCat(where, "; not touched");
    if (!assessment.diagnoses.empty()) {
      absl::StrAppend(&message, ": ", assessment.diagnoses.front().message);
    }
  } else if (!r.snap.netdev.empty()) {
    absl::StrAppend(&message, ", netdev ", r.snap.netdev);
  }
  if (r.snap.phase != phase || created) r.snap.phase_since = WallNow();
  r.snap.phase = phase;
  r.snap.reason = std::move(reason);
  r.snap.message = std::move(message);
  r.logged_key.clear();  // a (re-)arrival is always worth a line
  RefreshDiagnoses(r, MonoNow());
  Publish(r, appearance_events);
}

void AdapterManager::MarkGone(Record& r, std::string_view reason, std::string message) {
  r.snap.present = false;
  r.last_verified.reset();
  r.gone_at = MonoNow();
  r.next_due = absl::InfiniteFuture();
  if (r.snap.phase != AdapterPhase::kGone) r.snap.phase_since = WallNow();
  r.snap.phase = AdapterPhase::kGone;
  r.snap.reason = std::string(reason);
  r.snap.message = std::move(message);
}

absl::Status AdapterManager::Rescan() {
  absl::StatusOr<std::vector<UsbDeviceInfo>> devices = source_.Enumerate();
  if (!devices.ok()) return devices.status();
  std::map<std::string, bool> seen;
  for (const UsbDeviceInfo& device : *devices) {
    Upsert(device);
    seen[sysfs_.StableAdapterId(device.port_path)] = true;
  }
  first_scan_done_ = true;
  for (auto& [id, record] : records_) {
    if (record->snap.present && !seen.contains(id)) {
      MarkGone(*record, "Unplugged", "not found by a rescan");
      Publish(*record, {});
    }
  }
  return absl::OkStatus();
}

void AdapterManager::ProcessEvents() {
  std::vector<std::pair<HotplugEvent, UsbDeviceInfo>> events;
  bool requeue = false;
  {
    absl::MutexLock lock(&mu_);
    events.swap(pending_);
    requeue = std::exchange(requeue_all_, false);
  }
  for (const auto& [event, device] : events) {
    if (event == HotplugEvent::kArrived) {
      Upsert(device);
      continue;
    }
    Record* r = FindPresentByLocation(device.bus, device.devnum);
    if (r == nullptr || r->snap.device.port_path != device.port_path) continue;
    MarkGone(
        *r, "Unplugged",
        absl::StrFormat("left %s (bus %d dev %d)", device.port_path, device.bus, device.devnum));
    Publish(*r, {});
  }
  if (requeue) {
    for (auto& [id, record] : records_) {
      if (record->snap.present && record->snap.device_class == DeviceClass::kSupported) {
        record->next_due = absl::InfinitePast();
      }
    }
  }
}

absl::Time AdapterManager::ReconcileDue(const std::function<bool()>& should_stop) {
  const absl::Time now = MonoNow();
  for (auto& [id, record] : records_) {
    if (should_stop && should_stop()) break;
    Record& r = *record;
    if (r.snap.present && r.snap.device_class == DeviceClass::kSupported && r.next_due <= now) {
      Reconcile(r);
    }
  }
  absl::Time next = absl::InfiniteFuture();
  for (auto it = records_.begin(); it != records_.end();) {
    Record& r = *it->second;
    if (!r.snap.present && r.gone_at + options_.gone_retention <= now) {
      const std::string id = it->first;
      {
        absl::MutexLock lock(&mu_);
        published_.erase(id);
      }
      if (options_.log) {
        options_.log(LogLevel::kInfo,
                     absl::StrFormat("adapter=%s removed: gone for %s", id,
                                     absl::FormatDuration(options_.gone_retention)));
      }
      for (AdapterObserver* observer : observers_) observer->OnAdapterRemoved(id);
      it = records_.erase(it);
      continue;
    }
    if (r.snap.present) {
      next = std::min(next, r.next_due);
    } else {
      next = std::min(next, r.gone_at + options_.gone_retention);
    }
    ++it;
  }
  return next;
}

void AdapterManager::ReconcileAllNow() {
  for (auto& [id, record] : records_) {
    if (record->snap.present && record->snap.device_class == DeviceClass::kSupported) {
      Reconcile(*record);
    }
  }
}

void AdapterManager::Reconcile(Record& r) {
  const absl::Time mono = MonoNow();
  const absl::Time wall = WallNow();
  const common::RxAggLayout layout = *r.snap.layout;
  const AdapterPhase previous_phase = r.snap.phase;
  if (HoldOff(r, mono)) return;

  if (auto netdev = sysfs_.Netdev(r.snap.device.port_path)) {
    r.snap.netdev = netdev->name;
    r.snap.driver = netdev->driver;
    r.snap.statistics_dir = netdev->statistics_dir;
  } else {
    r.snap.netdev.clear();
    r.snap.driver.clear();
    r.snap.statistics_dir.clear();
  }

  std::shared_ptr<const PolicySet> policies;
  common::AdapterAttributes attributes;
  {
    absl::MutexLock lock(&mu_);
    policies = policies_;
    attributes.host_labels = host_labels_;
    attributes.host = host_id_;
  }
  attributes.adapter_id = r.snap.id;
  attributes.chip = r.snap.chip;
  attributes.vid = r.snap.device.vid;
  attributes.pid = r.snap.device.pid;
  attributes.usb_speed = r.snap.device.speed;
  DesiredSettings desired = policies->Resolve(attributes, wall);
  const common::RxAggSettings settings = desired.Settings();
  r.snap.desired = desired;

  AdapterEvents events;
  auto set_phase = [&](AdapterPhase phase, std::string reason, std::string message) {
    if (phase != r.snap.phase) r.snap.phase_since = wall;
    r.snap.phase = phase;
    r.snap.reason = std::move(reason);
    r.snap.message = std::move(message);
  };
  auto fail = [&](const absl::Status& status, std::string_view reason_word, std::string_view what) {
    const std::string failure(FailureReasonFromStatus(status));
    events.failure_reason = failure;
    r.snap.last_failure_reason = failure;
    ++r.snap.counters.failures;
    r.burst.OnFailure(failure);
    if (absl::IsUnavailable(status)) {
      MarkGone(r, "DeviceGone", absl::StrCat(ToAbslView(what), ": ", status.message()));
      rescan_requested_ = true;
      return;
    }
    const absl::Duration delay = r.backoff.NextDelay();
    r.next_due = mono + delay;
    set_phase(AdapterPhase::kError, std::string(reason_word),
              absl::StrFormat("%s (%s): %s; retry in %s", what, failure, status.message(),
                              absl::FormatDuration(delay)));
  };

  if (absl::Status valid = common::ValidateRxAggSettingsForLayout(layout, settings); !valid.ok()) {
    if (previous_phase != AdapterPhase::kInvalidSettings) {
      events.failure_reason = "invalid_policy";
      r.snap.last_failure_reason = "invalid_policy";
      ++r.snap.counters.failures;
    }
    r.next_due = absl::InfiniteFuture();
    set_phase(AdapterPhase::kInvalidSettings, "InvalidSettings",
              absl::StrCat("desired settings are not valid on layout ",
                           ToAbslView(common::RxAggLayoutName(layout)), ": ", valid.message(),
                           "; waiting for a policy change"));
    Publish(r, events);
    return;
  }

  absl::StatusOr<std::unique_ptr<RegisterIo>> io =
      source_.OpenRegisterIo(r.snap.device, common::RxAggRegisterAddresses(layout));
  if (!io.ok()) {
    fail(io.status(), "OpenFailed", "cannot open the device");
    Publish(r, events);
    return;
  }
  StepInput input;
  input.layout = layout;
  input.desired = settings;
  input.last_verified = r.last_verified;
  input.drift_repair_allowed = r.limiter.NextAvailable(mono) <= mono;
  const StepResult step = ReconcileRegisters(**io, input);
  r.burst.OnFailedTransfers(FailureReasonFromStatus((*io)->last_failed_attempt()),
                            (*io)->failed_attempts());
  io->reset();  // close the handle right away: an open handle keeps libusb polling

  const uint32_t address = common::GetRxAggLayoutSpec(layout).reg0_address;
  if (step.observed) {
    r.snap.observed_reg0 = step.observed;
    r.snap.observed_time = wall;
  }
  if (step.verified) {
    events.verified = true;
    ++r.snap.counters.verifies;
  }
  if (step.wrote) {
    events.applied = true;
    ++r.snap.counters.applies;
    r.snap.last_apply_time = wall;
  }

  if (step.outcome != StepOutcome::kDeviceError) {
    // Any completed exchange ends a burst of failed transfers: one event, not drift (the
    // failed reads produced no value, so nothing was compared or written on them).
    if (std::optional<IoBurst> burst = r.burst.OnSuccess(wall)) {
      ++r.snap.counters.io_error_bursts;
      r.snap.last_io_burst = burst;
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     absl::StrFormat("adapter=%s io_error_burst ended: %d failed transfers, "
                                     "reason=%s errno=%s(%d); nothing was written on a failed read",
                                     r.snap.id, burst->count, burst->reason, burst->errno_name,
                                     burst->errno_value));
      }
      events.io_burst_ended = std::move(burst);
    }
  }
  switch (step.outcome) {
    case StepOutcome::kInSync:
      r.last_verified = step.observed;
      r.backoff.Reset();
      r.next_due = mono + options_.reconcile_period;
      r.snap.applied_bundle_version = desired.bundle_version;
      if (previous_phase != AdapterPhase::kApplied) {
        set_phase(AdapterPhase::kApplied, "AlreadyInSync",
                  absl::StrFormat("0x%04x = %s already as desired: %s", address,
                                  Hex32(*step.observed), HoldText(desired)));
      }
      break;
    case StepOutcome::kApplied:
    case StepOutcome::kDriftRepaired: {
      const bool drift = step.outcome == StepOutcome::kDriftRepaired;
      r.last_verified = step.observed;
      r.backoff.Reset();
      r.next_due = mono + options_.reconcile_period;
      r.snap.applied_bundle_version = desired.bundle_version;
      std::string before = "?";
      if (drift && input.last_verified) before = Hex32(*input.last_verified);
      if (drift) {
        r.limiter.TryAcquire(mono);
        events.drift_repaired = true;
        ++r.snap.counters.drift_repairs;
        set_phase(AdapterPhase::kApplied, "DriftRepaired",
                  absl::StrFormat("0x%04x had drifted from %s; wrote %s and verified: %s", address,
                                  before, Hex32(*step.target), HoldText(desired)));
      } else {
        set_phase(AdapterPhase::kApplied, "Applied",
                  absl::StrFormat("0x%04x: wrote %s and verified: %s", address, Hex32(*step.target),
                                  HoldText(desired)));
      }
      break;
    }
    case StepOutcome::kDriftHeld: {
      const absl::Time next = r.limiter.NextAvailable(mono);
      r.next_due = next;
      set_phase(AdapterPhase::kDrifted, "DriftRateLimited",
                absl::StrFormat("0x%04x changed to %s (verified %s); repairs are rate limited "
                                "(%d per %s), next in %s",
                                address, Hex32(*step.observed),
                                input.last_verified ? Hex32(*input.last_verified) : "?",
                                options_.drift_repair.burst,
                                absl::FormatDuration(options_.drift_repair.refill),
                                absl::FormatDuration(next - mono)));
      break;
    }
    case StepOutcome::kAsleep:
      events.asleep = true;
      ++r.snap.counters.asleep;
      r.backoff.Reset();
      r.next_due = mono + options_.reconcile_period;
      set_phase(AdapterPhase::kAsleep, "Asleep",
                absl::StrFormat("0x%04x reads a sleep pattern (chip asleep or clock-gated); not "
                                "written, retrying every %s",
                                address, absl::FormatDuration(options_.reconcile_period)));
      break;
    case StepOutcome::kDisabledByDriver:
      r.last_verified.reset();
      r.backoff.Reset();
      r.next_due = mono + options_.reconcile_period;
      set_phase(AdapterPhase::kDisabledByDriver, "DisabledByDriver",
                absl::StrFormat("0x%04x = %s: %s", address, Hex32(*step.observed),
                                step.status.message()));
      break;
    case StepOutcome::kInvalidSettings:
      r.next_due = absl::InfiniteFuture();
      set_phase(AdapterPhase::kInvalidSettings, "InvalidSettings",
                absl::StrCat(step.status.message(), "; waiting for a policy change"));
      break;
    case StepOutcome::kVerifyMismatch: {
      r.last_verified.reset();
      events.failure_reason = "verify_mismatch";
      r.snap.last_failure_reason = "verify_mismatch";
      ++r.snap.counters.failures;
      const absl::Duration delay = r.backoff.NextDelay();
      r.next_due = mono + delay;
      set_phase(
          AdapterPhase::kError, "VerifyMismatch",
          absl::StrFormat("%s; retry in %s", step.status.message(), absl::FormatDuration(delay)));
      break;
    }
    case StepOutcome::kDeviceError:
      fail(step.status, "TransferFailed",
           step.wrote ? "verify read failed" : (step.writes > 0 ? "write failed" : "read failed"));
      break;
  }
  Publish(r, events);
}

void AdapterManager::LogTransition(Record& r) {
  if (!options_.log) return;
  std::string key = absl::StrCat(ToAbslView(AdapterPhaseName(r.snap.phase)), "/", r.snap.reason);
  if (r.snap.phase == AdapterPhase::kApplied && r.snap.observed_reg0) {
    absl::StrAppend(&key, "/", *r.snap.observed_reg0, "/", r.snap.counters.drift_repairs);
  }
  if (r.snap.phase == AdapterPhase::kError) absl::StrAppend(&key, "/", r.snap.last_failure_reason);
  if (key == r.logged_key) return;
  r.logged_key = key;
  std::string line = absl::StrCat("adapter=", r.snap.id);
  absl::StrAppend(&line, " chip=", r.snap.chip.empty() ? "-" : r.snap.chip);
  absl::StrAppend(&line, " usb=", ToAbslView(common::UsbSpeedName(r.snap.device.speed)),
                  " port=", r.snap.device.port_path);
  absl::StrAppend(&line, " state=", ToAbslView(AdapterPhaseName(r.snap.phase)),
                  " reason=", r.snap.reason);
  if (!r.snap.message.empty()) absl::StrAppend(&line, " msg=\"", r.snap.message, "\"");
  LogLevel level = PhaseLogLevel(r.snap.phase);
  if (r.snap.reason == "DeviceGone") level = LogLevel::kWarning;
  options_.log(level, line);
}

void AdapterManager::Publish(Record& r, const AdapterEvents& events) {
  LogTransition(r);
  bool status_changed = true;
  {
    absl::MutexLock lock(&mu_);
    auto it = published_.find(r.snap.id);
    if (it != published_.end()) {
      status_changed = !SameStatus(it->second, r.snap);
      it->second = r.snap;
    } else {
      published_.emplace(r.snap.id, r.snap);
    }
  }
  r.published = true;
  if (!status_changed && events.Empty()) return;
  for (AdapterObserver* observer : observers_) {
    observer->OnAdapterChanged(r.snap, events, status_changed);
  }
}

}  // namespace rxfleet::agent
