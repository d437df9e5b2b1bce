// Size reason: hosts, adapters and their bundles share one lock and one index; splitting
// the file would split that invariant across files.
#include "server/registry/registry.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {
namespace {

using common::TimeFromProto;
using common::TimeToProto;
using common::ToAbslView;

absl::Status TooManyAdapters(std::string_view host_id, size_t count, size_t max) {
  return absl::InvalidArgumentError(absl::StrCat(
      "host ", ToAbslView(host_id), " would have ", count, " adapters; at most ", max,
      " adapters per host (rxfleet-server --max-adapters-per-host); nothing was changed"));
}

void SetCondition(v1::HostStatus* status, std::string_view type, bool value,
                  std::string_view reason, std::string_view message, absl::Time since) {
  v1::Condition* condition = status->add_conditions();
  condition->set_type(std::string(type));
  condition->set_status(value ? v1::CONDITION_STATUS_TRUE : v1::CONDITION_STATUS_FALSE);
  condition->set_reason(std::string(reason));
  condition->set_message(std::string(message));
  *condition->mutable_last_transition_time() = TimeToProto(since);
}

}  // namespace

bool IsGone(const v1::Adapter& adapter) {
  return adapter.status().state() == v1::ADAPTER_STATE_GONE;
}

namespace {

constexpr char kHoldPrefix[] = "hold ";

v1::Event AdapterEvent(const v1::Adapter& adapter, v1::EventType type, std::string reason,
                       std::string message) {
  v1::Event event;
  event.set_type(type);
  event.set_reason(std::move(reason));
  event.set_message(std::move(message));
  event.mutable_involved_object()->set_kind("Adapter");
  event.mutable_involved_object()->set_name(adapter.metadata().name());
  event.mutable_involved_object()->set_host_id(adapter.host_id());
  event.set_host_id(adapter.host_id());
  event.set_source("rxfleet-agent");
  return event;
}

// The hold the agent read back from the register; nullopt when it has no observation.
std::optional<uint32_t> ObservedHold(const v1::Adapter& adapter) {
  const v1::ObservedRxAgg& observed = adapter.status().observed();
  if (observed.registers_size() == 0) return std::nullopt;
  return observed.decoded().hold_us();
}

std::string StateWord(v1::AdapterState state) {
  std::string name = v1::AdapterState_Name(state);
  constexpr absl::string_view kPrefix = "ADAPTER_STATE_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

bool WarningState(v1::AdapterState state) {
  return state == v1::ADAPTER_STATE_ERROR || state == v1::ADAPTER_STATE_DRIFTED ||
         state == v1::ADAPTER_STATE_DISABLED_BY_DRIVER ||
         state == v1::ADAPTER_STATE_INVALID_SETTINGS;
}

// "adapter port-1-1.3" in a NACK detail, not followed by more of an id (port-1-1.30).
bool NamesAdapter(absl::string_view detail, absl::string_view id) {
  const std::string needle = absl::StrCat("adapter ", id);
  for (size_t at = detail.find(needle); at != absl::string_view::npos;
       at = detail.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end == detail.size()) return true;
    const char next = detail[end];
    if (!absl::ascii_isalnum(static_cast<unsigned char>(next)) && next != '-' && next != '.' &&
        next != '_') {
      return true;
    }
  }
  return false;
}

// The adapter events of a report, with the host id the registry knows (an agent's adapter may
// leave Adapter.host_id empty).
void AppendEvents(std::vector<v1::Event> events, const std::string& host_id,
                  std::vector<v1::Event>& out) {
  for (v1::Event& event : events) {
    event.set_host_id(host_id);
    event.mutable_involved_object()->set_host_id(host_id);
    out.push_back(std::move(event));
  }
}

}  // namespace

