#include "server/store/sqlite_store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/records.h"
#include "server/store/schema.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

// Reads a policy row; nullopt if there is none.
std::optional<v1::Policy> FindPolicy(SQLite::Database& db, std::string_view name) {
  SQLite::Statement query(db, "SELECT record FROM policies WHERE name = ?");
  query.bind(1, std::string(name));
  if (!query.executeStep()) return std::nullopt;
  return ParseRecord<v1::Policy>(query.getColumn(0), "policies");
}

}  // namespace

int SqliteStore::LatestSchemaVersion() const { return server::LatestSchemaVersion(); }

SqliteStore::SqliteStore(std::string path) : path_(std::move(path)) {}
SqliteStore::~SqliteStore() = default;

absl::StatusOr<std::unique_ptr<Store>> SqliteStore::Open(const StoreOptions& options) {
  const std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    if (std::filesystem::create_directories(parent, ec)) {
      std::filesystem::permissions(parent, std::filesystem::perms(0750),
                                   std::filesystem::perm_options::replace, ec);
    } else if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create the database directory ",
                                                        parent.string(), ": ", ec.message()));
    }
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(options.path));
  absl::MutexLock lock(&store->mu_);
  try {
    store->db_ = std::make_unique<SQLite::Database>(
        options.path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_FULLMUTEX,
        static_cast<int>(absl::ToInt64Milliseconds(options.busy_timeout)));
    SQLite::Database& db = *store->db_;
    // journal_mode returns the mode actually set; WAL is refused on some filesystems.
    const std::string mode = db.execAndGet("PRAGMA journal_mode=WAL").getString();
    if (mode != "wal") {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", options.path, ": cannot use the WAL journal (SQLite chose '", mode, "')"));
    }
    db.exec("PRAGMA synchronous=FULL");
    if (options.max_size_bytes > 0) {
      const int64_t page_size = db.execAndGet("PRAGMA page_size").getInt64();
      const uint64_t pages =
          std::max<uint64_t>(1, options.max_size_bytes / static_cast<uint64_t>(page_size));
      db.exec(absl::StrCat("PRAGMA max_page_count=", pages));
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot open the database", options.path);
  }
  if (absl::Status s = MigrateSchema(*store->db_, store->path_); !s.ok()) return s;
  return store;
}

absl::StatusOr<int> SqliteStore::SchemaVersion() {
  absl::MutexLock lock(&mu_);
  try {
    return db_->execAndGet("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").getInt();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the schema version", path_);
  }
}

absl::StatusOr<StoredState> SqliteStore::Load(size_t max_events) {
  absl::MutexLock lock(&mu_);
  StoredState state;
  try {
    SQLite::Database& db = *db_;
    // One read transaction for a consistent snapshot.
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::DEFERRED);
    state.revision = static_cast<uint64_t>(ReadMeta(db, "revision"));
    state.bundle_version = static_cast<uint64_t>(ReadMeta(db, "bundle_version"));
    state.last_event_version = static_cast<uint64_t>(ReadMeta(db, "last_event_version"));
    SQLite::Statement policies(db, "SELECT record FROM policies ORDER BY name");
    while (policies.executeStep()) {
      state.policies.push_back(ParseRecord<v1::Policy>(policies.getColumn(0), "policies"));
    }
    std::map<std::string, size_t> host_index;
    SQLite::Statement hosts(db, "SELECT id, record FROM hosts ORDER BY id");
    while (hosts.executeStep()) {
      host_index[hosts.getColumn(0).getString()] = state.hosts.size();
      state.hosts.push_back({ParseRecord<v1::Host>(hosts.getColumn(1), "hosts"), {}});
    }
    SQLite::Statement adapters(db, "SELECT host_id, record FROM adapters ORDER BY host_id, id");
    while (adapters.executeStep()) {
      auto it = host_index.find(adapters.getColumn(0).getString());
      if (it == host_index.end()) continue;  // cannot happen: hosts and adapters are saved together
      state.hosts[it->second].adapters.push_back(
          ParseRecord<v1::Adapter>(adapters.getColumn(1), "adapters"));
    }
    SQLite::Statement events(
        db,
        "SELECT resource_version, record FROM events ORDER BY resource_version DESC "
        "LIMIT ?");
    events.bind(1, static_cast<int64_t>(max_events));
    std::map<int64_t, v1::Event> by_version;
    while (events.executeStep()) {
      by_version[events.getColumn(0).getInt64()] =
          ParseRecord<v1::Event>(events.getColumn(1), "events");
    }
    // Audit events are kept by age only: all of them are loaded, whatever max_events says.
    SQLite::Statement audit(db, "SELECT resource_version, record FROM audit_events");
    while (audit.executeStep()) {
      by_version[audit.getColumn(0).getInt64()] =
          ParseRecord<v1::Event>(audit.getColumn(1), "audit_events");
    }
    for (auto& [version, event] : by_version) state.events.push_back(std::move(event));
    transaction.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot load the stored state", path_);
  }
  return state;
}

