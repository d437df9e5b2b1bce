#pragma once

// Durable state of rxfleet-server: policies with resource versions, the bundle version, the
// host/adapter registry, fleet and audit events, experiments and their metric windows. One
// interface, two implementations with the same semantics (the store test suite runs against
// both):
//
// - SQLite (server/store/sqlite_store.h), the default: one file, one server process;
// - PostgreSQL (server/store/postgres_store.h), selected by a postgresql:// (or postgres://)
//   connection URI.
//
// Durability: a call that returned OK is committed (SQLite: WAL with synchronous=FULL;
// PostgreSQL: a committed transaction). Every write is one transaction: a failed write rolls
// back completely, is returned with the database's reason, and leaves the store usable (the
// PostgreSQL store reconnects by itself on its next call).
//
// Errors of every method, by code: Unavailable (database locked or unreachable: retry later),
// ResourceExhausted (disk or size limit full), FailedPrecondition (the file or database cannot
// be used as it is: read-only, not a database, newer schema, refused credentials), Internal
// (anything else); InvalidArgument and NotFound/Aborted/AlreadyExists where a method says so.
// Messages name the operation, the database (never a password) and the database's reason.
//
// Thread-safety: all methods may be called from any thread; each implementation serialises its
// calls on one connection.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/experiment.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "rxfleet/v1/policy.pb.h"
#include "rxfleet/v1/tuning.pb.h"
#include "server/store/token_store.h"

namespace rxfleet::server {

/// Default database path of the packaged server.
inline constexpr std::string_view kDefaultDatabasePath = "/var/lib/rxfleet/server.db";

/// True if `database` names a PostgreSQL database: it starts with "postgresql://" or
/// "postgres://" (libpq connection URIs; "postgresql://" alone takes everything from the PG*
/// environment variables).
bool IsPostgresUri(std::string_view database);

/// How a PostgreSQL store holds the database's server lock (StoreOptions::server_lock).
enum class ServerLock {
  kNone,
  kShared,     ///< a server replica
  kExclusive,  ///< migrate-store
};

struct StoreOptions {
  /// SQLite: the database file; its directory is created (mode 0750) and the file is created
  /// if missing. PostgreSQL: a libpq connection URI (IsPostgresUri); the database must exist,
  /// its schema is created on first use.
  std::string path = std::string(kDefaultDatabasePath);
  /// How long a write waits for a lock held by another connection before failing with
  /// Unavailable (SQLite busy timeout; PostgreSQL lock_timeout), and PostgreSQL's connect
  /// timeout. [0, 1 min].
  absl::Duration busy_timeout = absl::Seconds(5);
  /// SQLite only: largest size the database file may grow to, in bytes (max_page_count); a
  /// write that needs more fails with ResourceExhausted, like on a full disk. 0 = no limit.
  uint64_t max_size_bytes = 0;
  /// PostgreSQL only: the database's server lock (a session advisory lock) the store holds for
  /// its lifetime. Servers hold it shared, so any number of replicas share the database;
  /// `rxfleet-server migrate-store` holds it exclusively, so it never writes under a running
  /// server and no server starts while it copies. Open fails with FailedPrecondition when the
  /// lock is held the other way. Local commands (`rxfleet-server tokens`) take none. (SQLite
  /// servers take a lock file instead: one server per file.)
  ServerLock server_lock = ServerLock::kNone;
};

/// Result of ApplyPolicy.
struct PolicyWriteResult {
  /// The policy as stored: metadata.uid, resource_version, generation, create_time and
  /// update_time set by the store; status cleared.
  v1::Policy policy;
  /// True if no policy of that name existed.
  bool created = false;
  /// False if the stored policy already had exactly this spec, labels and annotations; then
  /// nothing was written and no version moved.
  bool changed = false;
  /// The bundle version after the write (bumped by one when `changed`).
  uint64_t bundle_version = 0;
};

/// Result of DeletePolicy.
struct PolicyDeleteResult {
  /// The policy as it was stored before the delete.
  v1::Policy policy;
  /// The bundle version after the delete (bumped by one).
  uint64_t bundle_version = 0;
};

/// One host with all its adapters, as the registry persists it.
struct HostRecord {
  v1::Host host;
  std::vector<v1::Adapter> adapters;
  /// False when only the host changed: SaveRegistry then leaves its stored adapters alone
  /// (`adapters` is empty). Loaded records always carry their adapters.
  bool adapters_changed = true;

