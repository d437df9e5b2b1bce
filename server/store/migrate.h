#pragma once

// `rxfleet-server migrate-store`: copies a single server's SQLite database into an empty
// PostgreSQL database, so the fleet can run several servers on it. Everything a server keeps
// is copied verbatim (StoreSnapshot in server/store/store.h: policies, experiments and hold
// tunings with their metadata, the revision and bundle version, hosts and adapters, fleet and audit
// events with their resource versions, metric windows in arrival order, pending local audit events,
// tokens with their hashes), in one transaction of the target; leases and agent sessions
// belong to running servers and are not copied. The source file is only read (after its
// schema is brought up to date, as a server start would).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/store/store.h"
#include "server/store/token_store.h"

namespace rxfleet::server {

/// Everything StoreSnapshot holds, read from `store` and `tokens` (two connections to the same
/// database; no server may write it meanwhile). Events: every stored one, not only a server's
/// newest max_events. Windows: those of every experiment and tuning with windows, in arrival
/// order.
/// Errors: the stores' read errors.
absl::StatusOr<StoreSnapshot> ReadStoreSnapshot(Store& store, TokenStore& tokens);

/// The SQLite path named by migrate-store's --from: "sqlite:PATH" ("sqlite:///abs/path" too)
/// or a bare PATH. InvalidArgument for an empty path or a PostgreSQL URI.
absl::StatusOr<std::string> SqlitePathOfSource(std::string_view from);

/// What MigrateStore copied.
struct MigrateSummary {
  std::string from;  ///< the SQLite file
  std::string to;    ///< the PostgreSQL database, "user@host:port/dbname" (no password)
  uint64_t revision = 0;
  uint64_t bundle_version = 0;
  uint64_t last_event_version = 0;
  size_t policies = 0;
  size_t hosts = 0;
  size_t adapters = 0;
  size_t events = 0;  ///< fleet and audit events
  size_t experiments = 0;
  size_t tunings = 0;  ///< hold tunings
  size_t windows = 0;
  size_t local_audit = 0;
  size_t tokens = 0;
};

/// Copies SQLite database `from_path` into the empty PostgreSQL database `to` (a URI,
/// IsPostgresUri). Holds the source's lock file (server/store/database_lock.h) and the
/// target's server lock (StoreOptions::server_lock, exclusively) throughout, so no server runs
/// on either.
/// Errors (each names the database): InvalidArgument if `to` is not a PostgreSQL URI;
/// NotFound if there is no file at `from_path`; FailedPrecondition if a server holds either
/// database or the target is not empty; the stores' open, read and write errors otherwise.
/// Nothing is written to the target on any error.
absl::StatusOr<MigrateSummary> MigrateStore(const std::string& from_path, const std::string& to);

}  // namespace rxfleet::server
