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
  // Speed judgement inputs (adapter_manager_guard.cc).
  std::vector<Diagnosis> identity_diagnoses;
  std::optional<BosSpeeds> bos;
  absl::Time at_speed_since = absl::InfinitePast();  // monotonic
  absl::Time settle_until = absl::InfinitePast();    // monotonic
  ReenumerationLoopDetector loop;
  IoBurstTracker burst;
};

}  // namespace rxfleet::agent
