#include "server/store/schema.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {
namespace {

// One entry per schema version, applied in order. Never edit a released entry: append a new
// one. Each runs in its own transaction together with its schema_migrations row.
struct Migration {
  int version;
  const char* description;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, "policies, bundle version, registry and events",
     R"sql(
      CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO meta (key, value) VALUES ('bundle_version', 1), ('revision', 0),
                                           ('last_event_version', 0);
      CREATE TABLE policies (
        name TEXT PRIMARY KEY,
        resource_version INTEGER NOT NULL,
        record BLOB NOT NULL
      ) WITHOUT ROWID;
      CREATE TABLE hosts (id TEXT PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID;
      CREATE TABLE adapters (
        host_id TEXT NOT NULL,
        id TEXT NOT NULL,
        record BLOB NOT NULL,
        PRIMARY KEY (host_id, id)
      ) WITHOUT ROWID;
      CREATE TABLE events (
        resource_version INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        last_time_ns INTEGER NOT NULL,
        record BLOB NOT NULL
      );
      CREATE INDEX events_by_last_time ON events (last_time_ns);
    )sql"},
    {2, "experiments and metric windows",
     R"sql(
      CREATE TABLE experiments (
        name TEXT PRIMARY KEY,
        create_time_ns INTEGER NOT NULL,
        end_time_ns INTEGER,
        record BLOB NOT NULL
      ) WITHOUT ROWID;
      CREATE TABLE metric_windows (
        id INTEGER PRIMARY KEY,
        experiment TEXT NOT NULL,
        host_id TEXT NOT NULL,
        valid INTEGER NOT NULL,
        segment_count INTEGER NOT NULL,
        segment TEXT NOT NULL,
        record BLOB NOT NULL
      );
      CREATE INDEX metric_windows_by_experiment ON metric_windows (experiment, id);
    )sql"},
    // Files written before this migration may already hold the table (the token store
    // created it on its own), hence IF NOT EXISTS.
    {3, "operator tokens",
     R"sql(
      CREATE TABLE IF NOT EXISTS tokens (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        hash BLOB NOT NULL UNIQUE,
        create_time_us INTEGER NOT NULL,
        created_by TEXT NOT NULL
      ) WITHOUT ROWID;
    )sql"},
    {4, "audit events of local commands, waiting for the server to record them",
     R"sql(
      CREATE TABLE local_audit (
        id INTEGER PRIMARY KEY,
        time_ns INTEGER NOT NULL,
        record BLOB NOT NULL
      );
    )sql"},
    {5, "audit events in their own table, kept by age only",
     R"sql(
      CREATE TABLE audit_events (
        resource_version INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        last_time_ns INTEGER NOT NULL,
        record BLOB NOT NULL
      );
      CREATE INDEX audit_events_by_last_time ON audit_events (last_time_ns);
    )sql"},
};

}  // namespace

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

absl::Status MigrateSchema(SQLite::Database& db, const std::string& path) {
  try {
    // IMMEDIATE: a second process opening the file at the same time waits here and then sees
    // the migrations the first one applied.
    SQLite::Transaction check(db, SQLite::TransactionBehavior::IMMEDIATE);
    db.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "description TEXT NOT NULL, applied_time_ns INTEGER NOT NULL)");
    const int current =
        db.execAndGet("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").getInt();
    if (current > LatestSchemaVersion()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", path, " has schema version ", current, ", newer than this server supports (",
          LatestSchemaVersion(), "); run a newer rxfleet-server or restore a backup"));
    }
    for (const Migration& migration : kMigrations) {
      if (migration.version <= current) continue;
      db.exec(migration.sql);
      SQLite::Statement record(db, "INSERT INTO schema_migrations VALUES (?, ?, ?)");
      record.bind(1, migration.version);
      record.bind(2, migration.description);
      record.bind(3, absl::ToUnixNanos(absl::Now()));
      record.exec();
    }
    check.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot migrate the database schema", path);
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
