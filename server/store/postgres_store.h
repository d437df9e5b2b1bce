#pragma once

// The PostgreSQL implementation of Store (server/store/store.h), selected by a libpq
// connection URI (`--db postgresql://user@host:port/dbname`; unset parts from the PG*
// environment variables). Files: postgres_store.cc (open, policies, registry, events),
// postgres_store_experiments.cc (experiments, windows), postgres_store_tunings.cc (hold
// tunings), postgres_util.h (the revision lock), postgres_token_store.cc. Same semantics as the
// SQLite store; the differences are where the data lives and how writers are kept apart:
//
// - Schema: numbered migrations of its own (postgres_schema.cc), applied at open under a
//   transaction-scoped advisory lock, so processes opening the database at once apply each
//   migration once.
// - Every configuration write (policy, experiment, hold tuning, bundle version) first locks the
// `revision`
//   row of the meta table (SELECT ... FOR UPDATE): such writes are serialised in commit order
//   across every process on the database, and a resource_version precondition is checked
//   under that lock. Registry, events and metric windows never take it.
// - Counters are incremented in SQL (UPDATE ... RETURNING), never read and written back.
// - Connection: one per store, TCP keepalives on; lock waits are bounded by
//   StoreOptions.busy_timeout (lock_timeout). A lost connection fails the call in progress with
//   Unavailable and is re-opened by the next call; nothing partial is committed.
// - Batches (hosts, adapters, events, windows) are sent in pipeline mode (pq::ExecMany).
// - Client library: libpq directly (Debian's libpq-dev 15), through the RAII layer in
//   server/store/pq.h: pipeline mode and typed binary parameters are in libpq 15 itself, while
//   Debian 12's libpqxx is 6.4, an older API that changed in 7.x.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/store/store.h"

namespace rxfleet::server {

namespace pq {
class Connection;
}  // namespace pq

class PostgresStore final : public Store {
 public:
  /// Connects to options.path (a URI, IsPostgresUri) and migrates the schema; takes the
  /// database's server lock as options.server_lock says (a session advisory lock) or fails.
  /// Errors: Unavailable (unreachable, or the connect timed out); FailedPrecondition (refused
  /// credentials, no such database, schema newer than this program's, another server holds the
  /// lock); Internal otherwise. Options were validated by Store::Open (use that).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  ~PostgresStore() override;

  const std::string& path() const override { return name_; }
  int LatestSchemaVersion() const override;
  absl::StatusOr<int> SchemaVersion() override;
  absl::StatusOr<StoredState> Load(size_t max_events) override;
  absl::StatusOr<ConfigState> LoadConfig() override;
  absl::StatusOr<HostChanges> LoadHostChanges(uint64_t cursor) override;
  absl::Status ClaimReplicaId(std::string_view id) override;
  absl::StatusOr<std::vector<v1::Event>> LoadEventsAfter(uint64_t version, size_t limit) override;
  absl::StatusOr<PolicyWriteResult> ApplyPolicy(const v1::Policy& policy, absl::Time now) override;
  absl::StatusOr<PolicyDeleteResult> DeletePolicy(std::string_view name,
                                                  std::string_view resource_version) override;
  absl::StatusOr<RegistrySaveResult> SaveRegistry(absl::Span<const HostRecord> hosts,
                                                  absl::Span<const v1::Event> events,
                                                  size_t max_events, absl::Time events_min_time,
                                                  absl::Span<const int64_t> local_audit_done,
                                                  absl::Time audit_min_time) override;
  absl::Status AddLocalAudit(const v1::Event& event, absl::Time now) override;
  absl::StatusOr<std::vector<LocalAuditEvent>> PendingLocalAudit() override;
  absl::StatusOr<uint64_t> BumpBundleVersion() override;
  absl::StatusOr<v1::Experiment> CreateExperiment(const v1::Experiment& experiment,
                                                  absl::Time now) override;
  absl::StatusOr<v1::Experiment> UpdateExperimentStatus(std::string_view name,
                                                        const v1::ExperimentStatus& status,
                                                        absl::Time now,
                                                        const LeaseFence* fence) override;
  absl::Status DeleteExperiment(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Experiment>> LoadExperiments() override;
  absl::StatusOr<v1::HoldTuning> CreateTuning(const v1::HoldTuning& tuning,
                                              absl::Time now) override;
  absl::StatusOr<v1::HoldTuning> UpdateTuningStatus(std::string_view name,
                                                    const v1::HoldTuningStatus& status,
                                                    absl::Time now,
                                                    const LeaseFence* fence) override;
  absl::Status DeleteTuning(std::string_view name) override;
  absl::StatusOr<std::vector<v1::HoldTuning>> LoadTunings() override;
  absl::Status AddWindows(absl::Span<const StoredWindow> windows) override;
  absl::StatusOr<uint64_t> ForEachWindowSince(
      std::string_view experiment, uint64_t cursor,
      const std::function<void(const WindowRow& row, const std::string& host_id,
                               std::vector<std::string> segment, const v1::MetricWindow& window)>&
          fn) override;
  absl::Status ForEachWindow(
      std::string_view experiment,
      const std::function<void(const std::string& host_id, std::vector<std::string> segment,
                               const v1::MetricWindow& window)>& fn) override;
  absl::StatusOr<std::map<std::string, WindowCounts>> CountWindows() override;
  absl::StatusOr<uint64_t> DeleteWindowsOfExperimentsEndedBefore(absl::Time ended_before,
                                                                 const LeaseFence* fence) override;
  absl::StatusOr<uint64_t> DeleteWindowsBelow(std::string_view experiment, int64_t below_id,
                                              const LeaseFence* fence) override;
  absl::Status ImportSnapshot(const StoreSnapshot& snapshot) override;
  absl::StatusOr<Lease> AcquireLease(std::string_view name, std::string_view holder,
                                     absl::Duration ttl) override;
  absl::Status ReleaseLease(const LeaseFence& fence) override;

 private:
  explicit PostgresStore(const StoreOptions& options);
  // The connection, (re)opened if it is missing or broken (and the server lock re-taken);
  // throws pq::Error.
  pq::Connection& Connected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string conninfo_;
  const absl::Duration busy_timeout_;
  const ServerLock server_lock_;
  std::string replica_id_ ABSL_GUARDED_BY(mu_);  // ClaimReplicaId's, taken on every connect
  std::string name_;                             // for messages; set once at Open
  absl::Mutex mu_;
  std::unique_ptr<pq::Connection> conn_ ABSL_GUARDED_BY(mu_);
};

/// Schema of the PostgreSQL store (postgres_schema.cc): the latest version, and the migration
/// of an open connection to `target_version` (tests: an older schema) in one transaction.
/// Throws pq::Error; FailedPrecondition-class error ("55000") if the database's schema is newer.
int LatestPostgresSchemaVersion();
void MigratePostgresSchema(pq::Connection& conn, int target_version);

}  // namespace rxfleet::server