std::vector<v1::Event> AdapterEvents(const v1::Adapter* before, const v1::Adapter& after) {
  std::vector<v1::Event> events;
  if (before == nullptr) return events;
  const v1::AdapterCounters& was = before->status().counters();
  const v1::AdapterCounters& now = after.status().counters();
  const std::optional<uint32_t> old_hold = ObservedHold(*before);
  const std::optional<uint32_t> new_hold = ObservedHold(after);
  const bool hold_changed = old_hold && new_hold && *old_hold != *new_hold;
  if (now.applies_total() > was.applies_total()) {
    std::string message;
    if (hold_changed) {
      message = absl::StrCat(kHoldPrefix, *old_hold, "µs -> ", *new_hold, "µs");
    } else if (new_hold) {
      message = absl::StrCat("settings applied, ", kHoldPrefix, *new_hold, "µs");
    } else {
      message = "settings applied";
    }
    const v1::Provenance* source = nullptr;
    const auto& provenance = after.status().desired().provenance();
    if (auto it = provenance.find("hold_us"); it != provenance.end()) source = &it->second;
    if (source != nullptr && !source->name().empty()) {
      if (source->source() == v1::SETTING_SOURCE_EXPERIMENT) {
        absl::StrAppend(&message, " (experiment ", source->name(), " arm ", source->arm(), ")");
      } else if (source->source() == v1::SETTING_SOURCE_LOCAL_FILE) {
        absl::StrAppend(&message, " (local policy ", source->name(), ")");
      } else {
        absl::StrAppend(&message, " (policy ", source->name(), ")");
      }
    }
    events.push_back(AdapterEvent(after, v1::EVENT_TYPE_NORMAL, "Applied", std::move(message)));
  } else if (hold_changed) {
    events.push_back(
        AdapterEvent(after, v1::EVENT_TYPE_NORMAL, "HoldChanged",
                     absl::StrCat("observed ", kHoldPrefix, *old_hold, "µs -> ", *new_hold, "µs")));
  }
  if (now.drift_repairs_total() > was.drift_repairs_total()) {
    const uint64_t repairs = now.drift_repairs_total() - was.drift_repairs_total();
    events.push_back(
        AdapterEvent(after, v1::EVENT_TYPE_WARNING, "DriftRepaired",
                     absl::StrCat("register drifted from the desired settings; rewritten",
                                  repairs > 1 ? absl::StrCat(" (", repairs, " repairs)") : "")));
  }
  if (now.failures_total() > was.failures_total()) {
    std::string detail;
    for (const v1::Condition& condition : after.status().conditions()) {
      if (condition.status() == v1::CONDITION_STATUS_FALSE && !condition.message().empty()) {
        detail = absl::StrCat(": ", condition.reason().empty() ? "" : condition.reason(),
                              condition.reason().empty() ? "" : " ", condition.message());
        break;
      }
    }
    events.push_back(AdapterEvent(
        after, v1::EVENT_TYPE_WARNING, "ApplyFailed",
        absl::StrCat(now.failures_total() - was.failures_total(), " failed transfer(s)", detail)));
  }
  if (before->status().state() != after.status().state()) {
    events.push_back(AdapterEvent(
        after,
        WarningState(after.status().state()) ? v1::EVENT_TYPE_WARNING : v1::EVENT_TYPE_NORMAL,
        "StateChanged",
        absl::StrCat("state ", StateWord(before->status().state()), " -> ",
                     StateWord(after.status().state()))));
  }
  return events;
}

Registry::Registry(RegistryOptions options, std::vector<HostRecord> loaded)
    : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  for (HostRecord& record : loaded) {
    Entry entry;
    entry.host = std::move(record.host);
    entry.host.mutable_status()->set_connected(false);
    entry.host.mutable_status()->set_last_sent_version(0);
    uint64_t revision = 0;
    if (absl::SimpleAtoi(entry.host.metadata().resource_version(), &revision)) {
      revision_ = std::max(revision_, revision);
    }
    for (v1::Adapter& adapter : record.adapters) {
      const std::string id = adapter.metadata().name();
      entry.adapters.emplace(id, std::move(adapter));
    }
    const std::string id = entry.host.metadata().name();
    hosts_.emplace(id, std::move(entry));
  }
}

