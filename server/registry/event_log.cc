#include "server/registry/event_log.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"

namespace rxfleet::server {
namespace {

constexpr char kEventSource[] = "rxfleet-server";

uint64_t VersionOf(const v1::Event& event) {
  uint64_t version = 0;
  return absl::SimpleAtoi(event.metadata().resource_version(), &version) ? version : 0;
}

}  // namespace

bool EventMatches(const v1::ListEventsRequest& filter, const v1::Event& event) {
  if (filter.audit() != event.has_audit()) return false;
  if (!filter.involved_object_kind().empty() &&
      filter.involved_object_kind() != event.involved_object().kind()) {
    return false;
  }
  if (!filter.involved_object_name().empty() &&
      filter.involved_object_name() != event.involved_object().name()) {
    return false;
  }
  if (!filter.host_id().empty() && filter.host_id() != event.host_id()) return false;
  if (filter.type() != v1::EVENT_TYPE_UNSPECIFIED && filter.type() != event.type()) return false;
  if (filter.has_since_time() &&
      common::TimeFromProto(event.last_time()) < common::TimeFromProto(filter.since_time())) {
    return false;
  }
  return true;
}

EventLog::EventLog(EventLogOptions options, std::vector<v1::Event> loaded, uint64_t last_version)
    : options_(std::move(options)), last_version_(last_version) {
  absl::MutexLock lock(&mu_);
  dropped_through_ = last_version;
  for (v1::Event& event : loaded) {
    const uint64_t version = VersionOf(event);
    if (version == 0) continue;
    // Audit events reach further back than fleet events (kept by age only); only the fleet
    // events say which versions are still complete.
    if (!event.has_audit()) dropped_through_ = std::min(dropped_through_, version - 1);
    last_version_ = std::max(last_version_, version);
    Insert(std::move(event));
  }
  PruneLocked(absl::Now());
}

EventLog::FoldKey EventLog::KeyOf(const v1::Event& event) {
  return {event.involved_object().kind(),
          event.involved_object().name(),
          event.host_id(),
          event.type(),
          event.reason(),
          event.message()};
}

void EventLog::Insert(v1::Event event) {
  const uint64_t version = VersionOf(event);
  if (!event.has_audit()) by_key_[KeyOf(event)] = version;
  (event.has_audit() ? audit_versions_ : fleet_versions_).insert(version);
  by_name_[event.metadata().name()] = version;
  by_version_[version] = std::move(event);
}

v1::Event EventLog::QueueLocked(v1::Event event, absl::Time now) {
  const auto fold = [&](v1::Event& into) {
    into.set_count(into.count() + 1);
    *into.mutable_last_time() = common::TimeToProto(now);
    *into.mutable_metadata()->mutable_update_time() = common::TimeToProto(now);
  };
  const auto recent = [&](const v1::Event& earlier) {
    return now - common::TimeFromProto(earlier.last_time()) <= options_.fold_window;
  };
  if (!event.has_audit()) {
    const FoldKey key = KeyOf(event);
    if (auto queued = pending_by_key_.find(key);
        queued != pending_by_key_.end() && recent(pending_new_[queued->second])) {
      fold(pending_new_[queued->second]);
      return pending_new_[queued->second];
    }
    if (auto held = by_key_.find(key); held != by_key_.end()) {
      auto previous = by_version_.find(held->second);
      if (previous != by_version_.end() && recent(previous->second)) {
        const std::string& name = previous->second.metadata().name();
        auto [it, first] = unsaved_.try_emplace(name, previous->second);
        v1::Event& folded = it->second;
        fold(folded);
        folded.mutable_metadata()->clear_resource_version();
        return folded;
      }
    }
  }
  v1::ObjectMeta* meta = event.mutable_metadata();
  meta->clear_name();  // the store names it after its version
  meta->clear_uid();
  meta->clear_resource_version();
  meta->set_generation(1);
  *meta->mutable_create_time() = common::TimeToProto(now);
  *meta->mutable_update_time() = common::TimeToProto(now);
  if (event.source().empty()) event.set_source(kEventSource);
  *event.mutable_first_time() = common::TimeToProto(now);
  *event.mutable_last_time() = common::TimeToProto(now);
  event.set_count(1);
  if (!event.has_audit()) pending_by_key_[KeyOf(event)] = pending_new_.size();
  pending_new_.push_back(std::move(event));
  return pending_new_.back();
}

void EventLog::ApplyStored(std::vector<v1::Event> events, absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (v1::Event& event : events) {
    const uint64_t version = VersionOf(event);
    if (version <= last_version_) continue;
    if (auto held = by_name_.find(event.metadata().name()); held != by_name_.end()) {
      auto previous = by_version_.find(held->second);
      if (previous != by_version_.end()) {
        auto key = by_key_.find(KeyOf(previous->second));
        if (key != by_key_.end() && key->second == previous->first) by_key_.erase(key);
        (previous->second.has_audit() ? audit_versions_ : fleet_versions_).erase(previous->first);
        by_version_.erase(previous);
      }
    }
    last_version_ = version;
    Insert(std::move(event));
    const v1::Event& stored = by_version_[version];
    for (const auto& [id, watcher] : watchers_) {
      if (EventMatches(watcher.filter, stored)) watcher.fn(stored);
    }
  }
  PruneLocked(now);
}

v1::Event EventLog::Record(v1::Event event, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (options_.follow_store) return QueueLocked(std::move(event), now);
  const uint64_t version = ++last_version_;
  v1::Event* stored = nullptr;
  if (!event.has_audit()) {
    auto key = by_key_.find(KeyOf(event));
    if (key != by_key_.end()) {
      auto previous = by_version_.find(key->second);
      if (previous != by_version_.end() &&
          now - common::TimeFromProto(previous->second.last_time()) <= options_.fold_window) {
        v1::Event folded = std::move(previous->second);
        fleet_versions_.erase(previous->first);
        by_version_.erase(previous);
        folded.set_count(folded.count() + 1);
        *folded.mutable_last_time() = common::TimeToProto(now);
        folded.mutable_metadata()->set_resource_version(absl::StrCat(version));
        *folded.mutable_metadata()->mutable_update_time() = common::TimeToProto(now);
        Insert(std::move(folded));
        stored = &by_version_[version];
      }
    }
  }
  if (stored == nullptr) {
    v1::ObjectMeta* meta = event.mutable_metadata();
    meta->set_name(absl::StrCat("ev-", version));
    meta->set_uid(meta->name());
    meta->set_resource_version(absl::StrCat(version));
    meta->set_generation(1);
    *meta->mutable_create_time() = common::TimeToProto(now);
    *meta->mutable_update_time() = common::TimeToProto(now);
    if (event.source().empty()) event.set_source(kEventSource);
    *event.mutable_first_time() = common::TimeToProto(now);
    *event.mutable_last_time() = common::TimeToProto(now);
    event.set_count(1);
    Insert(std::move(event));
    stored = &by_version_[version];
  }
  const v1::Event result = *stored;
  unsaved_[result.metadata().name()] = result;
  for (const auto& [id, watcher] : watchers_) {
    if (EventMatches(watcher.filter, result)) watcher.fn(result);
  }
  PruneLocked(now);
  return result;
}

void EventLog::PruneLocked(absl::Time now) {
  auto drop = [this](std::set<uint64_t>& versions) {
    const uint64_t version = *versions.begin();
    versions.erase(versions.begin());
    auto it = by_version_.find(version);
    if (it == by_version_.end()) return;
    dropped_through_ = std::max(dropped_through_, version);
    auto key = by_key_.find(KeyOf(it->second));
    if (key != by_key_.end() && key->second == version) by_key_.erase(key);
    auto name = by_name_.find(it->second.metadata().name());
    if (name != by_name_.end() && name->second == version) by_name_.erase(name);
    by_version_.erase(it);
  };
  auto oldest_before = [this](const std::set<uint64_t>& versions, absl::Time min_time) {
    if (versions.empty()) return false;
    auto it = by_version_.find(*versions.begin());
    return it != by_version_.end() && common::TimeFromProto(it->second.last_time()) < min_time;
  };
  const absl::Time fleet_min_time = now - options_.max_age;
  while (fleet_versions_.size() > std::max<size_t>(1, options_.max_events) ||
         oldest_before(fleet_versions_, fleet_min_time)) {
    drop(fleet_versions_);
  }
  const absl::Time audit_min_time = now - options_.audit_max_age;
  while (oldest_before(audit_versions_, audit_min_time)) drop(audit_versions_);
}

std::vector<v1::Event> EventLog::List(const v1::ListEventsRequest& filter, uint64_t after_version,
                                      size_t limit, bool* more) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Event> out;
  *more = false;
  for (auto it = by_version_.upper_bound(after_version); it != by_version_.end(); ++it) {
    if (!EventMatches(filter, it->second)) continue;
    if (out.size() == limit) {
      *more = true;
      break;
    }
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<uint64_t> EventLog::Watch(const v1::ListEventsRequest& filter,
                                         std::optional<uint64_t> after_version, WatchFn fn) {
  absl::MutexLock lock(&mu_);
  if (after_version.has_value()) {
    if (*after_version < dropped_through_) {
      return absl::OutOfRangeError(
          absl::StrCat("events after resource version ", *after_version,
                       " are no longer held (the oldest resumable version is ", dropped_through_,
                       "); list the events, then watch from the last listed version"));
    }
    for (auto it = by_version_.upper_bound(*after_version); it != by_version_.end(); ++it) {
      if (EventMatches(filter, it->second)) fn(it->second);
    }
  }
  const uint64_t id = next_watch_id_++;
  watchers_.emplace(id, Watcher{filter, std::move(fn)});
  return id;
}

void EventLog::Unwatch(uint64_t watch_id) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watch_id);
}