  /// The agent session the record was reported under, so that among replicas only the one
  /// holding the host's newest session writes it (a replica's late "disconnected" for an agent
  /// that moved on changes nothing). `session_replica` empty: no session, written as it is.
  /// With `open_session` (the first save after a new stream), SaveRegistry opens a new session
  /// for `session_replica` (the stored epoch plus one, superseding the host's previous session
  /// on any replica) and writes the record under it; otherwise it writes the record only if
  /// the stored session is still (`session_replica`, `session_epoch`).
  std::string session_replica = {};
  bool open_session = false;
  uint64_t session_epoch = 0;
};

/// What SaveRegistry did with the records' sessions.
struct RegistrySaveResult {
  /// host id -> epoch of the session opened for it (records with open_session).
  std::map<std::string, uint64_t> opened_sessions;
  /// Hosts whose record was not written: another session (another replica, or a newer stream)
  /// holds them now.
  std::vector<std::string> superseded;
};

/// Everything the server loads at start-up.
struct StoredState {
  /// The store-wide revision (see ConfigState).
  uint64_t revision = 0;
  uint64_t bundle_version = 0;       ///< >= 1
  std::vector<v1::Policy> policies;  ///< ordered by name
  /// Ordered by host id, adapters by adapter id; without session fields (a loaded host has no
  /// stream on this process).
  std::vector<HostRecord> hosts;
  /// The newest `max_events` fleet events and every stored audit event, oldest first.
  std::vector<v1::Event> events;
  /// Highest event resource version ever assigned (0 if none), including pruned events.
  uint64_t last_event_version = 0;
};

/// Hosts written since a cursor (Store::LoadHostChanges): how a replica follows the hosts
/// that agents report to the other replicas on the same database.
struct HostChanges {
  /// Every host whose record was written at or after the cursor (and perhaps some written
  /// just before: a caller applies records idempotently), ordered by host id. Each carries
  /// its stored agent session in session_replica/session_epoch (empty/0: none; open_session
  /// false) and, when its adapters were replaced at or after the cursor (adapters_changed),
  /// all its adapters ordered by adapter id; otherwise adapters is empty and the caller keeps
  /// the adapters it has.
  std::vector<HostRecord> hosts;
  /// Pass this to the next call. It never goes back. PostgreSQL: the snapshot's xmin (every
  /// transaction below it had ended when the hosts were read, so a write that commits later
  /// has an id at or above it); SQLite: the next registry write sequence number.
  uint64_t cursor = 0;
};

/// What decides the bundles, read in one snapshot (Store::LoadConfig).
struct ConfigState {
  /// The store-wide revision: grows by at least one in the transaction of every configuration
  /// change (policy applied or deleted, experiment or hold tuning created, updated or deleted,
  /// bundle version bumped) and never otherwise; registry, events and metric windows leave it
  /// alone. On PostgreSQL each change also sends a wake-up to listening replicas
  /// (server/store/change_feed.h).
  uint64_t revision = 0;
  uint64_t bundle_version = 0;       ///< >= 1
  std::vector<v1::Policy> policies;  ///< ordered by name
};

/// A lease on a singleton job (experiment scheduling and guardrails, window retention): the one
/// server process that may run the job now, among the replicas on one database.
struct Lease {
  std::string name;    ///< the job, e.g. "experiments"
  std::string holder;  ///< the holder's replica id (FleetServerOptions::replica_id)
  /// Fencing epoch: grows by one whenever the lease is taken by a holder that did not hold it
  /// unexpired (first take, take-over, re-take after expiry); a renewal keeps it.
  uint64_t epoch = 0;
  /// When the lease expires unless renewed, by the database's clock (PostgreSQL now();
  /// SQLite: the system clock, read by SQLite).
  absl::Time expire_time;
};

/// What a fenced write checks in its own transaction: lease `name` is held by `holder` at
/// `epoch` and has not expired (database clock). A write whose fence fails changes nothing and
/// returns Aborted("lease NAME is no longer held by HOLDER at epoch N; ...").
struct LeaseFence {
  std::string name;
  std::string holder;
  uint64_t epoch = 0;
};

/// Lease TTLs Store::AcquireLease accepts.
inline constexpr absl::Duration kMinLeaseTtl = absl::Seconds(1);
inline constexpr absl::Duration kMaxLeaseTtl = absl::Minutes(10);

/// The Aborted status of a failed resource_version precondition on policy `name`: `stored` is
/// the stored policy's resource version, or nullptr if the policy does not exist; `expected`
/// is the caller's. Used by the store and by dry runs, so both say the same.
absl::Status PolicyPreconditionFailed(std::string_view name, const std::string* stored,
                                      std::string_view expected);

/// One metric window as stored: the agent's message, the host that sent it and the adapter's
/// segment values at receipt (aligned with the experiment's segment keys).
struct StoredWindow {
  std::string experiment;
  std::string host_id;
  std::vector<std::string> segment;
  v1::MetricWindow window;
};

/// An audit event written into the file by a local command (`rxfleet-server tokens`), waiting
/// for the server to record it in its event log.
struct LocalAuditEvent {
  int64_t id = 0;  ///< row id, increasing
  v1::Event event;
  absl::Time time;  ///< when the command ran
};

/// Where a stored window is (Store::ForEachWindowSince).
struct WindowRow {
  int64_t id = 0;  ///< row id: unique in the database, grows with each write
  /// Position of the write that stored the row: PostgreSQL, the id of its transaction (xid8);
  /// SQLite, the row id.
  uint64_t write_seq = 0;
};

/// Windows stored for one experiment.
struct WindowCounts {
  uint64_t total = 0;
  uint64_t valid = 0;  ///< MetricWindow.valid set
};

/// Everything a database holds that outlives a server process, as Store::ImportSnapshot writes
/// it into another database (`rxfleet-server migrate-store`; ReadStoreSnapshot in
/// server/store/migrate.h gathers it). Leases and agent sessions are not part of it: they
/// belong to running servers.
struct StoreSnapshot {
  /// Revision, bundle version, last event version, policies (with their metadata), hosts with
  /// their adapters, and every stored fleet and audit event (oldest first, with their resource
  /// versions).
  StoredState state;
  /// With their metadata and status as stored, ordered by create time.
  std::vector<v1::Experiment> experiments;
  /// Hold tunings with their metadata and status as stored, ordered by create time.
  std::vector<v1::HoldTuning> tunings;
  /// Every stored metric window, in arrival order.
  std::vector<StoredWindow> windows;
  /// Audit events of local commands that no server has recorded yet, with their ids.
  std::vector<LocalAuditEvent> local_audit;
  /// Operator tokens with their hashes, ordered by name.
  std::vector<StoredToken> tokens;
};

class Store {
 public:
  /// Opens (creating if needed) and migrates the database named by options.path: PostgreSQL
  /// if IsPostgresUri(path), else an SQLite file. Errors: InvalidArgument for bad options;
  /// FailedPrecondition if the file is not an SQLite database, the schema is newer than this
  /// program's, the directory cannot be created, the PostgreSQL database does not exist or
  /// refuses the credentials, or its server lock is held the other way (ServerLock); Unavailable if
  /// it is locked or unreachable; Internal for other errors.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// The database for messages: the SQLite path, or "user@host:port/dbname" (no password).
  virtual const std::string& path() const = 0;