Registry::Entry* Registry::Current(std::string_view host_id, uint64_t stream) {
  auto it = hosts_.find(host_id);
  if (it == hosts_.end() || it->second.stream != stream || stream == 0) return nullptr;
  return &it->second;
}

void Registry::MarkDirty(const std::string& host_id, absl::Time now, bool adapters) {
  Entry& entry = hosts_.at(host_id);
  entry.host.mutable_metadata()->set_resource_version(absl::StrCat(++revision_));
  *entry.host.mutable_metadata()->mutable_update_time() = TimeToProto(now);
  dirty_.insert(host_id);
  if (adapters) dirty_adapters_.insert(host_id);
}

uint64_t Registry::Connect(const v1::Hello& hello, std::string_view peer, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const std::string& id = hello.host_id();
  auto [it, created] = hosts_.try_emplace(id);
  Entry& entry = it->second;
  v1::ObjectMeta* meta = entry.host.mutable_metadata();
  if (created) {
    meta->set_name(id);
    meta->set_uid(absl::StrCat(id, "-", absl::ToUnixNanos(now)));
    meta->set_generation(1);
    *meta->mutable_create_time() = TimeToProto(now);
  }
  *meta->mutable_labels() = hello.labels();
  *entry.host.mutable_spec()->mutable_labels() = hello.labels();
  v1::HostStatus* status = entry.host.mutable_status();
  status->set_connected(true);
  *status->mutable_last_seen_time() = TimeToProto(now);
  *status->mutable_connect_time() = TimeToProto(now);
  status->set_agent_version(hello.agent_version());
  *status->mutable_capabilities() = hello.capabilities();
  status->set_peer_address(std::string(peer));
  status->set_metrics_address(hello.metrics_address());
  *status->mutable_host_info() = hello.host_info();
  status->set_last_sent_version(0);
  // Adapters carry a copy of the host's labels for label selectors.
  for (auto& [adapter_id, adapter] : entry.adapters) {
    *adapter.mutable_metadata()->mutable_labels() = hello.labels();
  }
  if (!entry.adapters.empty()) ++adapters_generation_;
  entry.stream = next_stream_++;
  entry.remote = false;
  entry.last_sent_time = absl::InfinitePast();
  if (!replica_id_.empty()) {
    status->set_replica(replica_id_);
    entry.session_pending = true;  // a new stream: a new session, opened by the next save
  }
  MarkDirty(id, now, /*adapters=*/true);
  return entry.stream;
}

bool Registry::Disconnect(std::string_view host_id, uint64_t stream, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Entry* entry = Current(host_id, stream);
  if (entry == nullptr) return false;
  entry->stream = 0;
  entry->host.mutable_status()->set_connected(false);
  *entry->host.mutable_status()->mutable_last_seen_time() = TimeToProto(now);
  MarkDirty(entry->host.metadata().name(), now);
  return true;
}

bool Registry::Touch(std::string_view host_id, uint64_t stream, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Entry* entry = Current(host_id, stream);
  if (entry == nullptr) return false;
  *entry->host.mutable_status()->mutable_last_seen_time() = TimeToProto(now);
  // last_seen alone is persisted with the next real change or flush of this host.
  dirty_.insert(entry->host.metadata().name());
  return true;
}

void Registry::PutAdapter(Entry& entry, v1::Adapter adapter, absl::Time now) {
  const std::string id = adapter.metadata().name();
  adapter.set_host_id(entry.host.metadata().name());
  v1::ObjectMeta* meta = adapter.mutable_metadata();
  *meta->mutable_labels() = entry.host.metadata().labels();
  auto previous = entry.adapters.find(id);
  if (previous != entry.adapters.end()) {
    *meta->mutable_create_time() = previous->second.metadata().create_time();
    meta->set_uid(previous->second.metadata().uid());
  } else {
    *meta->mutable_create_time() = TimeToProto(now);
    meta->set_uid(absl::StrCat(entry.host.metadata().name(), "/", id));
  }
  *meta->mutable_update_time() = TimeToProto(now);
  entry.adapters[id] = std::move(adapter);
  ++adapters_generation_;
}

