#pragma once

// Private to the AdapterManager's translation units (adapter_manager*.cc).

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/reconcile/adapter_guard.h"
#include "agent/reconcile/adapter_manager.h"
#include "agent/reconcile/backoff.h"
#include "agent/usb/bos.h"
#include "common/chips/family.h"

namespace rxfleet::agent {

struct AdapterManager::Record {
  explicit Record(const AdapterManagerOptions& options)
      : backoff(options.backoff), limiter(options.drift_repair), loop(options.reenumeration_loop) {}

  AdapterSnapshot snap;
  // The reg 0 word last verified on this device (see StepInput::last_verified).
  std::optional<uint32_t> last_verified;
  Backoff backoff;
  RepairRateLimiter limiter;
  absl::Time next_due = absl::InfinitePast();
  absl::Time gone_at = absl::InfiniteFuture();
  // Phase/reason key of the last logged line, so identical states are logged once.
  std::string logged_key;
  bool published = false;
  // Diagnoses of the device itself (IdentifyDevice), before speed, family and loop findings.
  std::vector<Diagnosis> base_diagnoses;
  // The last observe-only pass's findings (AssessObservation), kept across RefreshDiagnoses.
  std::vector<Diagnosis> family_diagnoses;
  // The observe-only family entry the device was identified as (by id or bound driver).
  const common::ObservedChip* observed = nullptr;
  // Speed judgement inputs (adapter_manager_guard.cc).
  std::optional<BosSpeeds> bos;
  absl::Time at_speed_since = absl::InfinitePast();  // monotonic
  absl::Time settle_until = absl::InfinitePast();    // monotonic
  ReenumerationLoopDetector loop;
  IoBurstTracker burst;
};

}  // namespace rxfleet::agent