  /// Latest schema version this program writes for this kind of database (each backend
  /// numbers its own migrations).
  virtual int LatestSchemaVersion() const = 0;
  /// Schema version of the open database (== LatestSchemaVersion() after Open).
  virtual absl::StatusOr<int> SchemaVersion() = 0;

  /// Loads policies, revision, bundle version, hosts/adapters and the newest `max_events`
  /// events.
  virtual absl::StatusOr<StoredState> Load(size_t max_events) = 0;
  /// Loads the revision, the bundle version and the policies in one snapshot: what a server
  /// re-reads when another process changed the configuration. Errors: read errors.
  virtual absl::StatusOr<ConfigState> LoadConfig() = 0;

  /// Creates or replaces a policy (metadata.name must be set; the caller has validated it).
  /// metadata.resource_version is the precondition: empty = unconditional; set = must equal
  /// the stored version, else Aborted("policy X was modified (resource version 7, you have 5);
  /// get it again and retry") or, if the policy does not exist, Aborted("policy X does not
  /// exist (you have resource version 5); ..."). generation starts at 1 and grows when the spec
  /// changes; resource_version is the store-wide revision of the write (decimal, monotonic).
  /// A changed write bumps the bundle version in the same transaction. Write errors: see the
  /// top of this file (Unavailable, ResourceExhausted, FailedPrecondition, Internal).
  virtual absl::StatusOr<PolicyWriteResult> ApplyPolicy(const v1::Policy& policy,
                                                        absl::Time now) = 0;

