// The PostgreSQL store (server/store/postgres_store.h): opening, policies, registry, events and
// local audit; experiments and metric windows are in postgres_store_experiments.cc.

#include "server/store/postgres_store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"
#include "server/store/records.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;
using postgres::LockRevision;
using postgres::SetRevision;

// The server lock (see StoreOptions::server_lock).
constexpr int64_t kServerLock = 0x72787365727665;  // "rxserve"

int64_t ReadMeta(pq::Connection& conn, const char* key) {
  pq::Result row = conn.Exec("SELECT value FROM meta WHERE key = $1", pq::Params().Text(key));
  if (row.rows() != 1) throw pq::Error("XX001", absl::StrCat("meta key '", key, "' is missing"));
  return row.Int(0, 0);
}

int64_t BumpMeta(pq::Connection& conn, const char* key) {
  pq::Result row = conn.Exec("UPDATE meta SET value = value + 1 WHERE key = $1 RETURNING value",
                             pq::Params().Text(key));
  if (row.rows() != 1) throw pq::Error("XX001", absl::StrCat("meta key '", key, "' is missing"));
  return row.Int(0, 0);
}

std::optional<v1::Policy> FindPolicy(pq::Connection& conn, std::string_view name) {
  pq::Result row =
      conn.Exec("SELECT record FROM policies WHERE name = $1", pq::Params().Text(name));
  if (row.rows() == 0) return std::nullopt;
  return row.Record<v1::Policy>(0, 0, "policies");
}

}  // namespace

PostgresStore::PostgresStore(const StoreOptions& options)
    : conninfo_(options.path),
      busy_timeout_(options.busy_timeout),
      server_lock_(options.server_lock),
      name_(pq::DescribeConninfo(options.path)) {}

PostgresStore::~PostgresStore() {
  // Session advisory locks (the server lock, the replica id) go when the backend ends, which
  // PostgreSQL does some time after the client hangs up; releasing them here lets a
  // `migrate-store` or a restarted server started right after this one take them at once.
  absl::MutexLock lock(&mu_);
  if (conn_ == nullptr || !conn_->healthy()) return;
  try {
    conn_->Exec("SELECT pg_advisory_unlock_all()");
  } catch (const pq::Error&) {
    // The connection is going anyway; its backend releases the locks when it ends.
  }
}

int PostgresStore::LatestSchemaVersion() const { return LatestPostgresSchemaVersion(); }

void PostgresStore::Connect() {
  conn_.reset();
  std::unique_ptr<pq::Connection> conn =
      pq::Connection::Open(conninfo_, std::max(busy_timeout_, absl::Seconds(1)));
  // A lock wait longer than the busy timeout fails the write (55P03, Unavailable).
  conn->Exec(absl::StrCat("SET lock_timeout = ",
                          std::max<int64_t>(1, absl::ToInt64Milliseconds(busy_timeout_))));
  if (server_lock_ == ServerLock::kExclusive) {
    pq::Result locked =
        conn->Exec("SELECT pg_try_advisory_lock($1)", pq::Params().Int(kServerLock));
    if (locked.Int(0, 0) == 0) {
      throw pq::Error("55000",
                      "the database is in use by another rxfleet-server (a server holds the "
                      "server lock; stop every server on the database first)");
    }
  } else if (server_lock_ == ServerLock::kShared) {
    pq::Result locked =
        conn->Exec("SELECT pg_try_advisory_lock_shared($1)", pq::Params().Int(kServerLock));
    if (locked.Int(0, 0) == 0) {
      throw pq::Error("55000",
                      "the database is being copied into by rxfleet-server migrate-store (it "
                      "holds the server lock exclusively); start the server when it is done");
    }
  }
  if (!replica_id_.empty()) {
    pq::Result claimed =
        conn->Exec("SELECT pg_try_advisory_lock(hashtextextended('rxfleet-replica:' || $1, 0))",
                   pq::Params().Text(replica_id_));
    if (claimed.Int(0, 0) == 0) {
      throw pq::Error("55000",
                      absl::StrCat("another rxfleet-server runs with --replica-id ", replica_id_,
                                   " on this database; give each server its own"));
    }
  }
  conn_ = std::move(conn);
}