std::vector<v1::Event> EventLog::TakeUnsaved() {
  absl::MutexLock lock(&mu_);
  std::map<uint64_t, v1::Event> ordered;
  std::vector<v1::Event> unversioned;  // follow_store's folds: the store numbers them
  for (auto& [name, event] : unsaved_) {
    const uint64_t version = VersionOf(event);
    if (version == 0) {
      unversioned.push_back(std::move(event));
    } else {
      ordered.emplace(version, std::move(event));
    }
  }
  unsaved_.clear();
  std::vector<v1::Event> out;
  out.reserve(ordered.size() + unversioned.size() + pending_new_.size());
  for (auto& [version, event] : ordered) out.push_back(std::move(event));
  for (v1::Event& event : unversioned) out.push_back(std::move(event));
  for (v1::Event& event : pending_new_) out.push_back(std::move(event));
  pending_new_.clear();
  pending_by_key_.clear();
  return out;
}

void EventLog::ReturnUnsaved(std::vector<v1::Event> events) {
  absl::MutexLock lock(&mu_);
  for (v1::Event& event : events) {
    if (event.metadata().name().empty()) {  // follow_store: a new event, still to be numbered
      if (!event.has_audit()) pending_by_key_.try_emplace(KeyOf(event), pending_new_.size());
      pending_new_.push_back(std::move(event));
      continue;
    }
    auto it = unsaved_.find(event.metadata().name());
    // A newer fold of the same event recorded meanwhile supersedes the returned one.
    if (it != unsaved_.end() && VersionOf(it->second) >= VersionOf(event)) continue;
    unsaved_[event.metadata().name()] = std::move(event);
  }
}

uint64_t EventLog::last_version() const {
  absl::MutexLock lock(&mu_);
  return last_version_;
}

size_t EventLog::size() const {
  absl::MutexLock lock(&mu_);
  return by_version_.size();
}

}  // namespace rxfleet::server
