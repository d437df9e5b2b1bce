#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/fleet_service.pb.h"

namespace rxfleet::server {

struct EventLogOptions {
  /// Fleet (non-audit) events kept (in memory and in the store); the oldest are dropped
  /// first. >= 1. Audit events do not count and are never dropped for volume.
  size_t max_events = 10000;
  /// Fleet events whose last_time is older than this are dropped.
  absl::Duration max_age = absl::Hours(24 * 7);
  /// Audit events whose last_time is older than this are dropped (their only retention).
  absl::Duration audit_max_age = absl::Hours(24 * 365);
  /// A repeat of the same (involved object, host, type, reason, message) within this window of
  /// the earlier event's last_time is folded into it (count + 1, new last_time and version).
  /// Audit events are never folded.
  absl::Duration fold_window = absl::Minutes(10);
  /// Servers sharing a database (PostgreSQL): events take their resource versions from the
  /// store, so every server numbers and orders them alike. Record then queues an event
  /// without a version (a repeat folds into the queued event, or into a copy of the held one,
  /// which may be another server's); TakeUnsaved hands the queue to Store::SaveRegistry,
  /// which numbers it; ApplyStored brings the stored events of every server back in version
  /// order, and only then do List, Watch and watchers see them.
  bool follow_store = false;
};

/// True if `event` passes the filters of a ListEventsRequest (audit, involved object kind and
/// name, host, type, since_time); paging fields are ignored.
bool EventMatches(const v1::ListEventsRequest& filter, const v1::Event& event);

/// The fleet's events with retention, folding, resumable watches and write-behind persistence.
///
/// Every recorded (or folded) event gets the next resource_version (decimal, strictly
/// increasing, continuing after the stored maximum). Watchers see every change in version
/// order. Thread-safe. Watcher callbacks run under the log's lock, so they must not block and
/// must not call back into the log.
class EventLog {
 public:
  /// `loaded`: events from the store, oldest first; `last_version`: the highest version ever
  /// assigned (the store's last_event_version).
  EventLog(EventLogOptions options, std::vector<v1::Event> loaded, uint64_t last_version);

  /// Records an event at `now` (metadata, first/last time, count and source filled in; the
  /// caller sets type, reason, message, involved_object, host_id, audit). Returns the stored
  /// event (possibly a folded earlier one).
  v1::Event Record(v1::Event event, absl::Time now);

  /// Events matching `filter` with version > `after_version`, oldest first, at most `limit`.
  /// `more` is set to true if further matching events exist.
  std::vector<v1::Event> List(const v1::ListEventsRequest& filter, uint64_t after_version,
                              size_t limit, bool* more) const;

  using WatchFn = std::function<void(const v1::Event&)>;

  /// Registers `fn` for every event recorded from now on that matches `filter`. If
  /// `after_version` is set, first calls `fn` (before returning) for every held event with a
  /// higher version that matches, so nothing is missed between a List and a Watch.
  /// Errors: OutOfRange if events after `after_version` were already dropped by retention
  /// ("list, then watch again"). Returns the watch id for Unwatch.
  absl::StatusOr<uint64_t> Watch(const v1::ListEventsRequest& filter,
                                 std::optional<uint64_t> after_version, WatchFn fn);
  void Unwatch(uint64_t watch_id);

  /// follow_store: events the store holds with versions above last_version(), in version
  /// order (Store::LoadEventsAfter): each replaces the held event of its name, moves
  /// last_version() and reaches the watchers. Events at or below last_version() are skipped.
  void ApplyStored(std::vector<v1::Event> events, absl::Time now);

  /// Events recorded or folded since the last call, for the store (in version order; with
  /// follow_store, folds of held events first, then new events without a version, in the
  /// order recorded).
  std::vector<v1::Event> TakeUnsaved();
  /// Puts events back after a failed save so the next save retries them.
  void ReturnUnsaved(std::vector<v1::Event> events);

  /// Highest version assigned so far.
  uint64_t last_version() const;
  size_t size() const;
  const EventLogOptions& options() const { return options_; }

 private:
  using FoldKey = std::tuple<std::string, std::string, std::string, int, std::string, std::string>;
  static FoldKey KeyOf(const v1::Event& event);
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Insert(v1::Event event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Watcher {
    v1::ListEventsRequest filter;
    WatchFn fn;
  };

  const EventLogOptions options_;
  mutable absl::Mutex mu_;
  uint64_t last_version_ ABSL_GUARDED_BY(mu_);
  /// Events must have versions > this to be resumable (higher ones were never dropped).
  uint64_t dropped_through_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, v1::Event> by_version_ ABSL_GUARDED_BY(mu_);
  // Versions in by_version_ of fleet and of audit events (each retained on its own terms).
  std::set<uint64_t> fleet_versions_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> audit_versions_ ABSL_GUARDED_BY(mu_);
  std::map<FoldKey, uint64_t> by_key_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Event> unsaved_ ABSL_GUARDED_BY(mu_);  // by name
  std::map<std::string, uint64_t> by_name_ ABSL_GUARDED_BY(mu_);   // held events' versions
  // follow_store: new events waiting for the store to number them, and the fleet ones by
  // fold key (index into pending_new_).
  std::vector<v1::Event> pending_new_ ABSL_GUARDED_BY(mu_);
  std::map<FoldKey, size_t> pending_by_key_ ABSL_GUARDED_BY(mu_);
  /// follow_store's Record.
  v1::Event QueueLocked(v1::Event event, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<uint64_t, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_watch_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace rxfleet::server