bool Registry::ReplaceAdapters(std::string_view host_id, uint64_t stream,
                               const std::vector<v1::Adapter>& adapters, absl::Time now,
                               absl::Status* refused) {
  std::vector<v1::Event> events;
  {
    absl::MutexLock lock(&mu_);
    Entry* entry = Current(host_id, stream);
    if (entry == nullptr) return false;
    std::set<std::string_view> ids;
    for (const v1::Adapter& adapter : adapters) ids.insert(adapter.metadata().name());
    if (ids.size() > options_.max_adapters_per_host) {
      if (refused != nullptr) {
        *refused = TooManyAdapters(host_id, ids.size(), options_.max_adapters_per_host);
      }
      return false;
    }
    std::map<std::string, v1::Adapter> previous = std::move(entry->adapters);
    entry->adapters.clear();
    ++adapters_generation_;
    for (const v1::Adapter& adapter : adapters) {
      auto old = previous.find(adapter.metadata().name());
      if (old != previous.end()) {
        entry->adapters.insert(*old);  // keeps create_time and uid
        AppendEvents(AdapterEvents(&old->second, adapter), entry->host.metadata().name(), events);
      }
      PutAdapter(*entry, adapter, now);
    }
    *entry->host.mutable_status()->mutable_last_seen_time() = TimeToProto(now);
    MarkDirty(entry->host.metadata().name(), now, /*adapters=*/true);
  }
  Emit(std::move(events), now);
  return true;
}

bool Registry::UpdateAdapters(std::string_view host_id, uint64_t stream,
                              const std::vector<v1::Adapter>& changed,
                              const std::vector<std::string>& removed, absl::Time now,
                              absl::Status* refused) {
  std::vector<v1::Event> events;
  {
    absl::MutexLock lock(&mu_);
    Entry* entry = Current(host_id, stream);
    if (entry == nullptr) return false;
    // The count after the update (upserts, then removals, as below).
    const std::set<std::string_view> gone(removed.begin(), removed.end());
    size_t after = 0;
    for (const auto& [id, adapter] : entry->adapters) after += gone.count(id) == 0 ? 1 : 0;
    std::set<std::string_view> added;
    for (const v1::Adapter& adapter : changed) {
      const std::string& id = adapter.metadata().name();
      if (entry->adapters.count(id) == 0 && gone.count(id) == 0 && added.insert(id).second) {
        ++after;
      }
    }
    if (after > options_.max_adapters_per_host) {
      if (refused != nullptr) {
        *refused = TooManyAdapters(host_id, after, options_.max_adapters_per_host);
      }
      return false;
    }
    for (const v1::Adapter& adapter : changed) {
      auto old = entry->adapters.find(adapter.metadata().name());
      if (old != entry->adapters.end()) {
        AppendEvents(AdapterEvents(&old->second, adapter), entry->host.metadata().name(), events);
      }
      PutAdapter(*entry, adapter, now);
    }
    for (const std::string& id : removed) {
      if (entry->adapters.erase(id) > 0) ++adapters_generation_;
    }
    *entry->host.mutable_status()->mutable_last_seen_time() = TimeToProto(now);
    MarkDirty(entry->host.metadata().name(), now,
              /*adapters=*/!changed.empty() || !removed.empty());
  }
  Emit(std::move(events), now);
  return true;
}

bool Registry::RecordSent(std::string_view host_id, uint64_t stream, uint64_t version,
                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  Entry* entry = Current(host_id, stream);
  if (entry == nullptr) return false;
  entry->host.mutable_status()->set_last_sent_version(version);
  entry->last_sent_time = now;
  // Not persisted: last_sent_version describes the current stream and restarts at 0.
  return true;
}

