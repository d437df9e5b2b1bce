// The SQLite store (server/store/sqlite_store.h): ImportSnapshot, a copy of another database
// written verbatim into an empty file.

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/store/records.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {

absl::Status SqliteStore::ImportSnapshot(const StoreSnapshot& snapshot) {
  absl::StatusOr<store_records::SnapshotVersions> versions = store_records::CheckSnapshot(snapshot);
  if (!versions.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot import into the database (", path_,
                                                   "): ", versions.status().message()));
  }
  const StoredState& state = snapshot.state;
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    std::vector<int64_t> counts;
    for (const char* table : store_records::kImportedTables) {
      counts.push_back(db.execAndGet(absl::StrCat("SELECT count(*) FROM ", table)).getInt64());
    }
    if (absl::Status s = store_records::CheckImportTarget(path_, counts, ReadMeta(db, "revision"),
                                                          ReadMeta(db, "last_event_version"));
        !s.ok()) {
      return s;
    }
    std::string buffer;
    SQLite::Statement policy(
        db, "INSERT INTO policies (name, resource_version, record) VALUES (?, ?, ?)");
    for (size_t i = 0; i < state.policies.size(); ++i) {
      policy.bind(1, state.policies[i].metadata().name());
      policy.bind(2, versions->policies[i]);
      BindRecord(policy, 3, state.policies[i], &buffer);
      policy.exec();
      policy.reset();
    }
    SQLite::Statement host(db, "INSERT INTO hosts (id, record) VALUES (?, ?)");
    SQLite::Statement adapter(db, "INSERT INTO adapters (host_id, id, record) VALUES (?, ?, ?)");
    for (const HostRecord& record : state.hosts) {
      const std::string& id = record.host.metadata().name();
      host.bind(1, id);
      BindRecord(host, 2, record.host, &buffer);
      host.exec();
      host.reset();
      for (const v1::Adapter& a : record.adapters) {
        adapter.bind(1, id);
        adapter.bind(2, a.metadata().name());
        BindRecord(adapter, 3, a, &buffer);
        adapter.exec();
        adapter.reset();
      }
    }
    const auto insert_event = [&db](const char* table) {
      return SQLite::Statement(db, absl::StrCat("INSERT INTO ", table,
                                                " (resource_version, name, last_time_ns, record) "
                                                "VALUES (?, ?, ?, ?)"));
    };
    SQLite::Statement fleet_event = insert_event("events");
    SQLite::Statement audit_event = insert_event("audit_events");
    for (size_t i = 0; i < state.events.size(); ++i) {
      const v1::Event& event = state.events[i];
      SQLite::Statement& insert = event.has_audit() ? audit_event : fleet_event;
      insert.bind(1, versions->events[i]);
      insert.bind(2, event.metadata().name());
      insert.bind(3, absl::ToUnixNanos(common::TimeFromProto(event.last_time())));
      BindRecord(insert, 4, event, &buffer);
      insert.exec();
      insert.reset();
    }
    SQLite::Statement experiment(db,
                                 "INSERT INTO experiments (name, create_time_ns, end_time_ns, "
                                 "record) VALUES (?, ?, ?, ?)");
    for (const v1::Experiment& e : snapshot.experiments) {
      experiment.bind(1, e.metadata().name());
      experiment.bind(2, absl::ToUnixNanos(common::TimeFromProto(e.metadata().create_time())));
      if (e.status().has_end_time()) {
        experiment.bind(3, absl::ToUnixNanos(common::TimeFromProto(e.status().end_time())));
      } else {
        experiment.bind(3);
      }
      BindRecord(experiment, 4, e, &buffer);
      experiment.exec();
      experiment.reset();
    }
    SQLite::Statement tuning(db,
                             "INSERT INTO tunings (name, create_time_ns, end_time_ns, record) "
                             "VALUES (?, ?, ?, ?)");
    for (const v1::HoldTuning& t : snapshot.tunings) {
      tuning.bind(1, t.metadata().name());
      tuning.bind(2, absl::ToUnixNanos(common::TimeFromProto(t.metadata().create_time())));
      if (t.status().has_end_time()) {
        tuning.bind(3, absl::ToUnixNanos(common::TimeFromProto(t.status().end_time())));
      } else {
        tuning.bind(3);
      }
      BindRecord(tuning, 4, t, &buffer);
      tuning.exec();
      tuning.reset();
    }
    // Row ids grow in insertion order: the arrival order of the windows is kept.
    SQLite::Statement window(db,
                             "INSERT INTO metric_windows (experiment, host_id, valid, "
                             "segment_count, segment, record) VALUES (?, ?, ?, ?, ?, ?)");
    for (const StoredWindow& w : snapshot.windows) {
      window.bind(1, w.experiment);
      window.bind(2, w.host_id);
      window.bind(3, w.window.valid() ? 1 : 0);
      window.bind(4, static_cast<int64_t>(w.segment.size()));
      window.bind(5, store_records::JoinSegment(w.segment));
      BindRecord(window, 6, w.window, &buffer);
      window.exec();
      window.reset();
    }
    SQLite::Statement local(db, "INSERT INTO local_audit (id, time_ns, record) VALUES (?, ?, ?)");
    for (const LocalAuditEvent& l : snapshot.local_audit) {
      local.bind(1, l.id);
      local.bind(2, absl::ToUnixNanos(l.time));
      BindRecord(local, 3, l.event, &buffer);
      local.exec();
      local.reset();
    }
    SQLite::Statement token(db,
                            "INSERT INTO tokens (name, role, hash, create_time_us, created_by) "
                            "VALUES (?, ?, ?, ?, ?)");
    for (const StoredToken& t : snapshot.tokens) {
      token.bind(1, t.record.name);
      token.bind(2, std::string(RoleName(t.record.role)));
      token.bind(3, t.hash.data(), static_cast<int>(t.hash.size()));
      token.bind(4, absl::ToUnixMicros(t.record.create_time));
      token.bind(5, t.record.created_by);
      token.exec();
      token.reset();
    }
    WriteMeta(db, "bundle_version", static_cast<int64_t>(state.bundle_version));
    WriteMeta(db, "last_event_version", versions->last_event_version);
    WriteMeta(db, "revision", versions->revision);
    transaction.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot import into the database", path_);
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
