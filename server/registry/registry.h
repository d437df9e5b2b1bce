#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "server/store/store.h"

namespace rxfleet::server {

struct RegistryOptions {
  /// A host is stale when nothing arrived on its stream for longer than this, or when it has
  /// not ACKed a bundle sent to it for longer than this. > 0.
  absl::Duration stale_after = absl::Minutes(5);
  /// Receives the adapter events (AdapterEvents, NACKs naming an adapter) of every accepted
  /// inventory, update and NACK, after the registry's lock is released; e.g. EventLog::Record.
  /// Unset: no adapter events.
  std::function<void(v1::Event, absl::Time)> on_adapter_event;
  /// Adapters one host may have (GONE ones included), across inventories and updates: an
  /// update or inventory that would leave more is refused whole (rxfleet-server
  /// --max-adapters-per-host). >= 1.
  size_t max_adapters_per_host = 256;
};

/// The events an agent's new report of one adapter implies, compared with its previous
/// report (`before`, nullptr for an adapter the server has not seen), involved object
/// {kind `Adapter`, name the adapter id, host_id}, host_id set, source `rxfleet-agent`:
///  - `Applied` (Normal) when counters.applies_total grew: the observed hold before -> after
///    when it changed ("hold 1024µs -> 32µs"), else the hold re-applied;
///  - `HoldChanged` (Normal) when the observed hold changed without an apply (e.g. the driver
///    re-initialised the chip);
///  - `DriftRepaired` (Warning) when counters.drift_repairs_total grew, with how many repairs;
///  - `ApplyFailed` (Warning) when counters.failures_total grew, with the failing condition's
///    message when there is one;
///  - `StateChanged` when status.state changed ("state applied -> asleep"): Warning for
///    error, drifted, disabled_by_driver and invalid_settings, Normal otherwise.
/// Counters that went down (the agent restarted) are a new baseline, not events. A new
/// adapter yields nothing. Pure; in report order.
std::vector<v1::Event> AdapterEvents(const v1::Adapter* before, const v1::Adapter& after);

/// Hosts and their adapters as agents report them, in memory, with write-behind persistence
/// (TakeDirty/ReturnDirty). Disconnected hosts stay listed with their last reported adapters.
///
/// Each AgentService stream gets a stream id from Connect(); every other write names it and is
/// ignored (returns false) unless that stream is still the host's current one, so a replaced
/// stream that is still draining cannot overwrite its successor's state.
///
/// Inputs are trusted: the AgentService boundary validates Hello, inventories and updates.
/// Thread-safe.
class Registry {
 public:
  /// `loaded`: the store's hosts; they start disconnected.
  Registry(RegistryOptions options, std::vector<HostRecord> loaded);

  /// A validated Hello opened a stream from `peer`: creates or updates the host (labels,
  /// versions, capabilities, addresses, host info), marks it connected and makes this stream
  /// its current one. Returns the new stream id (> 0). Adapters are kept until an inventory
  /// replaces them.
  uint64_t Connect(const v1::Hello& hello, std::string_view peer, absl::Time now);

  /// The stream ended. Marks the host disconnected if `stream` is still its current one.
  bool Disconnect(std::string_view host_id, uint64_t stream, absl::Time now);

  /// A message arrived: moves last_seen.
  bool Touch(std::string_view host_id, uint64_t stream, absl::Time now);

  /// A full inventory: replaces every adapter of the host. More than max_adapters_per_host
  /// adapters: nothing changes, returns false and sets `*refused` (if given) to
  /// InvalidArgument saying so.
  bool ReplaceAdapters(std::string_view host_id, uint64_t stream,
                       const std::vector<v1::Adapter>& adapters, absl::Time now,
                       absl::Status* refused = nullptr);