bool Registry::RecordAck(std::string_view host_id, uint64_t stream, uint64_t version,
                         absl::Time now, std::string_view persist_error, bool* recovered) {
  absl::MutexLock lock(&mu_);
  Entry* entry = Current(host_id, stream);
  if (entry == nullptr) return false;
  v1::HostStatus* status = entry->host.mutable_status();
  if (recovered != nullptr) {
    *recovered = (status->has_last_nack() && status->last_nack().version() <= version) ||
                 (!status->bundle_persist_error().empty() && persist_error.empty());
  }
  status->set_last_acked_version(version);
  *status->mutable_last_ack_time() = TimeToProto(now);
  status->set_bundle_persist_error(std::string(persist_error));
  *status->mutable_last_seen_time() = TimeToProto(now);
  if (status->has_last_nack() && status->last_nack().version() <= version) {
    status->clear_last_nack();
  }
  MarkDirty(entry->host.metadata().name(), now);
  return true;
}

bool Registry::RecordNack(std::string_view host_id, uint64_t stream, const v1::NackRecord& nack,
                          absl::Time now) {
  std::vector<v1::Event> events;
  {
    absl::MutexLock lock(&mu_);
    Entry* entry = Current(host_id, stream);
    if (entry == nullptr) return false;
    *entry->host.mutable_status()->mutable_last_nack() = nack;
    *entry->host.mutable_status()->mutable_last_seen_time() = TimeToProto(now);
    MarkDirty(entry->host.metadata().name(), now);
    for (const auto& [id, adapter] : entry->adapters) {
      if (!NamesAdapter(nack.error_detail(), id)) continue;
      v1::Event event = AdapterEvent(
          adapter, v1::EVENT_TYPE_WARNING, "BundleNacked",
          absl::StrCat("host ", entry->host.metadata().name(), " rejected bundle version ",
                       nack.version(), ": ", nack.error_detail()));
      event.set_host_id(entry->host.metadata().name());
      event.mutable_involved_object()->set_host_id(entry->host.metadata().name());
      event.set_source("rxfleet-server");
      events.push_back(std::move(event));
    }
  }
  Emit(std::move(events), now);
  return true;
}

void Registry::Emit(std::vector<v1::Event> events, absl::Time now) const {
  if (!options_.on_adapter_event) return;
  for (v1::Event& event : events) options_.on_adapter_event(std::move(event), now);
}

bool Registry::IsStale(const Entry& entry, absl::Time now) const {
  const v1::HostStatus& status = entry.host.status();
  if (now - TimeFromProto(status.last_seen_time()) > options_.stale_after) return true;
  return entry.stream != 0 && status.last_acked_version() < status.last_sent_version() &&
         now - entry.last_sent_time > options_.stale_after;
}

v1::Host Registry::View(const Entry& entry, absl::Time now, uint64_t latest_version) const {
  v1::Host host = entry.host;
  v1::HostStatus* status = host.mutable_status();
  status->set_stale(IsStale(entry, now));
  uint32_t count = 0;
  for (const auto& [id, adapter] : entry.adapters) count += IsGone(adapter) ? 0 : 1;
  status->set_adapter_count(count);
  status->clear_conditions();
  if (status->connected()) {
    SetCondition(status, "Connected", true, "StreamOpen", "",
                 TimeFromProto(status->connect_time()));
  } else {
    SetCondition(status, "Connected", false, "StreamClosed",
                 "the agent's stream is closed; the host keeps its last good bundle",
                 TimeFromProto(status->last_seen_time()));
  }
  const bool in_sync = status->last_acked_version() == latest_version;
  std::string reason = "Acked";
  std::string message;
  if (!in_sync) {
    if (status->has_last_nack()) {
      reason = "BundleNacked";
      message = absl::StrCat("bundle ", status->last_nack().version(),
                             " rejected: ", status->last_nack().error_detail());
    } else {
      reason = "AckPending";
      message = absl::StrCat("last ACKed bundle ", status->last_acked_version(), ", latest ",
                             latest_version);
    }
  }
  SetCondition(status, "InSync", in_sync, reason, message, TimeFromProto(status->last_ack_time()));
  if (status->last_acked_version() != 0) {
    const bool saved = status->bundle_persist_error().empty();
    SetCondition(status, "BundlePersisted", saved, saved ? "Saved" : "SaveFailed",
                 saved ? ""
                       : absl::StrCat("bundle ", status->last_acked_version(),
                                      " is in effect but the host could not save it (a restart "
                                      "without the server falls back to an older bundle): ",
                                      status->bundle_persist_error()),
                 TimeFromProto(status->last_ack_time()));
  }
  return host;
}