  /// Deletes a policy. NotFound if it does not exist; Aborted if `resource_version` is set and
  /// differs from the stored one. Bumps the bundle version in the same transaction.
  virtual absl::StatusOr<PolicyDeleteResult> DeletePolicy(std::string_view name,
                                                          std::string_view resource_version) = 0;

  /// Persists registry changes and new/updated events in one transaction: each HostRecord
  /// replaces the stored host and, if adapters_changed, all its adapters; events are upserted by
  /// metadata.name (a folded event keeps its name and gets a new resource_version). An event
  /// without a resource_version gets the next one from the store (after last_event_version,
  /// in commit order across every connection: see LoadEventsAfter) and, if it has no name,
  /// the name and uid "ev-VERSION"; that is how servers sharing a database number their
  /// events. Audit events
  /// go to their own table (audit_events). Then prunes fleet events beyond the newest
  /// `max_events` and those whose last_time is before `events_min_time`, and audit events whose
  /// last_time is before `audit_min_time` (audit is never pruned by the volume of other events).
  /// `local_audit_done`: ids of LocalAuditEvents now in `events` (or saved before), deleted in
  /// the same transaction so each is recorded once and never lost. (Pass {} and
  /// absl::InfinitePast() for none.) Records are fenced by their agent session (see
  /// HostRecord::session_replica); the result names the sessions opened and the records
  /// skipped.
  virtual absl::StatusOr<RegistrySaveResult> SaveRegistry(
      absl::Span<const HostRecord> hosts, absl::Span<const v1::Event> events, size_t max_events,
      absl::Time events_min_time, absl::Span<const int64_t> local_audit_done,
      absl::Time audit_min_time) = 0;

  /// The hosts written at or after `cursor` (0: all hosts) and the cursor for the next call,
  /// read in one snapshot (see HostChanges). Errors: read errors; FailedPrecondition naming
  /// the row when a record does not parse.
  virtual absl::StatusOr<HostChanges> LoadHostChanges(uint64_t cursor) = 0;

  /// Stored fleet and audit events whose resource version is above `version`, in version
  /// order, at most `limit` (how a server follows the events every replica writes). Events
  /// that SaveRegistry assigned versions to commit in version order, so a reader that has
  /// seen version N will never find a lower one later. Errors: read errors; FailedPrecondition
  /// naming the table when a record does not parse.
  virtual absl::StatusOr<std::vector<v1::Event>> LoadEventsAfter(uint64_t version,
                                                                 size_t limit) = 0;