absl::StatusOr<HostChanges> SqliteStore::LoadHostChanges(uint64_t cursor) {
  absl::MutexLock lock(&mu_);
  HostChanges changes;
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::DEFERRED);
    const auto from = static_cast<int64_t>(std::min<uint64_t>(cursor, INT64_MAX));
    changes.cursor = static_cast<uint64_t>(ReadMeta(db, "registry_seq")) + 1;
    std::map<std::string, size_t, std::less<>> host_index;
    SQLite::Statement hosts(db,
                            "SELECT h.id, h.record, h.adapters_seq >= ?1, s.replica, s.epoch "
                            "FROM hosts h LEFT JOIN agent_sessions s ON s.host_id = h.id "
                            "WHERE h.write_seq >= ?1 ORDER BY h.id");
    hosts.bind(1, from);
    while (hosts.executeStep()) {
      HostRecord record;
      record.host = ParseRecord<v1::Host>(hosts.getColumn(1), "hosts");
      record.adapters_changed = hosts.getColumn(2).getInt() != 0;
      if (!hosts.getColumn(3).isNull()) {
        record.session_replica = hosts.getColumn(3).getString();
        record.session_epoch = static_cast<uint64_t>(hosts.getColumn(4).getInt64());
      }
      if (record.adapters_changed)
        host_index[hosts.getColumn(0).getString()] = changes.hosts.size();
      changes.hosts.push_back(std::move(record));
    }
    SQLite::Statement adapters(db,
                               "SELECT a.host_id, a.record FROM adapters a JOIN hosts h ON h.id = "
                               "a.host_id WHERE h.write_seq >= ?1 AND h.adapters_seq >= ?1 "
                               "ORDER BY a.host_id, a.id");
    adapters.bind(1, from);
    while (adapters.executeStep()) {
      auto it = host_index.find(adapters.getColumn(0).getString());
      if (it == host_index.end()) continue;
      changes.hosts[it->second].adapters.push_back(
          ParseRecord<v1::Adapter>(adapters.getColumn(1), "adapters"));
    }
    transaction.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot load the changed hosts", path_);
  }
  changes.cursor = std::max(changes.cursor, cursor);
  return changes;
}

absl::StatusOr<std::vector<v1::Event>> SqliteStore::LoadEventsAfter(uint64_t version,
                                                                    size_t limit) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Event> out;
  try {
    SQLite::Statement query(*db_,
                            "SELECT resource_version, record FROM (SELECT resource_version, "
                            "record FROM events WHERE resource_version > ?1 UNION ALL SELECT "
                            "resource_version, record FROM audit_events WHERE resource_version "
                            "> ?1) ORDER BY resource_version LIMIT ?2");
    query.bind(1, static_cast<int64_t>(std::min<uint64_t>(version, INT64_MAX)));
    query.bind(2, static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX)));
    while (query.executeStep()) {
      out.push_back(ParseRecord<v1::Event>(query.getColumn(1), "events"));
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the events", path_);
  }
  return out;
}