pq::Connection& PostgresStore::Connected() {
  if (conn_ == nullptr || !conn_->healthy()) Connect();
  return *conn_;
}

absl::StatusOr<std::unique_ptr<Store>> PostgresStore::Open(const StoreOptions& options) {
  std::unique_ptr<PostgresStore> store(new PostgresStore(options));
  absl::MutexLock lock(&store->mu_);
  try {
    store->Connect();
    store->name_ = store->conn_->name();
    MigratePostgresSchema(*store->conn_, LatestPostgresSchemaVersion());
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot open the database", store->name_);
  }
  return store;
}

absl::Status PostgresStore::ClaimReplicaId(std::string_view id) {
  absl::MutexLock lock(&mu_);
  replica_id_ = std::string(id);
  try {
    Connect();  // a fresh session takes the server lock and the claim together
  } catch (const pq::Error& e) {
    replica_id_.clear();
    return pq::StatusFromPq(e, "cannot claim the replica id", name_);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PostgresStore::SchemaVersion() {
  absl::MutexLock lock(&mu_);
  try {
    return static_cast<int>(
        Connected()
            .Exec("SELECT COALESCE(MAX(version), 0)::int8 FROM schema_migrations")
            .Int(0, 0));
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot read the schema version", name_);
  }
}

absl::StatusOr<StoredState> PostgresStore::Load(size_t max_events) {
  absl::MutexLock lock(&mu_);
  StoredState state;
  try {
    pq::Connection& conn = Connected();
    // One snapshot for every table.
    pq::Transaction transaction(conn, "ISOLATION LEVEL REPEATABLE READ READ ONLY");
    state.revision = static_cast<uint64_t>(ReadMeta(conn, "revision"));
    state.bundle_version = static_cast<uint64_t>(ReadMeta(conn, "bundle_version"));
    state.last_event_version = static_cast<uint64_t>(ReadMeta(conn, "last_event_version"));
    pq::Result policies = conn.Exec("SELECT record FROM policies ORDER BY name");
    for (int i = 0; i < policies.rows(); ++i) {
      state.policies.push_back(policies.Record<v1::Policy>(i, 0, "policies"));
    }
    std::map<std::string, size_t, std::less<>> host_index;
    pq::Result hosts = conn.Exec("SELECT id, record FROM hosts ORDER BY id");
    for (int i = 0; i < hosts.rows(); ++i) {
      host_index[hosts.Text(i, 0)] = state.hosts.size();
      state.hosts.push_back({hosts.Record<v1::Host>(i, 1, "hosts"), {}});
    }
    pq::Result adapters = conn.Exec("SELECT host_id, record FROM adapters ORDER BY host_id, id");
    for (int i = 0; i < adapters.rows(); ++i) {
      auto it = host_index.find(adapters.Bytes(i, 0));
      if (it == host_index.end()) continue;  // hosts and adapters are saved together
      state.hosts[it->second].adapters.push_back(adapters.Record<v1::Adapter>(i, 1, "adapters"));
    }
    std::map<int64_t, v1::Event> by_version;
    pq::Result events = conn.Exec(
        "SELECT resource_version, record FROM events ORDER BY resource_version DESC LIMIT $1",
        pq::Params().Int(static_cast<int64_t>(max_events)));
    for (int i = 0; i < events.rows(); ++i) {
      by_version[events.Int(i, 0)] = events.Record<v1::Event>(i, 1, "events");
    }
    // Audit events are kept by age only: all of them are loaded, whatever max_events says.
    pq::Result audit = conn.Exec("SELECT resource_version, record FROM audit_events");
    for (int i = 0; i < audit.rows(); ++i) {
      by_version[audit.Int(i, 0)] = audit.Record<v1::Event>(i, 1, "audit_events");
    }
    for (auto& [version, event] : by_version) state.events.push_back(std::move(event));
    transaction.Commit();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot load the stored state", name_);
  }
  return state;
}

absl::StatusOr<ConfigState> PostgresStore::LoadConfig() {
  absl::MutexLock lock(&mu_);
  ConfigState config;
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn, "ISOLATION LEVEL REPEATABLE READ READ ONLY");
    config.revision = static_cast<uint64_t>(ReadMeta(conn, "revision"));
    config.bundle_version = static_cast<uint64_t>(ReadMeta(conn, "bundle_version"));
    pq::Result policies = conn.Exec("SELECT record FROM policies ORDER BY name");
    for (int i = 0; i < policies.rows(); ++i) {
      config.policies.push_back(policies.Record<v1::Policy>(i, 0, "policies"));
    }
    transaction.Commit();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot load the configuration", name_);
  }
  return config;
}