  /// Queues an audit event of a local command for the server (running or started later).
  /// Write errors as ApplyPolicy.
  virtual absl::Status AddLocalAudit(const v1::Event& event, absl::Time now) = 0;
  /// The queued local audit events, oldest first.
  virtual absl::StatusOr<std::vector<LocalAuditEvent>> PendingLocalAudit() = 0;

  /// Bumps the bundle version by one without changing policies (experiment assignments
  /// changed) and returns the new version.
  virtual absl::StatusOr<uint64_t> BumpBundleVersion() = 0;

  /// Stores a new experiment (metadata.name set, validated by the caller): sets
  /// metadata.uid, resource_version (the store-wide revision), generation 1 and
  /// create_time = `now`; returns it as stored. AlreadyExists if the name is taken (also by a
  /// stopped or completed experiment). Write errors as ApplyPolicy.
  virtual absl::StatusOr<v1::Experiment> CreateExperiment(const v1::Experiment& experiment,
                                                          absl::Time now) = 0;
  /// Replaces the status of a stored experiment (spec and metadata other than
  /// resource_version/update_time are kept) and returns it with a new resource_version.
  /// NotFound if it does not exist. `fence` (null: none) is checked first: Aborted if the
  /// writer's lease is gone (see LeaseFence).
  virtual absl::StatusOr<v1::Experiment> UpdateExperimentStatus(std::string_view name,
                                                                const v1::ExperimentStatus& status,
                                                                absl::Time now,
                                                                const LeaseFence* fence) = 0;
  /// Deletes a stored experiment and its metric windows in one transaction. NotFound if it
  /// does not exist; write errors as ApplyPolicy.
  virtual absl::Status DeleteExperiment(std::string_view name) = 0;
  /// Every stored experiment, ordered by create time (oldest first).
  virtual absl::StatusOr<std::vector<v1::Experiment>> LoadExperiments() = 0;

  /// Stores a new hold tuning (metadata.name set, validated by the caller) as
  /// CreateExperiment stores an experiment: uid, resource_version (the store-wide revision),
  /// generation 1, create_time = `now`. AlreadyExists if a tuning has the name (the caller
  /// checks experiments). Write errors as ApplyPolicy.
  virtual absl::StatusOr<v1::HoldTuning> CreateTuning(const v1::HoldTuning& tuning,
                                                      absl::Time now) = 0;
  /// Replaces the status of a stored tuning (with its planner state) and returns it with a new
  /// resource_version; bumps the revision. NotFound if it does not exist; `fence` as for
  /// UpdateExperimentStatus.
  virtual absl::StatusOr<v1::HoldTuning> UpdateTuningStatus(std::string_view name,
                                                            const v1::HoldTuningStatus& status,
                                                            absl::Time now,
                                                            const LeaseFence* fence) = 0;
  /// Deletes a stored tuning and its metric windows in one transaction. NotFound if it does
  /// not exist; write errors as ApplyPolicy.
  virtual absl::Status DeleteTuning(std::string_view name) = 0;
  /// Every stored tuning, ordered by create time (oldest first).
  virtual absl::StatusOr<std::vector<v1::HoldTuning>> LoadTunings() = 0;