  /// An update: upserts `changed` (complete adapters) and removes `removed` ids. If the host
  /// would then have more than max_adapters_per_host adapters, nothing changes, returns false
  /// and sets `*refused` (if given) to InvalidArgument naming the count and the bound.
  bool UpdateAdapters(std::string_view host_id, uint64_t stream,
                      const std::vector<v1::Adapter>& changed,
                      const std::vector<std::string>& removed, absl::Time now,
                      absl::Status* refused = nullptr);

  size_t max_adapters_per_host() const { return options_.max_adapters_per_host; }

  /// A bundle of `version` was written to the stream (kept in memory only).
  bool RecordSent(std::string_view host_id, uint64_t stream, uint64_t version, absl::Time now);
  /// The agent ACKed `version` (nonce already checked by the stream). Clears last_nack.
  /// `persist_error`: the ACK's persist_error (already truncated by the caller), kept as
  /// status.bundle_persist_error and shown by the BundlePersisted condition. False (nothing
  /// recorded) when `stream` is not the host's current stream. `recovered`, when given, is set
  /// to whether this ACK ended a failure the host had reported: a NACK it clears, or an earlier
  /// persist error while this ACK has none.
  bool RecordAck(std::string_view host_id, uint64_t stream, uint64_t version, absl::Time now,
                 std::string_view persist_error = {}, bool* recovered = nullptr);
  /// The agent NACKed. A NACK whose detail names an adapter of the host ("adapter
  /// port-1-1.3") also yields a `BundleNacked` Warning event about that adapter.
  bool RecordNack(std::string_view host_id, uint64_t stream, const v1::NackRecord& nack,
                  absl::Time now);

  /// Hosts ordered by name, with status.stale, adapter_count and conditions computed for `now`
  /// and `latest_version` (the current bundle version).
  std::vector<v1::Host> ListHosts(absl::Time now, uint64_t latest_version) const;
  /// The same, one host at a time in name order, starting after host `after` ("" = from the
  /// first), until `visit` returns false; so a page costs its own hosts, not the whole fleet
  /// (ListHosts pages during a 10,000-agent reconnect storm). `visit` runs with the registry
  /// lock held: it must not call into the registry.
  void VisitHosts(absl::Time now, uint64_t latest_version, std::string_view after,
                  const std::function<bool(v1::Host)>& visit) const;
  /// One host; NotFound if unknown.
  absl::StatusOr<v1::Host> GetHost(std::string_view host_id, absl::Time now,
                                   uint64_t latest_version) const;

  /// Adapters ordered by (host_id, name); metadata.labels carry the host's labels. GONE
  /// adapters only with `include_gone`.
  std::vector<v1::Adapter> ListAdapters(bool include_gone) const;
  /// ListAdapters(false) as a shared, immutable snapshot: built once and handed out again until
  /// an adapter changes (inventory, update, host labels, remote rows). ACKs, NACKs and other
  /// host-status changes keep it. For the policy writes and status views that read every
  /// adapter (an O(adapters) copy each at 10,000 hosts, on the path of every policy change).
  std::shared_ptr<const std::vector<v1::Adapter>> AdapterSnapshot() const;
  /// The adapters of one host that are not GONE, by adapter id (labels carry the host's
  /// labels); empty if the host is unknown.
  std::vector<v1::Adapter> HostAdapters(std::string_view host_id) const;
  /// True when the host's last Hello (kept across restarts) announced `capability`
  /// (Hello.capabilities, e.g. `probes`); false for an unknown host.
  bool HostHasCapability(std::string_view host_id, std::string_view capability) const;
  /// One adapter; NotFound if the host or the adapter is unknown.
  absl::StatusOr<v1::Adapter> GetAdapter(std::string_view host_id,
                                         std::string_view adapter_id) const;

  /// A Prometheus scrape target: an agent's metrics endpoint.
  struct MetricsTarget {
    std::string host_id;
    std::string address;       ///< Hello.metrics_address, never empty
    std::string peer_address;  ///< gRPC peer of the host's last stream ("ipv4:10.0.0.5:51234")
    std::map<std::string, std::string> labels;
    bool connected = false;
    bool stale = false;
  };
  /// Every host that announced a metrics address, ordered by host id.
  std::vector<MetricsTarget> MetricsTargets(absl::Time now) const;