absl::StatusOr<ConfigState> SqliteStore::LoadConfig() {
  absl::MutexLock lock(&mu_);
  ConfigState config;
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::DEFERRED);
    config.revision = static_cast<uint64_t>(ReadMeta(db, "revision"));
    config.bundle_version = static_cast<uint64_t>(ReadMeta(db, "bundle_version"));
    SQLite::Statement policies(db, "SELECT record FROM policies ORDER BY name");
    while (policies.executeStep()) {
      config.policies.push_back(ParseRecord<v1::Policy>(policies.getColumn(0), "policies"));
    }
    transaction.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot load the configuration", path_);
  }
  return config;
}

absl::StatusOr<PolicyWriteResult> SqliteStore::ApplyPolicy(const v1::Policy& policy,
                                                           absl::Time now) {
  const std::string& name = policy.metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("policy metadata.name must be set");
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    const std::optional<v1::Policy> stored = FindPolicy(db, name);
    const v1::Policy* current = stored.has_value() ? &*stored : nullptr;
    if (absl::Status s = store_records::CheckPolicyPrecondition(current, policy); !s.ok()) return s;
    PolicyWriteResult result;
    result.created = current == nullptr;
    const store_records::PolicyChange change = store_records::ComparePolicy(current, policy);
    if (!change.any()) {
      result.policy = *stored;
      result.bundle_version = static_cast<uint64_t>(ReadMeta(db, "bundle_version"));
      return result;
    }
    const int64_t revision = ReadMeta(db, "revision") + 1;
    const int64_t bundle_version = ReadMeta(db, "bundle_version") + 1;
    v1::Policy out = store_records::StoredPolicy(current, policy, change, revision, now);

    std::string buffer;
    SQLite::Statement upsert(db,
                             "INSERT INTO policies (name, resource_version, record) VALUES "
                             "(?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                             "resource_version = excluded.resource_version, "
                             "record = excluded.record");
    upsert.bind(1, name);
    upsert.bind(2, revision);
    BindRecord(upsert, 3, out, &buffer);
    upsert.exec();
    WriteMeta(db, "revision", revision);
    WriteMeta(db, "bundle_version", bundle_version);
    transaction.commit();
    result.policy = std::move(out);
    result.changed = true;
    result.bundle_version = static_cast<uint64_t>(bundle_version);
    return result;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot store policy ", name), path_);
  }
}

absl::StatusOr<PolicyDeleteResult> SqliteStore::DeletePolicy(std::string_view name,
                                                             std::string_view resource_version) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    std::optional<v1::Policy> stored = FindPolicy(db, name);
    if (!stored.has_value()) {
      return absl::NotFoundError(absl::StrCat("policy ", ToAbslView(name), " does not exist"));
    }
    if (!resource_version.empty() && stored->metadata().resource_version() != resource_version) {
      return PolicyPreconditionFailed(name, &stored->metadata().resource_version(),
                                      resource_version);
    }
    SQLite::Statement remove(db, "DELETE FROM policies WHERE name = ?");
    remove.bind(1, std::string(name));
    remove.exec();
    const int64_t revision = ReadMeta(db, "revision") + 1;
    const int64_t bundle_version = ReadMeta(db, "bundle_version") + 1;
    WriteMeta(db, "revision", revision);
    WriteMeta(db, "bundle_version", bundle_version);
    transaction.commit();
    return PolicyDeleteResult{*std::move(stored), static_cast<uint64_t>(bundle_version)};
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot delete policy ", ToAbslView(name)), path_);
  }
}