  /// Appends metric windows in one transaction (all or nothing).
  virtual absl::Status AddWindows(absl::Span<const StoredWindow> windows) = 0;
  /// Calls `fn` for every stored window of `experiment`, in arrival order; `segment_keys` is
  /// the number of segment keys of the experiment. Errors: read errors; FailedPrecondition
  /// naming the row when a record does not parse.
  virtual absl::Status ForEachWindow(
      std::string_view experiment,
      const std::function<void(const std::string& host_id, std::vector<std::string> segment,
                               const v1::MetricWindow& window)>& fn) = 0;
  /// Calls `fn` for every stored window of `experiment` written at or after `cursor` (0: all),
  /// in row id order, and returns the cursor for the next call (never below `cursor`): how a
  /// server follows the windows that every replica stores. PostgreSQL may also return windows
  /// written just before the cursor (see HostChanges::cursor): a caller that keeps the ids of
  /// the rows whose WindowRow::write_seq is at or above the returned cursor drops every
  /// repeat. Errors as ForEachWindow; then the cursor does not move.
  virtual absl::StatusOr<uint64_t> ForEachWindowSince(
      std::string_view experiment, uint64_t cursor,
      const std::function<void(const WindowRow& row, const std::string& host_id,
                               std::vector<std::string> segment, const v1::MetricWindow& window)>&
          fn) = 0;
  /// Stored windows per experiment (experiments without windows are absent).
  virtual absl::StatusOr<std::map<std::string, WindowCounts>> CountWindows() = 0;
  /// Deletes the windows of experiments whose status.end_time is before `ended_before`;
  /// returns how many were deleted. `fence` as for UpdateExperimentStatus.
  virtual absl::StatusOr<uint64_t> DeleteWindowsOfExperimentsEndedBefore(
      absl::Time ended_before, const LeaseFence* fence) = 0;
  /// Deletes the windows of `experiment` (an experiment or a hold tuning) whose row id
  /// (WindowRow::id) is below `below_id`; returns how many were deleted. How a running hold
  /// tuning drops the windows none of its segments reads any more. `fence` as for
  /// UpdateExperimentStatus.
  virtual absl::StatusOr<uint64_t> DeleteWindowsBelow(std::string_view experiment, int64_t below_id,
                                                      const LeaseFence* fence) = 0;

  /// Writes `snapshot` verbatim into this database, which must be empty, in one transaction:
  /// rows keep their metadata (uids, resource versions, generations, times), events their
  /// resource versions, local audit events their ids, tokens their hashes; the revision, the
  /// bundle version and the last event version are set to the snapshot's, so later writes
  /// continue above the imported values (arrival order of windows is kept). Sends the
  /// revision's wake-up like any configuration change (PostgreSQL). Errors:
  /// FailedPrecondition naming the database if it is not empty (any policy, host, adapter,
  /// event, experiment, hold tuning, window, token or local audit row, or a revision or last event
  /// version above 0); InvalidArgument if a policy or event has no numeric resource version, or a
  /// bundle version is 0; write errors as ApplyPolicy. Nothing is written on any error.
  virtual absl::Status ImportSnapshot(const StoreSnapshot& snapshot) = 0;

  /// Takes or renews lease `name` for `holder` until the database's now + `ttl`: granted when
  /// nobody holds it, when it has expired, or when `holder` holds it (a renewal, same epoch);
  /// otherwise nothing changes. Returns the lease as stored after the call: granted iff its
  /// holder is `holder`. The SQLite store, which one server process owns (its lock file),
  /// always grants, taking the lease over from any previous holder. Errors: InvalidArgument
  /// for an empty name or holder (or longer than 256 bytes) or a ttl outside
  /// [kMinLeaseTtl, kMaxLeaseTtl]; write errors as ApplyPolicy.
  virtual absl::StatusOr<Lease> AcquireLease(std::string_view name, std::string_view holder,
                                             absl::Duration ttl) = 0;
  /// Gives the lease up (it expires now) if `fence` still holds it, so another replica may
  /// take it at once; changes nothing otherwise. Write errors as ApplyPolicy.
  virtual absl::Status ReleaseLease(const LeaseFence& fence) = 0;

  /// Claims replica id `id` for this process for the store's lifetime, so that two servers on
  /// one database never run under one id (their leases and agent sessions would be one).
  /// PostgreSQL: a session advisory lock keyed by the id's hash, taken again whenever the
  /// store reconnects; FailedPrecondition ("another rxfleet-server runs with --replica-id
  /// ID") if another session holds it. SQLite (one server per file): always OK. Errors also
  /// as Open's.
  virtual absl::Status ClaimReplicaId(std::string_view id) = 0;

 protected:
  Store() = default;
};

}  // namespace rxfleet::server