absl::StatusOr<PolicyWriteResult> PostgresStore::ApplyPolicy(const v1::Policy& policy,
                                                             absl::Time now) {
  const std::string& name = policy.metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("policy metadata.name must be set");
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    const int64_t revision = LockRevision(conn) + 1;
    const std::optional<v1::Policy> stored = FindPolicy(conn, name);
    const v1::Policy* current = stored.has_value() ? &*stored : nullptr;
    if (absl::Status s = store_records::CheckPolicyPrecondition(current, policy); !s.ok()) return s;
    PolicyWriteResult result;
    result.created = current == nullptr;
    const store_records::PolicyChange change = store_records::ComparePolicy(current, policy);
    if (!change.any()) {
      result.policy = *stored;
      result.bundle_version = static_cast<uint64_t>(ReadMeta(conn, "bundle_version"));
      return result;
    }
    v1::Policy out = store_records::StoredPolicy(current, policy, change, revision, now);
    conn.Exec(
        "INSERT INTO policies (name, resource_version, record) VALUES ($1, $2, $3) "
        "ON CONFLICT (name) DO UPDATE SET resource_version = excluded.resource_version, "
        "record = excluded.record",
        pq::Params().Text(name).Int(revision).Record(out));
    SetRevision(conn, revision);
    const int64_t bundle_version = BumpMeta(conn, "bundle_version");
    transaction.Commit();
    result.policy = std::move(out);
    result.changed = true;
    result.bundle_version = static_cast<uint64_t>(bundle_version);
    return result;
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot store policy ", name), name_);
  }
}

absl::StatusOr<PolicyDeleteResult> PostgresStore::DeletePolicy(std::string_view name,
                                                               std::string_view resource_version) {
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    const int64_t revision = LockRevision(conn) + 1;
    std::optional<v1::Policy> stored = FindPolicy(conn, name);
    if (!stored.has_value()) {
      return absl::NotFoundError(absl::StrCat("policy ", ToAbslView(name), " does not exist"));
    }
    if (!resource_version.empty() && stored->metadata().resource_version() != resource_version) {
      return PolicyPreconditionFailed(name, &stored->metadata().resource_version(),
                                      resource_version);
    }
    conn.Exec("DELETE FROM policies WHERE name = $1", pq::Params().Text(name));
    SetRevision(conn, revision);
    const int64_t bundle_version = BumpMeta(conn, "bundle_version");
    transaction.Commit();
    return PolicyDeleteResult{*std::move(stored), static_cast<uint64_t>(bundle_version)};
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot delete policy ", ToAbslView(name)), name_);
  }
}

