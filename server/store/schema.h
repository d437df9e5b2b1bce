#pragma once

// The schema of the server's SQLite file, as numbered migrations recorded in
// `schema_migrations`: 1 policies, bundle version, registry and events; 2 experiments and
// metric windows; 3 operator tokens; 4 audit events of local commands; 5 audit events in their
// own table (moving those older files kept among the fleet events); 6 leases; 7 agent sessions;
// 8 the registry write sequence; 9 hold tunings. Both connections to the file
// (server/store/store.h and server/store/token_store.h) migrate it when they open it.

#include <string>

#include "absl/status/status.h"

namespace SQLite {
class Database;
}  // namespace SQLite

namespace rxfleet::server {

/// Latest schema version this program writes.
int LatestSchemaVersion();

/// Applies the missing migrations in order, with their schema_migrations rows, in one IMMEDIATE
/// transaction (all or none; two processes opening the file at once apply each migration
/// once). FailedPrecondition if the file's schema is newer than LatestSchemaVersion();
/// other errors as StatusFromSqlite. `path` names the file in messages. `target_version`
/// (tests building the file of an older release): apply migrations up to this version only.
absl::Status MigrateSchema(SQLite::Database& db, const std::string& path,
                           int target_version = LatestSchemaVersion());

}  // namespace rxfleet::server
