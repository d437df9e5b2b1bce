// The AdapterManager's read-only pass of an observe-only adapter (rtw88, mt76).

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/reconcile/adapter_manager.h"
#include "agent/reconcile/adapter_record.h"
#include "agent/reconcile/failure_reason.h"
#include "agent/usb/observe.h"

namespace rxfleet::agent {
namespace {

// True when <netdev>/operstate (the directory above `statistics_dir`) reads "up".
bool NetdevUp(const std::string& statistics_dir) {
  if (statistics_dir.empty()) return false;
  std::ifstream in(statistics_dir + "/../operstate");
  std::string state;
  return static_cast<bool>(in >> state) && state == "up";
}

}  // namespace

void AdapterManager::Observe(Record& r) {
  const absl::Time wall = WallNow();
  RefreshNetdev(r);
  {
    std::shared_ptr<const PolicySet> policies;
    const common::AdapterAttributes attributes = AttributesOf(r, &policies);
    r.snap.probe = policies->ResolveProbe(attributes);
  }
  ObservationInput input;
  input.chip = r.observed;
  input.speed = r.snap.device.speed;
  input.netdev_up = NetdevUp(r.snap.statistics_dir);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = host_labels_.find("kernel"); it != host_labels_.end()) {
      input.kernel_release = it->second;
    }
  }
  const common::DriverLayout& layout = *input.chip->layout;
  // Registers are read only while the netdev is up: the driver may have the chip in a power
  // state where they read garbage (and a read would only be discarded).
  if (input.netdev_up) {
    absl::StatusOr<std::unique_ptr<RegisterIo>> io =
        source_.OpenFamilyRegisterIo(r.snap.device, common::ReadAddresses(layout), layout.protocol);
    absl::Status gone;
    if (!io.ok()) {
      if (absl::IsUnavailable(io.status())) gone = io.status();
      input.read_errors.push_back(absl::StrCat("open: ", io.status().message()));
    } else {
      for (uint32_t address : common::ReadAddresses(layout)) {
        absl::StatusOr<uint32_t> word = (*io)->Read32(address);
        if (word.ok()) {
          input.words[address] = *word;
          continue;
        }
        if (absl::IsUnavailable(word.status())) gone = word.status();
        input.read_errors.push_back(std::string(word.status().message()));
        break;
      }
      io->reset();
    }
    if (!gone.ok()) {
      r.snap.last_failure_reason = std::string(FailureReasonFromStatus(gone));
      ++r.snap.counters.failures;
      MarkGone(r, "DeviceGone", absl::StrCat("read failed: ", gone.message()));
      rescan_requested_ = true;
      AdapterEvents events;
      events.failure_reason = r.snap.last_failure_reason;
      Publish(r, events);
      return;
    }
  }
  const Observation observation = AssessObservation(input);
  r.family_diagnoses = observation.diagnoses;
  const absl::Time mono = MonoNow();
  MaybeReleaseQuarantine(r, mono);  // a quarantine only ever stops writes: reads go on
  RefreshDiagnoses(r, mono);
  if (observation.judged) {
    r.snap.observed_words = input.words;
    r.snap.observed_fields = observation.fields;
    r.snap.observed_time = wall;
  } else {
    r.snap.observed_words.clear();
    r.snap.observed_fields.clear();
  }
  if (r.snap.phase != AdapterPhase::kObserved) r.snap.phase_since = wall;
  r.snap.phase = AdapterPhase::kObserved;
  r.snap.reason = observation.judged ? "Observed" : "NotJudged";
  std::string message =
      absl::StrFormat("%s adapter, observe-only: registers read, never written", r.snap.family);
  if (!observation.judged) {
    absl::StrAppend(&message, "; values not judged: ", observation.not_judged_reason);
  }
  r.snap.message = std::move(message);
  r.next_due = mono + options_.reconcile_period;
  Publish(r, {});
}

}  // namespace rxfleet::agent
