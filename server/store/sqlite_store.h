#pragma once

// The SQLite implementation of Store (server/store/store.h): one database file, WAL journal
// with synchronous=FULL, every write one BEGIN IMMEDIATE transaction. Schema: numbered
// migrations in server/store/schema.h. Policies, registry and events: sqlite_store.cc;
// experiments and metric windows: sqlite_store_experiments.cc; hold tunings:
// sqlite_store_tunings.cc.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/store/store.h"

namespace SQLite {
class Database;
}  // namespace SQLite

namespace rxfleet::server {

class SqliteStore final : public Store {
 public:
  /// Opens (creating the file and its directory if needed) and migrates options.path, which
  /// Store::Open has validated (use that). Errors: FailedPrecondition if the file is not an SQLite
  /// database, its schema is newer than this program's, or the directory cannot be created;
  /// Unavailable if it is locked; Internal for other SQLite errors. Messages name the path.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  ~SqliteStore() override;

  const std::string& path() const override { return path_; }
  int LatestSchemaVersion() const override;
  absl::StatusOr<int> SchemaVersion() override;
  absl::StatusOr<StoredState> Load(size_t max_events) override;
  absl::StatusOr<ConfigState> LoadConfig() override;
  absl::StatusOr<HostChanges> LoadHostChanges(uint64_t cursor) override;
  absl::Status ClaimReplicaId(std::string_view /*id*/) override { return absl::OkStatus(); }
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
  explicit SqliteStore(std::string path);

  const std::string path_;
  absl::Mutex mu_;
  std::unique_ptr<SQLite::Database> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::server