std::vector<v1::Host> Registry::ListHosts(absl::Time now, uint64_t latest_version) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Host> out;
  out.reserve(hosts_.size());
  for (const auto& [id, entry] : hosts_) out.push_back(View(entry, now, latest_version));
  return out;
}

void Registry::VisitHosts(absl::Time now, uint64_t latest_version, std::string_view after,
                          const std::function<bool(v1::Host)>& visit) const {
  absl::MutexLock lock(&mu_);
  auto it = after.empty() ? hosts_.begin() : hosts_.upper_bound(after);
  for (; it != hosts_.end(); ++it) {
    if (!visit(View(it->second, now, latest_version))) return;
  }
}

absl::StatusOr<v1::Host> Registry::GetHost(std::string_view host_id, absl::Time now,
                                           uint64_t latest_version) const {
  absl::MutexLock lock(&mu_);
  auto it = hosts_.find(host_id);
  if (it == hosts_.end()) {
    return absl::NotFoundError(absl::StrCat("host ", ToAbslView(host_id), " is not known"));
  }
  return View(it->second, now, latest_version);
}

std::vector<v1::Adapter> Registry::AdaptersLocked(bool include_gone) const {
  std::vector<v1::Adapter> out;
  for (const auto& [host_id, entry] : hosts_) {
    for (const auto& [id, adapter] : entry.adapters) {
      if (include_gone || !IsGone(adapter)) out.push_back(adapter);
    }
  }
  return out;
}

std::vector<v1::Adapter> Registry::ListAdapters(bool include_gone) const {
  absl::MutexLock lock(&mu_);
  return AdaptersLocked(include_gone);
}

std::shared_ptr<const std::vector<v1::Adapter>> Registry::AdapterSnapshot() const {
  absl::MutexLock lock(&mu_);
  if (snapshot_ == nullptr || snapshot_generation_ != adapters_generation_) {
    snapshot_ = std::make_shared<const std::vector<v1::Adapter>>(AdaptersLocked(false));
    snapshot_generation_ = adapters_generation_;
  }
  return snapshot_;
}

std::vector<v1::Adapter> Registry::HostAdapters(std::string_view host_id) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Adapter> out;
  auto host = hosts_.find(host_id);
  if (host == hosts_.end()) return out;
  for (const auto& [id, adapter] : host->second.adapters) {
    if (!IsGone(adapter)) out.push_back(adapter);
  }
  return out;
}

bool Registry::HostHasCapability(std::string_view host_id, std::string_view capability) const {
  absl::MutexLock lock(&mu_);
  auto host = hosts_.find(host_id);
  if (host == hosts_.end()) return false;
  const auto& capabilities = host->second.host.status().capabilities();
  return std::find(capabilities.begin(), capabilities.end(), capability) != capabilities.end();
}

absl::StatusOr<v1::Adapter> Registry::GetAdapter(std::string_view host_id,
                                                 std::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  auto host = hosts_.find(host_id);
  if (host == hosts_.end()) {
    return absl::NotFoundError(absl::StrCat("host ", ToAbslView(host_id), " is not known"));
  }
  auto adapter = host->second.adapters.find(std::string(adapter_id));
  if (adapter == host->second.adapters.end()) {
    return absl::NotFoundError(
        absl::StrCat("host ", ToAbslView(host_id), " has no adapter ", ToAbslView(adapter_id)));
  }
  return adapter->second;
}

