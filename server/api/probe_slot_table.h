#pragma once

// The server's live plan of policy probe slots (server/registry/probe_slots.h) and every host's
// slots serialised as PolicyBundle.probe_slots entries (field 6), the host fields AgentService
// appends to the shared bundle body next to the host's experiment assignments
// (server/api/bundle_message.h).
//
// Members: the adapters the registry lists (not GONE) of hosts whose last Hello announced the
// `probes` capability (kProbesCapability); an agent that does not run probes needs no slot
// and would only waste one. Attributes as every prediction builds them (AttributesOf,
// server/api/explain.h).
//
// Cost at fleet scale: Sync rebuilds the plan in one pass over the fleet only when the
// probe-setting valid policies changed (a bundle version that changed nothing else, e.g. an
// experiment, costs a comparison of those policies); UpdateHost re-resolves one host; HostBytes
// is a lookup. So a push costs one lookup per stream, never a pass over the fleet per stream.
//
// Thread-safe.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/registry/policy_set.h"
#include "server/registry/probe_slots.h"
#include "server/registry/registry.h"

namespace rxfleet::server {

class ProbeSlotTable {
 public:
  /// `registry` must outlive the table.
  explicit ProbeSlotTable(Registry* registry);

  /// Follows the policies of `snapshot` (older bundle versions than the last seen are
  /// ignored): rebuilds the plan over the whole fleet when the valid policies with a probe
  /// differ from the plan's. Logs the plan's overcommit notes.
  void Sync(const PolicySnapshot& snapshot);

  /// Re-reads host `host_id`'s adapters and capability from the registry (after a Hello, an
  /// inventory or an update) and moves only that host's slots. Logs the plan's notes.
  void UpdateHost(std::string_view host_id);

  /// The host's slots as serialised PolicyBundle field 6 entries; empty without slots.
  std::string HostBytes(std::string_view host_id) const;

  /// The plan's groups (for tests and diagnostics).
  std::vector<ProbeSlotGroup> Groups() const;

 private:
  void RefreshHostLocked(const std::string& host_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogNotesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Registry* const registry_;
  mutable absl::Mutex mu_;
  uint64_t synced_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  ProbeSlotPlan plan_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string, std::less<>> bytes_ ABSL_GUARDED_BY(mu_);  ///< by host
};

}  // namespace rxfleet::server
