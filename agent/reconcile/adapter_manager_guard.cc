// The AdapterManager's hold-offs: the settle period after an arrival and during the USB 2 -> 3
// switch, the re-enumeration loop quarantine, and the diagnoses that change with time.

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/reconcile/adapter_manager.h"
#include "agent/reconcile/adapter_record.h"
#include "agent/usb/speed_diagnosis.h"

namespace rxfleet::agent {
namespace {

constexpr std::string_view kDiagnosisReenumerationLoop = "reenumeration_loop";

SpeedFacts FactsOf(const AdapterSnapshot& snap, const std::optional<BosSpeeds>& bos,
                   absl::Duration at_speed_for, absl::Duration settle) {
  SpeedFacts facts;
  facts.device = snap.device;
  facts.chip = snap.chip;
  facts.managed = snap.device_class == DeviceClass::kSupported;
  facts.bos = bos;
  facts.topology = snap.topology;
  facts.at_speed_for = at_speed_for;
  facts.settle = settle;
  return facts;
}

std::string BusHistory(const std::vector<Appearance>& appearances) {
  return absl::StrJoin(appearances, ", ", [](std::string* out, const Appearance& a) {
    absl::StrAppend(out, a.port_path, " dev ", a.devnum);
  });
}

}  // namespace

void AdapterManager::OnAppearance(Record& r, bool arrival_after_start, AdapterEvents& events) {
  const absl::Time mono = MonoNow();
  r.at_speed_since = mono;
  // Only adapters the agent writes settle.
  r.settle_until = arrival_after_start && r.snap.device_class == DeviceClass::kSupported
                       ? mono + options_.settle
                       : absl::InfinitePast();
  r.snap.appearances.push_back(Appearance{r.snap.device.bus, r.snap.device.devnum,
                                          r.snap.device.port_path, r.snap.device.speed, WallNow()});
  if (r.snap.appearances.size() > AdapterSnapshot::kMaxAppearances) {
    r.snap.appearances.erase(r.snap.appearances.begin());
  }
  if (r.loop.OnAppearance(mono)) {
    ++r.snap.counters.reenumeration_loops;
    events.reenumeration_loop = true;
    if (options_.log) {
      options_.log(LogLevel::kWarning,
                   absl::StrFormat("adapter=%s reenumeration_loop: %d appearances within %s; "
                                   "quarantined (no writes, no experiments)",
                                   r.snap.id, r.loop.recent(),
                                   absl::FormatDuration(options_.reenumeration_loop.window)));
    }
  }
  r.snap.quarantined = r.loop.quarantined();
}

void AdapterManager::RefreshDiagnoses(Record& r, absl::Time mono) {
  r.snap.diagnoses = r.base_diagnoses;
  absl::Time until = r.settle_until;
  if (r.snap.device_class == DeviceClass::kSupported ||
      r.snap.device_class == DeviceClass::kObserved) {
    // Observe-only adapters are never written: no settle period, only the cause of the speed.
    const absl::Duration settle =
        r.snap.device_class == DeviceClass::kSupported ? options_.settle : absl::ZeroDuration();
    const SpeedFacts facts = FactsOf(r.snap, r.bos, mono - r.at_speed_since, settle);
    if (std::optional<Diagnosis> speed = DiagnoseSpeed(facts)) {
      r.snap.diagnoses.push_back(std::move(*speed));
    }
    if (Usb3SwitchPending(facts)) until = std::max(until, r.at_speed_since + settle);
  }
  r.snap.diagnoses.insert(r.snap.diagnoses.end(), r.family_diagnoses.begin(),
                          r.family_diagnoses.end());
  if (r.loop.quarantined()) {
    r.snap.diagnoses.push_back(
        {std::string(kDiagnosisReenumerationLoop),
         absl::StrFormat("re-enumerated more than %d times within %s on this connector (%s); "
                         "quarantined: no register writes and no experiments until it stays "
                         "put for %s. Seen in the field with vendor drivers in a USB 2 port "
                         "(\"Runtime PM usage count underflow!\"): use the in-kernel rtw89 "
                         "driver, another port or a powered hub",
                         options_.reenumeration_loop.count,
                         absl::FormatDuration(options_.reenumeration_loop.window),
                         BusHistory(r.snap.appearances),
                         absl::FormatDuration(options_.reenumeration_loop.window))});
    until = std::max(until, r.loop.release_at());
  }
  r.snap.settle_until = until > mono ? WallNow() + (until - mono) : absl::UnixEpoch();
}

void AdapterManager::MaybeReleaseQuarantine(Record& r, absl::Time mono) {
  if (!r.loop.MaybeRelease(mono)) return;
  r.snap.quarantined = false;
  if (options_.log) {
    options_.log(
        LogLevel::kInfo,
        absl::StrFormat("adapter=%s reenumeration_loop released: stayed put for %s", r.snap.id,
                        absl::FormatDuration(options_.reenumeration_loop.window)));
  }
}

bool AdapterManager::HoldOff(Record& r, absl::Time mono) {
  MaybeReleaseQuarantine(r, mono);
  RefreshDiagnoses(r, mono);
  absl::Time until = absl::InfinitePast();
  std::string reason;
  std::string message;
  const SpeedFacts facts = FactsOf(r.snap, r.bos, mono - r.at_speed_since, options_.settle);
  if (r.loop.quarantined()) {
    until = r.loop.release_at();
    reason = "ReenumerationLoop";
    message = absl::StrFormat(
        "quarantined for re-enumerating too often; released after %s "
        "without a new appearance",
        absl::FormatDuration(options_.reenumeration_loop.window));
  } else if (Usb3SwitchPending(facts)) {
    until = r.at_speed_since + options_.settle;
    reason = "Usb3SwitchPending";
    message = absl::StrFormat(
        "at %s on a connector with a USB 3 partner (%s): waiting for the driver's switch to "
        "USB 3 before writing",
        common::UsbSpeedDisplayName(r.snap.device.speed), r.snap.topology.peer_port_path);
  } else if (r.settle_until > mono) {
    until = r.settle_until;
    reason = "Settling";
    message = absl::StrFormat("arrived %s ago; no write during the %s settle period",
                              absl::FormatDuration(mono - r.at_speed_since),
                              absl::FormatDuration(options_.settle));
  }
  if (until <= mono) return false;
  r.next_due = until;
  if (r.snap.phase != AdapterPhase::kPending) r.snap.phase_since = WallNow();
  r.snap.phase = AdapterPhase::kPending;
  r.snap.reason = std::move(reason);
  r.snap.message = std::move(message);
  Publish(r, {});
  return true;
}

}  // namespace rxfleet::agent