  struct Counts {
    size_t hosts = 0;
    size_t connected_hosts = 0;
    size_t adapters = 0;  ///< not GONE
  };
  Counts counts() const;

  /// Hosts changed since the last call, for the store; with all their adapters when those
  /// changed too (HostRecord::adapters_changed).
  std::vector<HostRecord> TakeDirty();
  /// Marks hosts dirty again after a failed save.
  void ReturnDirty(const std::vector<HostRecord>& records);

  /// This server's replica id: hosts connecting from now on show it (status.replica) and
  /// their records carry agent sessions under it (HostRecord::session_replica). Empty (the
  /// default): no sessions. Call before agents connect.
  void SetReplicaId(std::string replica_id);
  /// After a successful save of TakeDirty's records: the sessions opened for them (their
  /// epochs fence the next saves) and the hosts another session holds now.
  void SessionsSaved(const RegistrySaveResult& result);

  /// Records of hosts that agents report to other replicas on the same database
  /// (Store::LoadHostChanges), so that this server lists the whole fleet. A record replaces
  /// the host's entry unless this server holds the host: its stream is open here, or the
  /// stored session (HostRecord::session_replica) is this server's replica id. Without
  /// adapters (adapters_changed false) the entry keeps its adapters. A replaced entry shows
  /// the host as its holder last saved it (status.replica names the holder); it is never
  /// saved by this server and yields no adapter events. An agent that connects here takes
  /// its entry back. Returns how many entries were replaced.
  size_t ApplyRemote(std::vector<HostRecord> records);

 private:
  struct Entry {
    v1::Host host;                                // status.stale/adapter_count/conditions unset
    std::map<std::string, v1::Adapter> adapters;  // by adapter id
    uint64_t stream = 0;                          // current stream, 0 if none
    absl::Time last_sent_time = absl::InfinitePast();
    // Agent session of this server for the host: to be opened by the next save (pending), or
    // its epoch once opened; 0 and false when this server has no session for it.
    bool session_pending = false;
    uint64_t session_epoch = 0;
    // Held by another replica (ApplyRemote): never dirty, no stream here.
    bool remote = false;
  };

  Entry* Current(std::string_view host_id, uint64_t stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// ListAdapters without taking mu_.
  std::vector<v1::Adapter> AdaptersLocked(bool include_gone) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Hands `events` to options_.on_adapter_event; call without holding mu_.
  void Emit(std::vector<v1::Event> events, absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);
  void PutAdapter(Entry& entry, v1::Adapter adapter, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Bumps the host's resource version and queues it for the store; `adapters` also queues its
  /// adapters (inventory, updates, label changes).
  void MarkDirty(const std::string& host_id, absl::Time now, bool adapters = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsStale(const Entry& entry, absl::Time now) const;
  v1::Host View(const Entry& entry, absl::Time now, uint64_t latest_version) const;

  const RegistryOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> hosts_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> dirty_ ABSL_GUARDED_BY(mu_);           // hosts to save
  std::set<std::string> dirty_adapters_ ABSL_GUARDED_BY(mu_);  // ... with their adapters
  uint64_t next_stream_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Bumped by every change to an adapter or to the set of adapters; AdapterSnapshot() is
  // rebuilt when it differs from the generation the cached snapshot was built at.
  uint64_t adapters_generation_ ABSL_GUARDED_BY(mu_) = 1;
  mutable uint64_t snapshot_generation_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::shared_ptr<const std::vector<v1::Adapter>> snapshot_ ABSL_GUARDED_BY(mu_);
  std::string replica_id_ ABSL_GUARDED_BY(mu_);
};

/// True for adapters the agent reported as unplugged (ADAPTER_STATE_GONE).
bool IsGone(const v1::Adapter& adapter);

}  // namespace rxfleet::server
