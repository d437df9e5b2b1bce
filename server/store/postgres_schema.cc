// Schema of the PostgreSQL store, as numbered migrations recorded in `schema_migrations` (the
// same scheme as the SQLite file's, server/store/schema.cc, with its own numbers): 1 is the
// SQLite schema 5 in PostgreSQL types, 2 adds the leases (SQLite 6), 3 the agent sessions
// (SQLite 7), 4 the write ids of hosts and metric windows (SQLite 8 has a registry write
// sequence instead; its window row ids commit in order), 5 the hold tunings (SQLite 9). Text
// columns use the "C" collation so names order by byte, as in SQLite.

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/store/postgres_store.h"
#include "server/store/pq.h"

namespace rxfleet::server {
namespace {

struct Migration {
  int version;
  const char* description;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, "policies, bundle version, registry, events, experiments, windows, tokens, audit",
     R"sql(
      CREATE TABLE meta (key TEXT COLLATE "C" PRIMARY KEY, value BIGINT NOT NULL);
      INSERT INTO meta (key, value) VALUES ('bundle_version', 1), ('revision', 0),
                                           ('last_event_version', 0);
      CREATE TABLE policies (
        name TEXT COLLATE "C" PRIMARY KEY,
        resource_version BIGINT NOT NULL,
        record BYTEA NOT NULL
      );
      CREATE TABLE hosts (id TEXT COLLATE "C" PRIMARY KEY, record BYTEA NOT NULL);
      CREATE TABLE adapters (
        host_id TEXT COLLATE "C" NOT NULL,
        id TEXT COLLATE "C" NOT NULL,
        record BYTEA NOT NULL,
        PRIMARY KEY (host_id, id)
      );
      CREATE TABLE events (
        resource_version BIGINT PRIMARY KEY,
        name TEXT COLLATE "C" NOT NULL UNIQUE,
        last_time_ns BIGINT NOT NULL,
        record BYTEA NOT NULL
      );
      CREATE INDEX events_by_last_time ON events (last_time_ns);
      CREATE TABLE audit_events (
        resource_version BIGINT PRIMARY KEY,
        name TEXT COLLATE "C" NOT NULL UNIQUE,
        last_time_ns BIGINT NOT NULL,
        record BYTEA NOT NULL
      );
      CREATE INDEX audit_events_by_last_time ON audit_events (last_time_ns);
      CREATE TABLE experiments (
        name TEXT COLLATE "C" PRIMARY KEY,
        create_time_ns BIGINT NOT NULL,
        end_time_ns BIGINT,
        record BYTEA NOT NULL
      );
      CREATE TABLE metric_windows (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        experiment TEXT COLLATE "C" NOT NULL,
        host_id TEXT COLLATE "C" NOT NULL,
        valid BOOLEAN NOT NULL,
        segment_count INTEGER NOT NULL,
        segment TEXT COLLATE "C" NOT NULL,
        record BYTEA NOT NULL
      );
      CREATE INDEX metric_windows_by_experiment ON metric_windows (experiment, id);
      CREATE TABLE tokens (
        name TEXT COLLATE "C" PRIMARY KEY,
        role TEXT NOT NULL,
        hash BYTEA NOT NULL UNIQUE,
        create_time_us BIGINT NOT NULL,
        created_by TEXT NOT NULL
      );
      CREATE TABLE local_audit (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        time_ns BIGINT NOT NULL,
        record BYTEA NOT NULL
      );
    )sql"},
    {2, "leases of singleton jobs",
     R"sql(
      CREATE TABLE leases (
        name TEXT COLLATE "C" PRIMARY KEY,
        holder TEXT COLLATE "C" NOT NULL,
        epoch BIGINT NOT NULL,
        expire_time_us BIGINT NOT NULL
      );
    )sql"},
    {3, "agent sessions: which replica holds each host, under which epoch",
     R"sql(
      CREATE TABLE agent_sessions (
        host_id TEXT COLLATE "C" PRIMARY KEY,
        replica TEXT COLLATE "C" NOT NULL,
        epoch BIGINT NOT NULL,
        connect_time_ns BIGINT NOT NULL
      );
    )sql"},
    {4, "write ids: which transaction last wrote each host, its adapters, each metric window",
     R"sql(
      ALTER TABLE hosts ADD COLUMN write_xid xid8 NOT NULL DEFAULT '0';
      ALTER TABLE hosts ADD COLUMN adapters_xid xid8 NOT NULL DEFAULT '0';
      CREATE INDEX hosts_by_write_xid ON hosts (write_xid);
      ALTER TABLE metric_windows ADD COLUMN write_xid xid8 NOT NULL DEFAULT '0';
      ALTER TABLE metric_windows ALTER COLUMN write_xid SET DEFAULT pg_current_xact_id();
      CREATE INDEX metric_windows_by_write_xid ON metric_windows (experiment, write_xid);
    )sql"},
    {5, "hold tunings",
     R"sql(
      CREATE TABLE tunings (
        name TEXT COLLATE "C" PRIMARY KEY,
        create_time_ns BIGINT NOT NULL,
        end_time_ns BIGINT,
        record BYTEA NOT NULL
      );
    )sql"},
};

// Advisory lock keys of the store (one 64-bit space per database): the migration lock is held
// for a migration's transaction, the server lock for a store's session (StoreOptions::server_lock).
constexpr int64_t kMigrationLock = 0x72786d6967726174;  // "rxmigrat"

}  // namespace

int LatestPostgresSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

void MigratePostgresSchema(pq::Connection& conn, int target_version) {
  pq::Transaction transaction(conn);
  try {
    conn.Exec("SELECT pg_advisory_xact_lock($1)", pq::Params().Int(kMigrationLock));
  } catch (const pq::Error& e) {
    if (e.sqlstate() != "55P03") throw;  // lock_not_available: the lock timeout passed
    throw pq::Error("55P03",
                    "another process is migrating this database's schema and did not finish "
                    "within the lock timeout; start again when it is done");
  }
  conn.ExecScript(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
      "description TEXT NOT NULL, applied_time_ns BIGINT NOT NULL)");
  const int64_t current =
      conn.Exec("SELECT COALESCE(MAX(version), 0)::int8 FROM schema_migrations").Int(0, 0);
  if (current > LatestPostgresSchemaVersion()) {
    throw pq::Error(
        "55000", absl::StrCat("the database has schema version ", current,
                              ", newer than this server supports (", LatestPostgresSchemaVersion(),
                              "); run a newer rxfleet-server or restore a backup"));
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= current || migration.version > target_version) continue;
    conn.ExecScript(migration.sql);
    conn.Exec("INSERT INTO schema_migrations VALUES ($1::int8::int4, $2, $3)",
              pq::Params()
                  .Int(migration.version)
                  .Text(migration.description)
                  .Int(absl::ToUnixNanos(absl::Now())));
  }
  transaction.Commit();
}

}  // namespace rxfleet::server
