// The AdapterManager's record set and the rtw89 reconcile pass. The observe-only pass is in
// adapter_manager_observe.cc, settling and quarantine in adapter_manager_guard.cc; they share
// the private Record type (adapter_record.h).
// Size reason: arrival (identification, topology, BOS), the rtw89 pass and publishing all
// update one record under the same invariants, so they stay together (about 570 lines).
#include "agent/reconcile/adapter_manager.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/reconcile/adapter_record.h"
#include "agent/reconcile/failure_reason.h"
#include "agent/reconcile/reconciler.h"
#include "agent/reconcile/transition.h"
#include "agent/sysfs/topology.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

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
         a.family == b.family && a.observed_words == b.observed_words &&
         a.chip_source == b.chip_source && a.topology == b.topology &&
         a.quarantined == b.quarantined && a.last_io_burst == b.last_io_burst;
}

// "RTL8822BU/RTL8812BU" -> "rtl8822bu"; "MT76x2U e.g. MT7612U/MT7632U" -> "mt76x2u".
std::string ObservedChipName(const common::ObservedChip& chip) {
  std::string_view names = chip.names;
  names = names.substr(0, names.find_first_of(" /"));
  return absl::AsciiStrToLower(ToAbslView(names));
}

// Adapters the manager runs passes for: rtw89 reconciles and observe-only reads.
bool HasPasses(const AdapterSnapshot& snap) {
  return snap.device_class == DeviceClass::kSupported ||
         snap.device_class == DeviceClass::kObserved;
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
  r.base_diagnoses = assessment.diagnoses;
  r.family_diagnoses.clear();
  r.observed = assessment.observed;
  r.snap.chip_source = std::string(ChipSourceName(identified.source));
  r.snap.chip_origin = identified.origin;
  r.snap.chip = assessment.chip != nullptr ? std::string(assessment.chip->chip) : std::string();
  r.snap.family = assessment.chip != nullptr ? "rtw89" : "";
  if (assessment.observed != nullptr) {
    r.snap.chip = ObservedChipName(*assessment.observed);
    r.snap.family = std::string(common::ChipFamilyName(assessment.observed->layout->family));
  }
  r.snap.observed_words.clear();
  r.snap.observed_fields.clear();
  r.snap.layout =
      assessment.chip != nullptr ? std::optional(assessment.chip->layout) : std::nullopt;
  r.snap.topology = ReadUsbTopology(sysfs_, device.port_path);
  r.bos.reset();
  if (HasPasses(r.snap) && device.speed == common::UsbSpeed::kHigh && device.bcd_usb >= 0x0201) {
    // bcdUSB 0x0201+ devices have a BOS (USB 2.0 LPM ECN); a USB 3 device at high-speed keeps
    // its SuperSpeed capability there. A standard descriptor read, never a register access.
    if (absl::StatusOr<BosSpeeds> bos = source_.ReadBos(device); bos.ok()) r.bos = *bos;
  }
  AdapterEvents appearance_events;
  if (appeared) OnAppearance(r, first_scan_done_, appearance_events);
  r.snap.present = true;
  RefreshNetdev(r);
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
    case DeviceClass::kObserved:
      r.next_due = absl::InfinitePast();
      if (!assessment.diagnoses.empty()) {
        absl::StrAppend(&message, "; ", assessment.diagnoses.front().message);
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
  if (!HasPasses(r.snap)) {
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

void AdapterManager::RefreshNetdev(Record& r) const {
  std::optional<UsbSysfs::NetdevInfo> netdev = sysfs_.Netdev(r.snap.device.port_path);
  r.snap.netdev = netdev ? netdev->name : "";
  r.snap.driver = netdev ? netdev->driver : "";
  r.snap.statistics_dir = netdev ? netdev->statistics_dir : "";
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
      if (record->snap.present && HasPasses(record->snap)) {
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
    if (r.snap.present && HasPasses(r.snap) && r.next_due <= now) {
      r.snap.device_class == DeviceClass::kObserved ? Observe(r) : Reconcile(r);
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
    if (record->snap.present && HasPasses(record->snap)) {
      record->snap.device_class == DeviceClass::kObserved ? Observe(*record) : Reconcile(*record);
    }
  }
}

common::AdapterAttributes AdapterManager::AttributesOf(
    const Record& r, std::shared_ptr<const PolicySet>* policies) const {
  common::AdapterAttributes attributes;
  {
    absl::MutexLock lock(&mu_);
    *policies = policies_;
    attributes.host_labels = host_labels_;
    attributes.host = host_id_;
  }
  attributes.adapter_id = r.snap.id;
  attributes.chip = r.snap.chip;
  attributes.family = r.snap.family;
  attributes.vid = r.snap.device.vid;
  attributes.pid = r.snap.device.pid;
  attributes.usb_speed = r.snap.device.speed;
  return attributes;
}

void AdapterManager::Reconcile(Record& r) {
  const absl::Time mono = MonoNow();
  const absl::Time wall = WallNow();
  const common::RxAggLayout layout = *r.snap.layout;
  if (HoldOff(r, mono)) return;

  RefreshNetdev(r);

  std::shared_ptr<const PolicySet> policies;
  const common::AdapterAttributes attributes = AttributesOf(r, &policies);
  r.snap.probe = policies->ResolveProbe(attributes);
  DesiredSettings desired = policies->Resolve(attributes, wall);
  const common::RxAggSettings settings = desired.Settings();
  r.snap.desired = desired;

  TransitionInput in;
  in.phase = r.snap.phase;
  in.last_verified = r.last_verified;
  in.reg0_address = common::GetRxAggLayoutSpec(layout).reg0_address;
  in.hold_text = HoldText(desired);
  in.bundle_version = desired.bundle_version;
  in.reconcile_period = options_.reconcile_period;
  in.backoff_delay = r.backoff.PeekDelay();
  const absl::Time repair_at = r.limiter.NextAvailable(mono);
  in.drift_repair_wait = std::max(absl::ZeroDuration(), repair_at - mono);
  in.drift_repair = options_.drift_repair;

  if (absl::Status valid = common::ValidateRxAggSettingsForLayout(layout, settings); !valid.ok()) {
    Apply(r, InvalidSettingsTransition(in, layout, valid), mono, wall);
    return;
  }
  absl::StatusOr<std::unique_ptr<RegisterIo>> io =
      source_.OpenRegisterIo(r.snap.device, common::RxAggRegisterAddresses(layout));
  if (!io.ok()) {
    AdapterTransition failed =
        FailedTransition(in, io.status(), "OpenFailed", "cannot open the device");
    TrackBurst(r, true, FailureReasonFromStatus(io.status()), nullptr, wall, failed.events);
    Apply(r, failed, mono, wall);
    return;
  }
  StepInput step_input;
  step_input.layout = layout;
  step_input.desired = settings;
  step_input.last_verified = r.last_verified;
  step_input.drift_repair_allowed = repair_at <= mono;
  const StepResult step = ReconcileRegisters(**io, step_input);
  AdapterTransition transition = StepTransition(in, step);
  const bool failed = step.outcome == StepOutcome::kDeviceError;
  TrackBurst(r, failed, failed ? FailureReasonFromStatus(step.status) : "", io->get(), wall,
             transition.events);
  io->reset();  // close the handle right away: an open handle keeps libusb polling
  if (step.observed) {
    r.snap.observed_reg0 = step.observed;
    r.snap.observed_time = wall;
  }
  Apply(r, transition, mono, wall);
}

void AdapterManager::TrackBurst(Record& r, bool failed, std::string_view failure,
                                const RegisterIo* io, absl::Time wall, AdapterEvents& events) {
  if (io != nullptr) {
    r.burst.OnFailedTransfers(FailureReasonFromStatus(io->last_failed_attempt()),
                              io->failed_attempts());
  }
  if (failed) {
    r.burst.OnFailure(failure);
    return;
  }
  // Any completed exchange ends a burst of failed transfers: one event, not drift (the failed
  // reads produced no value, so nothing was compared or written on them).
  std::optional<IoBurst> burst = r.burst.OnSuccess(wall);
  if (!burst) return;
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

void AdapterManager::Apply(Record& r, const AdapterTransition& t, absl::Time mono,
                           absl::Time wall) {
  const AdapterEvents& events = t.events;
  if (events.verified) ++r.snap.counters.verifies;
  if (events.applied) {
    ++r.snap.counters.applies;
    r.snap.last_apply_time = wall;
  }
  if (events.drift_repaired) ++r.snap.counters.drift_repairs;
  if (events.asleep) ++r.snap.counters.asleep;
  if (events.failure_reason) {
    r.snap.last_failure_reason = *events.failure_reason;
    ++r.snap.counters.failures;
  }
  if (t.gone) {
    MarkGone(r, t.phase->reason, t.phase->message);
    rescan_requested_ = true;
    Publish(r, events);
    return;
  }
  switch (t.backoff) {
    case BackoffAction::kKeep:
      break;
    case BackoffAction::kReset:
      r.backoff.Reset();
      break;
    case BackoffAction::kAdvance:
      r.backoff.NextDelay();
      break;
  }
  if (t.take_repair_token) r.limiter.TryAcquire(mono);
  if (t.last_verified) r.last_verified = *t.last_verified;
  if (t.applied_bundle_version) r.snap.applied_bundle_version = *t.applied_bundle_version;
  r.next_due = t.requeue_after ? mono + *t.requeue_after : absl::InfiniteFuture();
  if (t.phase) {
    if (t.phase->phase != r.snap.phase) r.snap.phase_since = wall;
    r.snap.phase = t.phase->phase;
    r.snap.reason = t.phase->reason;
    r.snap.message = t.phase->message;
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
  if (!r.snap.family.empty()) absl::StrAppend(&line, " family=", r.snap.family);
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
  // After the snapshot is published: whoever reads the line and then asks the local status
  // (or scrapes) sees at least what the line says.
  LogTransition(r);
  if (!status_changed && events.Empty()) return;
  for (AdapterObserver* observer : observers_) {
    observer->OnAdapterChanged(r.snap, events, status_changed);
  }
}

}  // namespace rxfleet::agent
