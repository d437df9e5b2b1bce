#include "server/api/probe_slot_table.h"

#include <utility>
#include <vector>

#include "common/proto/time.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "server/api/explain.h"
#include "server/experiments/controller.h"
#include "server/log.h"

namespace rxfleet::server {

ProbeSlotTable::ProbeSlotTable(Registry* registry) : registry_(registry) {}

void ProbeSlotTable::Sync(const PolicySnapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  if (synced_ && snapshot.bundle_version <= synced_version_) return;
  synced_version_ = snapshot.bundle_version;
  std::vector<common::Policy> probes = ProbeSlotPlan::ProbePolicies(snapshot.valid);
  if (synced_ && probes == plan_.probe_policies()) return;
  synced_ = true;
  std::vector<common::AdapterAttributes> adapters;
  if (!probes.empty()) {
    // Listed by (host, adapter): one capability look-up per host.
    std::string host;
    bool can_probe = false;
    for (const v1::Adapter& adapter : registry_->ListAdapters(false)) {
      if (adapter.host_id() != host || host.empty()) {
        host = adapter.host_id();
        can_probe = registry_->HostHasCapability(host, kProbesCapability);
      }
      if (can_probe) adapters.push_back(AttributesOf(adapter));
    }
  }
  plan_.Reset(probes, adapters);
  bytes_.clear();
  std::string refreshed;
  for (const common::AdapterAttributes& adapter : adapters) {
    if (adapter.host == refreshed) continue;
    refreshed = adapter.host;
    RefreshHostLocked(refreshed);
  }
  LogNotesLocked();
}

void ProbeSlotTable::UpdateHost(std::string_view host_id) {
  absl::MutexLock lock(&mu_);
  const std::string host(host_id);
  if (plan_.probe_policies().empty()) {
    // Nothing probes: no host has slots (Reset emptied the plan).
    bytes_.erase(host);
    return;
  }
  std::vector<common::AdapterAttributes> adapters;
  if (registry_->HostHasCapability(host, kProbesCapability)) {
    for (const v1::Adapter& adapter : registry_->HostAdapters(host)) {
      adapters.push_back(AttributesOf(adapter));
    }
  }
  plan_.SetHost(host, adapters);
  RefreshHostLocked(host);
  LogNotesLocked();
}

std::string ProbeSlotTable::HostBytes(std::string_view host_id) const {
  absl::MutexLock lock(&mu_);
  auto it = bytes_.find(host_id);
  return it == bytes_.end() ? std::string() : it->second;
}

std::vector<ProbeSlotGroup> ProbeSlotTable::Groups() const {
  absl::MutexLock lock(&mu_);
  return plan_.Groups();
}

void ProbeSlotTable::RefreshHostLocked(const std::string& host_id) {
  const std::vector<ProbeSlotEntry> slots = plan_.HostSlots(host_id);
  if (slots.empty()) {
    bytes_.erase(host_id);
    return;
  }
  v1::PolicyBundle only_slots;
  for (const ProbeSlotEntry& slot : slots) {
    v1::ProbeSlot* out = only_slots.add_probe_slots();
    out->set_adapter_id(slot.adapter_id);
    out->set_policy(slot.policy);
    *out->mutable_offset() = common::DurationToProto(slot.offset);
  }
  bytes_[host_id] = only_slots.SerializeAsString();
}

void ProbeSlotTable::LogNotesLocked() {
  for (const ProbeSlotNote& note : plan_.TakeNotes()) {
    Log(note.overlap ? LogLevel::kWarning : LogLevel::kInfo, note.message);
  }
}

}  // namespace rxfleet::server