absl::StatusOr<RegistrySaveResult> SqliteStore::SaveRegistry(
    absl::Span<const HostRecord> hosts, absl::Span<const v1::Event> events, size_t max_events,
    absl::Time events_min_time, absl::Span<const int64_t> local_audit_done,
    absl::Time audit_min_time) {
  RegistrySaveResult result;
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    std::string buffer;
    // Every save that writes hosts takes the next registry sequence number (LoadHostChanges).
    const int64_t seq = hosts.empty() ? 0 : ReadMeta(db, "registry_seq") + 1;
    if (!hosts.empty()) WriteMeta(db, "registry_seq", seq);
    SQLite::Statement upsert_host(
        db,
        "INSERT INTO hosts (id, record, write_seq, adapters_seq) VALUES (?1, ?2, ?3, "
        "CASE WHEN ?4 THEN ?3 ELSE 0 END) ON CONFLICT (id) DO UPDATE SET record = "
        "excluded.record, write_seq = excluded.write_seq, adapters_seq = CASE WHEN ?4 THEN "
        "excluded.write_seq ELSE adapters_seq END");
    SQLite::Statement clear_adapters(db, "DELETE FROM adapters WHERE host_id = ?");
    SQLite::Statement insert_adapter(db,
                                     "INSERT INTO adapters (host_id, id, record) VALUES (?, ?, ?)");
    SQLite::Statement open_session(
        db,
        "INSERT INTO agent_sessions (host_id, replica, epoch, connect_time_ns) VALUES (?, ?, 1, "
        "?) ON CONFLICT (host_id) DO UPDATE SET replica = excluded.replica, epoch = epoch + 1, "
        "connect_time_ns = excluded.connect_time_ns RETURNING epoch");
    SQLite::Statement find_session(db,
                                   "SELECT replica, epoch FROM agent_sessions WHERE host_id = ?");
    const int64_t now_ns = absl::ToUnixNanos(absl::Now());
    for (const HostRecord& record : hosts) {
      const std::string& id = record.host.metadata().name();
      if (record.open_session && !record.session_replica.empty()) {
        open_session.bind(1, id);
        open_session.bind(2, record.session_replica);
        open_session.bind(3, now_ns);
        if (!open_session.executeStep()) {
          throw SQLite::Exception("opening an agent session returned nothing", SQLITE_INTERNAL);
        }
        result.opened_sessions[id] = static_cast<uint64_t>(open_session.getColumn(0).getInt64());
        while (open_session.executeStep()) {
        }
        open_session.reset();
      } else if (!record.session_replica.empty()) {
        find_session.bind(1, id);
        std::optional<store_records::StoredSession> stored;
        if (find_session.executeStep()) {
          stored = store_records::StoredSession{
              find_session.getColumn(0).getString(),
              static_cast<uint64_t>(find_session.getColumn(1).getInt64())};
        }
        find_session.reset();
        if (!store_records::SessionHolds(record, stored.has_value() ? &*stored : nullptr)) {
          result.superseded.push_back(id);
          continue;
        }
      }
      upsert_host.bind(1, id);
      BindRecord(upsert_host, 2, record.host, &buffer);
      upsert_host.bind(3, seq);
      upsert_host.bind(4, record.adapters_changed ? 1 : 0);
      upsert_host.exec();
      upsert_host.reset();
      if (!record.adapters_changed) continue;
      clear_adapters.bind(1, id);
      clear_adapters.exec();
      clear_adapters.reset();
      for (const v1::Adapter& adapter : record.adapters) {
        insert_adapter.bind(1, id);
        insert_adapter.bind(2, adapter.metadata().name());
        BindRecord(insert_adapter, 3, adapter, &buffer);
        insert_adapter.exec();
        insert_adapter.reset();
      }
    }
    auto upsert_into = [&db](const char* table) {
      return SQLite::Statement(
          db, absl::StrCat("INSERT INTO ", table,
                           " (resource_version, name, last_time_ns, record) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (name) DO UPDATE SET resource_version = "
                           "excluded.resource_version, last_time_ns = excluded.last_time_ns, "
                           "record = excluded.record"));
    };
    SQLite::Statement upsert_fleet_event = upsert_into("events");
    SQLite::Statement upsert_audit_event = upsert_into("audit_events");
    int64_t last_event_version = ReadMeta(db, "last_event_version");
    std::optional<v1::Event> assigned;
    for (const v1::Event& given : events) {
      int64_t version = 0;
      const v1::Event* event_ptr = &given;
      if (given.metadata().resource_version().empty()) {
        // The store assigns the next version (writes are serial here).
        version = last_event_version + 1;
        assigned = store_records::VersionedEvent(given, version);
        event_ptr = &*assigned;
      } else if (!absl::SimpleAtoi(given.metadata().resource_version(), &version)) {
        throw SQLite::Exception(
            absl::StrCat("event ", given.metadata().name(), " has no numeric resource version"),
            SQLITE_MISUSE);
      }
      const v1::Event& event = *event_ptr;
      SQLite::Statement& upsert_event = event.has_audit() ? upsert_audit_event : upsert_fleet_event;
      upsert_event.bind(1, version);
      upsert_event.bind(2, event.metadata().name());
      upsert_event.bind(3, absl::ToUnixNanos(common::TimeFromProto(event.last_time())));
      BindRecord(upsert_event, 4, event, &buffer);
      upsert_event.exec();
      upsert_event.reset();
      last_event_version = std::max(last_event_version, version);
    }
    WriteMeta(db, "last_event_version", last_event_version);
    SQLite::Statement prune_count(
        db,
        "DELETE FROM events WHERE resource_version <= (SELECT resource_version FROM events "
        "ORDER BY resource_version DESC LIMIT 1 OFFSET ?)");
    prune_count.bind(1, static_cast<int64_t>(max_events));
    prune_count.exec();
    SQLite::Statement prune_age(db, "DELETE FROM events WHERE last_time_ns < ?");
    prune_age.bind(1, absl::ToUnixNanos(events_min_time));
    prune_age.exec();
    SQLite::Statement prune_audit(db, "DELETE FROM audit_events WHERE last_time_ns < ?");
    prune_audit.bind(1, absl::ToUnixNanos(audit_min_time));
    prune_audit.exec();
    SQLite::Statement done(db, "DELETE FROM local_audit WHERE id = ?");
    for (int64_t id : local_audit_done) {
      done.bind(1, id);
      done.exec();
      done.reset();
    }
    transaction.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot save the registry", path_);
  }
  return result;
}

