#pragma once

#include <string_view>

#include "absl/time/time.h"
#include "agent/reconcile/adapter_snapshot.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/common.pb.h"

namespace rxfleet::agent {

/// The rxfleet.v1.AdapterState of a phase (kGone -> ADAPTER_STATE_GONE, kOtherVendor ->
/// ADAPTER_STATE_IGNORED_OTHER_VENDOR, ...).
v1::AdapterState AdapterPhaseToProto(AdapterPhase phase);

/// The rxfleet.v1.UsbSpeed of a speed (numbers equal libusb's, so this is a checked cast).
v1::UsbSpeed UsbSpeedToProto(common::UsbSpeed speed);

/// Fills a v1 Adapter from a snapshot, as both the local status service and the server link
/// report it: metadata.name = adapter id, host_id, and the status with identity, desired
/// settings with per-field provenance (source, name, arm, priority, bundle version, file),
/// observed register 0 (raw and decoded), state, conditions (`Reachable`, `Applied`, `InSync`,
/// each with the snapshot's reason/message and phase_since as transition time), diagnoses
/// (WARNING for usb3_switch_failed, hub_limits_speed, reenumeration_loop, unknown_id_unbound
/// and storage_mode, INFO otherwise), counters and times.
/// `report_time` becomes status.report_time. Clears `out` first.
void AdapterSnapshotToProto(const AdapterSnapshot& snapshot, std::string_view host_id,
                            absl::Time report_time, v1::Adapter* out);

}  // namespace rxfleet::agent