absl::StatusOr<RegistrySaveResult> PostgresStore::SaveRegistry(
    absl::Span<const HostRecord> hosts, absl::Span<const v1::Event> events, size_t max_events,
    absl::Time events_min_time, absl::Span<const int64_t> local_audit_done,
    absl::Time audit_min_time) {
  std::vector<pq::Params> fleet_rows;
  std::vector<pq::Params> audit_rows;
  int64_t last_event_version = 0;
  std::vector<const v1::Event*> unversioned;  // versions assigned in the transaction
  for (const v1::Event& event : events) {
    if (event.metadata().resource_version().empty()) {
      unversioned.push_back(&event);
      continue;
    }
    int64_t version = 0;
    if (!absl::SimpleAtoi(event.metadata().resource_version(), &version)) {
      return absl::InternalError(absl::StrCat("cannot save the registry (PostgreSQL ", name_,
                                              "): event ", event.metadata().name(),
                                              " has no numeric resource version"));
    }
    (event.has_audit() ? audit_rows : fleet_rows)
        .push_back(pq::Params()
                       .Int(version)
                       .Text(event.metadata().name())
                       .Int(absl::ToUnixNanos(common::TimeFromProto(event.last_time())))
                       .Record(event));
    last_event_version = std::max(last_event_version, version);
  }
  std::vector<pq::Params> done_rows;
  for (int64_t id : local_audit_done) done_rows.push_back(pq::Params().Int(id));

  RegistrySaveResult result;
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    // Sessions first: the records' sessions are opened, or their stored sessions locked
    // (FOR UPDATE) and compared, so no other replica's session opens before this commits.
    const int64_t now_ns = absl::ToUnixNanos(absl::Now());
    std::string held_ids;  // host ids joined by newlines (host ids hold none)
    for (const HostRecord& record : hosts) {
      if (record.session_replica.empty()) continue;
      const std::string& id = record.host.metadata().name();
      if (record.open_session) {
        const pq::Result opened = conn.Exec(
            "INSERT INTO agent_sessions (host_id, replica, epoch, connect_time_ns) VALUES ($1, "
            "$2, 1, $3) ON CONFLICT (host_id) DO UPDATE SET replica = excluded.replica, epoch = "
            "agent_sessions.epoch + 1, connect_time_ns = excluded.connect_time_ns RETURNING epoch",
            pq::Params().Text(id).Text(record.session_replica).Int(now_ns));
        result.opened_sessions[id] = static_cast<uint64_t>(opened.Int(0, 0));
      } else {
        absl::StrAppend(&held_ids, held_ids.empty() ? "" : "\n", id);
      }
    }
    std::map<std::string, store_records::StoredSession, std::less<>> stored_sessions;
    if (!held_ids.empty()) {
      const pq::Result rows = conn.Exec(
          "SELECT host_id, replica, epoch FROM agent_sessions WHERE host_id = "
          "ANY(string_to_array($1, chr(10))) FOR UPDATE",
          pq::Params().Text(held_ids));
      for (int i = 0; i < rows.rows(); ++i) {
        stored_sessions[rows.Text(i, 0)] = {rows.Text(i, 1), static_cast<uint64_t>(rows.Int(i, 2))};
      }
    }
    std::vector<pq::Params> host_rows;
    std::vector<pq::Params> clear_rows;
    std::vector<pq::Params> adapter_rows;
    for (const HostRecord& record : hosts) {
      const std::string& id = record.host.metadata().name();
      if (!record.session_replica.empty() && !record.open_session) {
        auto it = stored_sessions.find(id);
        if (!store_records::SessionHolds(record,
                                         it == stored_sessions.end() ? nullptr : &it->second)) {
          result.superseded.push_back(id);
          continue;
        }
      }
      host_rows.push_back(
          pq::Params().Text(id).Record(record.host).Int(record.adapters_changed ? 1 : 0));
      if (!record.adapters_changed) continue;
      clear_rows.push_back(pq::Params().Text(id));
      for (const v1::Adapter& adapter : record.adapters) {
        adapter_rows.push_back(
            pq::Params().Text(id).Text(adapter.metadata().name()).Record(adapter));
      }
    }
    if (!unversioned.empty()) {
      // The event version row stays locked until this transaction commits, so versions commit
      // in order on every replica: a reader that has seen version N has seen all below it.
      int64_t next = conn.Exec(
                             "SELECT value FROM meta WHERE key = 'last_event_version' FOR "
                             "UPDATE")
                         .Int(0, 0);
      for (const v1::Event* event : unversioned) {
        v1::Event versioned = store_records::VersionedEvent(*event, ++next);
        (versioned.has_audit() ? audit_rows : fleet_rows)
            .push_back(pq::Params()
                           .Int(next)
                           .Text(versioned.metadata().name())
                           .Int(absl::ToUnixNanos(common::TimeFromProto(versioned.last_time())))
                           .Record(versioned));
      }
      last_event_version = std::max(last_event_version, next);
    }
    conn.ExecMany(
        "INSERT INTO hosts (id, record, write_xid, adapters_xid) VALUES ($1, $2, "
        "pg_current_xact_id(), CASE WHEN $3::int8 = 1 THEN pg_current_xact_id() ELSE '0' END) "
        "ON CONFLICT (id) DO UPDATE SET record = excluded.record, write_xid = excluded.write_xid, "
        "adapters_xid = CASE WHEN $3::int8 = 1 THEN excluded.write_xid ELSE hosts.adapters_xid "
        "END",
        host_rows);
    conn.ExecMany("DELETE FROM adapters WHERE host_id = $1", clear_rows);
    conn.ExecMany("INSERT INTO adapters (host_id, id, record) VALUES ($1, $2, $3)", adapter_rows);
    for (const auto& [table, rows] :
         {std::pair{"events", &fleet_rows}, {"audit_events", &audit_rows}}) {
      conn.ExecMany(absl::StrCat("INSERT INTO ", table,
                                 " (resource_version, name, last_time_ns, record) VALUES ($1, $2, "
                                 "$3, $4) ON CONFLICT (name) DO UPDATE SET resource_version = "
                                 "excluded.resource_version, last_time_ns = excluded.last_time_ns, "
                                 "record = excluded.record"),
                    *rows);
    }
    conn.Exec("UPDATE meta SET value = GREATEST(value, $1) WHERE key = 'last_event_version'",
              pq::Params().Int(last_event_version));
    conn.Exec(
        "DELETE FROM events WHERE resource_version <= (SELECT resource_version FROM events "
        "ORDER BY resource_version DESC LIMIT 1 OFFSET $1)",
        pq::Params().Int(static_cast<int64_t>(max_events)));
    conn.Exec("DELETE FROM events WHERE last_time_ns < $1",
              pq::Params().Int(absl::ToUnixNanos(events_min_time)));
    conn.Exec("DELETE FROM audit_events WHERE last_time_ns < $1",
              pq::Params().Int(absl::ToUnixNanos(audit_min_time)));
    conn.ExecMany("DELETE FROM local_audit WHERE id = $1", done_rows);
    transaction.Commit();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot save the registry", name_);
  }
  return result;
}

