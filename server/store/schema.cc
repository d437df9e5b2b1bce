#include "server/store/schema.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rxfleet/v1/event.pb.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {
namespace {

// Files of schema 4 and older kept audit events among the fleet events: moves them into
// audit_events (the event protobuf is the only place that says an event is audit), so an
// upgrade keeps them under the audit retention and out of the fleet events' count.
void MoveAuditEvents(SQLite::Database& db) {
  SQLite::Statement rows(db, "SELECT resource_version, name, last_time_ns, record FROM events");
  SQLite::Statement insert(db,
                           "INSERT INTO audit_events (resource_version, name, last_time_ns, "
                           "record) VALUES (?, ?, ?, ?)");
  SQLite::Statement remove(db, "DELETE FROM events WHERE resource_version = ?");
  std::vector<int64_t> moved;
  while (rows.executeStep()) {
    const SQLite::Column record = rows.getColumn(3);
    v1::Event event;
    if (!event.ParseFromArray(record.getBlob(), record.getBytes()) || !event.has_audit()) continue;
    insert.bind(1, rows.getColumn(0).getInt64());
    insert.bind(2, rows.getColumn(1).getString());
    insert.bind(3, rows.getColumn(2).getInt64());
    insert.bind(4, record.getBlob(), record.getBytes());
    insert.exec();
    insert.reset();
    moved.push_back(rows.getColumn(0).getInt64());
  }
  for (int64_t version : moved) {
    remove.bind(1, version);
    remove.exec();
    remove.reset();
  }
}

// One entry per schema version, applied in order. Never edit a released entry: append a new
// one. Each runs in its own transaction together with its schema_migrations row: first `sql`,
// then `code` (when set) for what SQL cannot say.
struct Migration {
  int version;
  const char* description;
  const char* sql;
  void (*code)(SQLite::Database&) = nullptr;
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
    )sql",
     &MoveAuditEvents},
    {6, "leases of singleton jobs",
     R"sql(
      CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expire_time_us INTEGER NOT NULL
      );
    )sql"},
    {7, "agent sessions: which replica holds each host, under which epoch",
     R"sql(
      CREATE TABLE agent_sessions (
        host_id TEXT PRIMARY KEY,
        replica TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        connect_time_ns INTEGER NOT NULL
      );
    )sql"},
    {8, "registry write sequence: which hosts and adapters each save wrote",
     R"sql(
      ALTER TABLE hosts ADD COLUMN write_seq INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE hosts ADD COLUMN adapters_seq INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX hosts_by_write_seq ON hosts (write_seq);
      INSERT INTO meta (key, value) VALUES ('registry_seq', 0);
    )sql"},
    // Tunings share the experiments' name namespace: their windows are in metric_windows
    // under the tuning's name.
    {9, "hold tunings",
     R"sql(
      CREATE TABLE tunings (
        name TEXT PRIMARY KEY,
        create_time_ns INTEGER NOT NULL,
        end_time_ns INTEGER,
        record BLOB NOT NULL
      ) WITHOUT ROWID;
    )sql"},
};

}  // namespace

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

absl::Status MigrateSchema(SQLite::Database& db, const std::string& path, int target_version) {
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
      if (migration.version <= current || migration.version > target_version) continue;
      db.exec(migration.sql);
      if (migration.code != nullptr) migration.code(db);
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
