// What FleetServer keeps in step with its database (server/fleet_server.h): the configuration
// reloads of the change feed, and the flush loop that writes the registry and events and, on
// PostgreSQL, reads the hosts and events other replicas wrote.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/agent_service.h"
#include "server/experiments/controller.h"
#include "server/fleet_server.h"
#include "server/http/metrics.h"
#include "server/log.h"
#include "server/registry/debouncer.h"
#include "server/registry/event_log.h"
#include "server/registry/policy_set.h"
#include "server/registry/registry.h"
#include "server/store/change_feed.h"
#include "server/store/lease_keeper.h"
#include "server/store/store.h"

namespace rxfleet::server {

absl::Status FleetServer::ReloadConfig(uint64_t revision, bool resync) {
  metrics_->config_listener_up->Set(1);
  absl::StatusOr<ConfigState> config = store_->LoadConfig();
  if (!config.ok()) {
    metrics_->config_reload_failures->Increment();
    Log(LogLevel::kWarning, absl::StrCat("cannot reload the configuration (revision ", revision,
                                         "): ", config.status().message(), "; retrying"));
    return config.status();
  }
  // Experiments first: the bundles pushed for the new version carry their assignments.
  if (absl::Status reloaded = experiments_->Reload(config->revision); !reloaded.ok()) {
    metrics_->config_reload_failures->Increment();
    Log(LogLevel::kWarning, absl::StrCat("cannot reload the experiments (revision ", revision,
                                         "): ", reloaded.message(), "; retrying"));
    return reloaded;
  }
  metrics_->config_reloads->Increment();
  if (policies_->Replace(config->policies, config->bundle_version)) {
    Log(LogLevel::kInfo,
        absl::StrCat("configuration changed in the database (revision ", config->revision,
                     resync ? ", after the change listener reconnected" : "", "): bundle version ",
                     config->bundle_version, ", ", config->policies.size(), " policies; pushing"));
    debouncer_->Trigger();
  }
  return absl::OkStatus();
}

void FleetServer::FlushLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.flush_interval);
    if (stopping_) break;
    mu_.Unlock();
    Flush();
    if (changes_ != nullptr) {
      FollowRegistry();
      FollowEvents();
    }
    const Registry::Counts counts = registry_->counts();
    std::shared_ptr<const PolicySnapshot> snapshot = policies_->snapshot();
    metrics_->connected_agents->Set(static_cast<double>(agent_service_->connected()));
    metrics_->hosts->Set(static_cast<double>(counts.hosts));
    metrics_->adapters->Set(static_cast<double>(counts.adapters));
    metrics_->policies->Set(static_cast<double>(snapshot->policies.size()));
    metrics_->bundle_version->Set(static_cast<double>(snapshot->bundle_version));
    if (changes_ != nullptr) metrics_->config_listener_up->Set(changes_->connected() ? 1 : 0);
    metrics_->experiments_lease_held->Set(experiments_lease_->Fence().has_value() ? 1 : 0);
    mu_.Lock();
  }
}

void FleetServer::FollowEvents() {
  // Bounded reads: a replica that was away catches up a page at a time.
  constexpr size_t kPage = 1000;
  for (;;) {
    absl::StatusOr<std::vector<v1::Event>> stored =
        store_->LoadEventsAfter(events_->last_version(), kPage);
    if (!stored.ok()) {
      if (!follow_events_failing_) {
        Log(LogLevel::kError, absl::StrCat("cannot read the fleet's events (will retry every ",
                                           absl::FormatDuration(options_.flush_interval),
                                           "): ", stored.status().message()));
      }
      follow_events_failing_ = true;
      return;
    }
    if (follow_events_failing_) Log(LogLevel::kInfo, "reading the fleet's events works again");
    follow_events_failing_ = false;
    const size_t n = stored->size();
    events_->ApplyStored(*std::move(stored), absl::Now());
    if (n < kPage) return;
  }
}

void FleetServer::FollowRegistry() {
  absl::StatusOr<HostChanges> changes = store_->LoadHostChanges(registry_cursor_);
  if (!changes.ok()) {
    if (!follow_failing_) {
      Log(LogLevel::kError,
          absl::StrCat("cannot read the hosts of other servers (will retry every ",
                       absl::FormatDuration(options_.flush_interval),
                       "): ", changes.status().message()));
    }
    follow_failing_ = true;
    return;
  }
  if (follow_failing_) Log(LogLevel::kInfo, "reading the hosts of other servers works again");
  follow_failing_ = false;
  registry_cursor_ = changes->cursor;
  registry_->ApplyRemote(std::move(changes->hosts));
}

bool FleetServer::Flush() {
  // Audit events of `rxfleet-server tokens` (another process) enter the event log here and
  // leave the file's queue with the save that persists them.
  std::vector<int64_t> local_audit;
  // Among servers sharing a database, the experiments lease holder takes them, so each is
  // recorded once.
  const bool take_local_audit = changes_ == nullptr || experiments_lease_ == nullptr ||
                                experiments_lease_->Fence().has_value();
  absl::StatusOr<std::vector<LocalAuditEvent>> pending = std::vector<LocalAuditEvent>();
  if (take_local_audit) pending = store_->PendingLocalAudit();
  if (pending.ok()) {
    for (LocalAuditEvent& entry : *pending) {
      if (local_audit_recorded_.insert(entry.id).second) {
        events_->Record(std::move(entry.event), entry.time);
      }
      local_audit.push_back(entry.id);
    }
  }
  std::vector<HostRecord> hosts = registry_->TakeDirty();
  std::vector<v1::Event> events = events_->TakeUnsaved();
  if (hosts.empty() && events.empty() && local_audit.empty()) return true;
  const absl::StatusOr<RegistrySaveResult> saved =
      store_->SaveRegistry(hosts, events, options_.max_events, absl::Now() - options_.event_max_age,
                           local_audit, absl::Now() - options_.audit_max_age);
  if (saved.ok()) {
    registry_->SessionsSaved(*saved);
    if (!saved->superseded.empty()) {
      Log(LogLevel::kInfo,
          absl::StrCat(saved->superseded.size(),
                       " host(s) now held by another server's agent session (e.g. ",
                       saved->superseded.front(), "): their stale records here were not saved"));
    }
    for (int64_t id : local_audit) local_audit_recorded_.erase(id);
    if (flush_failing_) Log(LogLevel::kInfo, "registry writes to the database work again");
    flush_failing_ = false;
    return true;
  }
  metrics_->store_write_failures->Increment();
  if (!flush_failing_) {
    Log(LogLevel::kError, absl::StrCat("cannot save the registry (will retry every ",
                                       absl::FormatDuration(options_.flush_interval),
                                       "): ", saved.status().message()));
  }
  flush_failing_ = true;
  registry_->ReturnDirty(hosts);
  events_->ReturnUnsaved(std::move(events));
  return false;
}

}  // namespace rxfleet::server