absl::Status SqliteStore::AddLocalAudit(const v1::Event& event, absl::Time now) {
  absl::MutexLock lock(&mu_);
  try {
    std::string buffer;
    SQLite::Statement insert(*db_, "INSERT INTO local_audit (time_ns, record) VALUES (?, ?)");
    insert.bind(1, absl::ToUnixNanos(now));
    BindRecord(insert, 2, event, &buffer);
    insert.exec();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot write the audit event", path_);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LocalAuditEvent>> SqliteStore::PendingLocalAudit() {
  absl::MutexLock lock(&mu_);
  std::vector<LocalAuditEvent> out;
  try {
    SQLite::Statement query(*db_, "SELECT id, time_ns, record FROM local_audit ORDER BY id");
    while (query.executeStep()) {
      out.push_back({query.getColumn(0).getInt64(),
                     ParseRecord<v1::Event>(query.getColumn(2), "local_audit"),
                     absl::FromUnixNanos(query.getColumn(1).getInt64())});
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the audit events of local commands", path_);
  }
  return out;
}

absl::StatusOr<uint64_t> SqliteStore::BumpBundleVersion() {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    WriteMeta(db, "revision", ReadMeta(db, "revision") + 1);
    const int64_t bundle_version = ReadMeta(db, "bundle_version") + 1;
    WriteMeta(db, "bundle_version", bundle_version);
    transaction.commit();
    return static_cast<uint64_t>(bundle_version);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot bump the bundle version", path_);
  }
}

}  // namespace rxfleet::server