std::vector<Registry::MetricsTarget> Registry::MetricsTargets(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  std::vector<MetricsTarget> out;
  for (const auto& [id, entry] : hosts_) {
    const v1::HostStatus& status = entry.host.status();
    if (status.metrics_address().empty()) continue;
    MetricsTarget target;
    target.host_id = id;
    target.address = status.metrics_address();
    target.peer_address = status.peer_address();
    target.labels = {entry.host.metadata().labels().begin(), entry.host.metadata().labels().end()};
    target.connected = status.connected();
    target.stale = IsStale(entry, now);
    out.push_back(std::move(target));
  }
  return out;
}

Registry::Counts Registry::counts() const {
  absl::MutexLock lock(&mu_);
  Counts counts;
  counts.hosts = hosts_.size();
  for (const auto& [id, entry] : hosts_) {
    counts.connected_hosts += entry.host.status().connected() ? 1 : 0;
    for (const auto& [adapter_id, adapter] : entry.adapters) {
      counts.adapters += IsGone(adapter) ? 0 : 1;
    }
  }
  return counts;
}

std::vector<HostRecord> Registry::TakeDirty() {
  absl::MutexLock lock(&mu_);
  std::vector<HostRecord> out;
  out.reserve(dirty_.size());
  for (const std::string& id : dirty_) {
    auto it = hosts_.find(id);
    if (it == hosts_.end() || it->second.remote) continue;
    HostRecord record;
    record.host = it->second.host;
    if (it->second.session_pending || it->second.session_epoch > 0) {
      record.session_replica = replica_id_;
      record.open_session = it->second.session_pending;
      record.session_epoch = it->second.session_epoch;
    }
    record.adapters_changed = dirty_adapters_.contains(id);
    if (record.adapters_changed) {
      for (const auto& [adapter_id, adapter] : it->second.adapters) {
        record.adapters.push_back(adapter);
      }
    }
    out.push_back(std::move(record));
  }
  dirty_.clear();
  dirty_adapters_.clear();
  return out;
}

void Registry::ReturnDirty(const std::vector<HostRecord>& records) {
  absl::MutexLock lock(&mu_);
  for (const HostRecord& record : records) {
    dirty_.insert(record.host.metadata().name());
    if (record.adapters_changed) dirty_adapters_.insert(record.host.metadata().name());
  }
}

void Registry::SetReplicaId(std::string replica_id) {
  absl::MutexLock lock(&mu_);
  replica_id_ = std::move(replica_id);
}

void Registry::SessionsSaved(const RegistrySaveResult& result) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, epoch] : result.opened_sessions) {
    auto it = hosts_.find(id);
    if (it == hosts_.end()) continue;
    it->second.session_pending = false;
    it->second.session_epoch = epoch;
  }
  // A superseded host keeps its epoch: later saves of it are refused by the store too, until
  // the agent opens a new stream here.
}

size_t Registry::ApplyRemote(std::vector<HostRecord> records) {
  absl::MutexLock lock(&mu_);
  size_t replaced = 0;
  for (HostRecord& record : records) {
    const std::string& id = record.host.metadata().name();
    if (id.empty()) continue;
    auto [it, created] = hosts_.try_emplace(id);
    Entry& entry = it->second;
    if (!created && (entry.stream != 0 || entry.session_pending ||
                     (!replica_id_.empty() && record.session_replica == replica_id_))) {
      continue;  // this server holds the host: its own entry is the newer truth
    }
    if (!created && !entry.remote && record.session_replica.empty()) {
      continue;  // a record saved without sessions (one server on the database) is this one's
    }
    entry.host = std::move(record.host);
    entry.host.mutable_status()->clear_stale();
    entry.host.mutable_status()->clear_adapter_count();
    entry.host.mutable_status()->clear_conditions();
    if (record.adapters_changed || created) {
      ++adapters_generation_;
      entry.adapters.clear();
      for (v1::Adapter& adapter : record.adapters) {
        const std::string adapter_id = adapter.metadata().name();
        entry.adapters[adapter_id] = std::move(adapter);
      }
    }
    entry.remote = true;
    entry.session_epoch = 0;
    entry.last_sent_time = absl::InfinitePast();
    dirty_.erase(id);
    dirty_adapters_.erase(id);
    ++replaced;
  }
  return replaced;
}

}  // namespace rxfleet::server
