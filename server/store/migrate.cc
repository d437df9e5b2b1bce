#include "server/store/migrate.h"

#include <filesystem>
#include <limits>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "server/store/database_lock.h"

namespace rxfleet::server {

using common::ToAbslView;

absl::StatusOr<StoreSnapshot> ReadStoreSnapshot(Store& store, TokenStore& tokens) {
  StoreSnapshot snapshot;
  // Every event: the limit only bounds the fleet events (audit events are always all loaded).
  absl::StatusOr<StoredState> state =
      store.Load(static_cast<size_t>(std::numeric_limits<int64_t>::max()));
  if (!state.ok()) return state.status();
  snapshot.state = *std::move(state);
  absl::StatusOr<std::vector<v1::Experiment>> experiments = store.LoadExperiments();
  if (!experiments.ok()) return experiments.status();
  snapshot.experiments = *std::move(experiments);
  absl::StatusOr<std::vector<v1::HoldTuning>> tunings = store.LoadTunings();
  if (!tunings.ok()) return tunings.status();
  snapshot.tunings = *std::move(tunings);
  // Windows of every experiment and tuning, and of any name that has windows without either
  // (a store never leaves such rows, but a copy must not drop what is there).
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = store.CountWindows();
  if (!counts.ok()) return counts.status();
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const v1::Experiment& experiment : snapshot.experiments) {
    if (seen.insert(experiment.metadata().name()).second) {
      names.push_back(experiment.metadata().name());
    }
  }
  for (const v1::HoldTuning& tuning : snapshot.tunings) {
    if (seen.insert(tuning.metadata().name()).second) names.push_back(tuning.metadata().name());
  }
  for (const auto& [name, count] : *counts) {
    if (seen.insert(name).second) names.push_back(name);
  }
  for (const std::string& name : names) {
    if (!counts->contains(name)) continue;
    absl::Status s =
        store.ForEachWindow(name, [&](const std::string& host_id, std::vector<std::string> segment,
                                      const v1::MetricWindow& window) {
          snapshot.windows.push_back({name, host_id, std::move(segment), window});
        });
    if (!s.ok()) return s;
  }
  absl::StatusOr<std::vector<LocalAuditEvent>> local_audit = store.PendingLocalAudit();
  if (!local_audit.ok()) return local_audit.status();
  snapshot.local_audit = *std::move(local_audit);
  absl::StatusOr<std::vector<StoredToken>> stored_tokens = tokens.ListWithHashes();
  if (!stored_tokens.ok()) return stored_tokens.status();
  snapshot.tokens = *std::move(stored_tokens);
  return snapshot;
}

absl::StatusOr<std::string> SqlitePathOfSource(std::string_view from) {
  // A URI is not echoed: it may hold a password.
  if (IsPostgresUri(from)) {
    return absl::InvalidArgumentError(
        "--from: the source must be an SQLite database (sqlite:PATH); migrate-store copies into "
        "PostgreSQL, not out of it");
  }
  std::string_view path = from;
  if (absl::StartsWith(ToAbslView(path), "sqlite:")) {
    path.remove_prefix(std::string_view("sqlite:").size());
    // sqlite:///var/lib/x.db, the URI spelling of an absolute path.
    if (absl::StartsWith(ToAbslView(path), "///")) path.remove_prefix(2);
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--from ", ToAbslView(from), ": no path (use sqlite:PATH)"));
  }
  return std::string(path);
}

absl::StatusOr<MigrateSummary> MigrateStore(const std::string& from_path, const std::string& to) {
  if (!IsPostgresUri(to)) {
    // Not echoed: a mistyped URI may hold a password.
    return absl::InvalidArgumentError(
        "--to must be a PostgreSQL connection URI (postgresql://... or postgres://...)");
  }
  std::error_code exists_error;
  if (!std::filesystem::exists(from_path, exists_error)) {
    return absl::NotFoundError(absl::StrCat("no database at ", from_path));
  }
  // No server may write the source while it is read: the server's own lock file.
  absl::StatusOr<DatabaseFileLock> source_lock = DatabaseFileLock::Acquire(from_path);
  if (!source_lock.ok()) return source_lock.status();

  StoreOptions target_options;
  target_options.path = to;
  // No server may run on the target during the import (nor start before it commits).
  target_options.server_lock = ServerLock::kExclusive;
  absl::StatusOr<std::unique_ptr<Store>> target = Store::Open(target_options);
  if (!target.ok()) return target.status();

  absl::StatusOr<std::unique_ptr<Store>> source = Store::Open({from_path});
  if (!source.ok()) return source.status();
  absl::StatusOr<std::unique_ptr<TokenStore>> source_tokens = TokenStore::Open(from_path);
  if (!source_tokens.ok()) return source_tokens.status();
  absl::StatusOr<StoreSnapshot> snapshot = ReadStoreSnapshot(**source, **source_tokens);
  if (!snapshot.ok()) return snapshot.status();

  if (absl::Status s = (*target)->ImportSnapshot(*snapshot); !s.ok()) return s;

  MigrateSummary summary;
  summary.from = from_path;
  summary.to = (*target)->path();
  summary.revision = snapshot->state.revision;
  summary.bundle_version = snapshot->state.bundle_version;
  summary.last_event_version = snapshot->state.last_event_version;
  summary.policies = snapshot->state.policies.size();
  summary.hosts = snapshot->state.hosts.size();
  for (const HostRecord& host : snapshot->state.hosts) summary.adapters += host.adapters.size();
  summary.events = snapshot->state.events.size();
  summary.experiments = snapshot->experiments.size();
  summary.tunings = snapshot->tunings.size();
  summary.windows = snapshot->windows.size();
  summary.local_audit = snapshot->local_audit.size();
  summary.tokens = snapshot->tokens.size();
  return summary;
}

}  // namespace rxfleet::server