absl::Status PostgresStore::AddLocalAudit(const v1::Event& event, absl::Time now) {
  absl::MutexLock lock(&mu_);
  try {
    Connected().Exec("INSERT INTO local_audit (time_ns, record) VALUES ($1, $2)",
                     pq::Params().Int(absl::ToUnixNanos(now)).Record(event));
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot write the audit event", name_);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LocalAuditEvent>> PostgresStore::PendingLocalAudit() {
  absl::MutexLock lock(&mu_);
  std::vector<LocalAuditEvent> out;
  try {
    pq::Result rows = Connected().Exec("SELECT id, time_ns, record FROM local_audit ORDER BY id");
    for (int i = 0; i < rows.rows(); ++i) {
      out.push_back({rows.Int(i, 0), rows.Record<v1::Event>(i, 2, "local_audit"),
                     absl::FromUnixNanos(rows.Int(i, 1))});
    }
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot read the audit events of local commands", name_);
  }
  return out;
}

absl::StatusOr<uint64_t> PostgresStore::BumpBundleVersion() {
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    SetRevision(conn, LockRevision(conn) + 1);
    const int64_t bundle_version = BumpMeta(conn, "bundle_version");
    transaction.Commit();
    return static_cast<uint64_t>(bundle_version);
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot bump the bundle version", name_);
  }
}

}  // namespace rxfleet::server
