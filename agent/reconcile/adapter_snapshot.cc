#include "agent/reconcile/adapter_snapshot.h"

namespace rxfleet::agent {

std::string_view AdapterPhaseName(AdapterPhase phase) {
  switch (phase) {
    case AdapterPhase::kPending:
      return "pending";
    case AdapterPhase::kApplied:
      return "applied";
    case AdapterPhase::kDrifted:
      return "drifted";
    case AdapterPhase::kAsleep:
      return "asleep";
    case AdapterPhase::kDisabledByDriver:
      return "disabled_by_driver";
    case AdapterPhase::kUnsupported:
      return "unsupported";
    case AdapterPhase::kStorageMode:
      return "storage_mode";
    case AdapterPhase::kOtherVendor:
      return "ignored_other_vendor";
    case AdapterPhase::kGone:
      return "gone";
    case AdapterPhase::kError:
      return "error";
    case AdapterPhase::kInvalidSettings:
      return "invalid_settings";
    case AdapterPhase::kObserved:
      return "observed";
  }
  return "pending";
}

AdapterObserver::~AdapterObserver() = default;

}  // namespace rxfleet::agent
