// The PostgreSQL store (server/store/postgres_store.h): ImportSnapshot, a copy of another
// database written verbatim into an empty one (`rxfleet-server migrate-store`).

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/store/postgres_store.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"
#include "server/store/records.h"

namespace rxfleet::server {

absl::Status PostgresStore::ImportSnapshot(const StoreSnapshot& snapshot) {
  absl::StatusOr<store_records::SnapshotVersions> versions = store_records::CheckSnapshot(snapshot);
  if (!versions.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot import into the database (PostgreSQL ",
                                                   name_, "): ", versions.status().message()));
  }
  const StoredState& state = snapshot.state;
  std::vector<pq::Params> policy_rows;
  for (size_t i = 0; i < state.policies.size(); ++i) {
    const v1::Policy& policy = state.policies[i];
    policy_rows.push_back(
        pq::Params().Text(policy.metadata().name()).Int(versions->policies[i]).Record(policy));
  }
  std::vector<pq::Params> host_rows;
  std::vector<pq::Params> adapter_rows;
  for (const HostRecord& record : state.hosts) {
    const std::string& id = record.host.metadata().name();
    host_rows.push_back(pq::Params().Text(id).Record(record.host));
    for (const v1::Adapter& adapter : record.adapters) {
      adapter_rows.push_back(pq::Params().Text(id).Text(adapter.metadata().name()).Record(adapter));
    }
  }
  std::vector<pq::Params> fleet_rows;
  std::vector<pq::Params> audit_rows;
  for (size_t i = 0; i < state.events.size(); ++i) {
    const v1::Event& event = state.events[i];
    (event.has_audit() ? audit_rows : fleet_rows)
        .push_back(pq::Params()
                       .Int(versions->events[i])
                       .Text(event.metadata().name())
                       .Int(absl::ToUnixNanos(common::TimeFromProto(event.last_time())))
                       .Record(event));
  }
  std::vector<pq::Params> experiment_rows;
  for (const v1::Experiment& experiment : snapshot.experiments) {
    experiment_rows.push_back(postgres::ExperimentRow(experiment));
  }
  std::vector<pq::Params> tuning_rows;
  for (const v1::HoldTuning& tuning : snapshot.tunings) {
    tuning_rows.push_back(postgres::TuningRow(tuning));
  }
  std::vector<pq::Params> window_rows;
  window_rows.reserve(snapshot.windows.size());
  for (const StoredWindow& w : snapshot.windows) {
    window_rows.push_back(pq::Params()
                              .Text(w.experiment)
                              .Text(w.host_id)
                              .Int(w.window.valid() ? 1 : 0)
                              .Int(static_cast<int64_t>(w.segment.size()))
                              .Text(store_records::JoinSegment(w.segment))
                              .Record(w.window));
  }
  std::vector<pq::Params> local_audit_rows;
  int64_t last_local_audit_id = 0;
  for (const LocalAuditEvent& local : snapshot.local_audit) {
    local_audit_rows.push_back(
        pq::Params().Int(local.id).Int(absl::ToUnixNanos(local.time)).Record(local.event));
    last_local_audit_id = std::max(last_local_audit_id, local.id);
  }
  std::vector<pq::Params> token_rows;
  for (const StoredToken& token : snapshot.tokens) {
    token_rows.push_back(pq::Params()
                             .Text(token.record.name)
                             .Text(RoleName(token.record.role))
                             .Bytes(token.hash)
                             .Int(absl::ToUnixMicros(token.record.create_time))
                             .Text(token.record.created_by));
  }

  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    // The revision lock first, as every configuration writer takes it: no other write
    // commits between the emptiness check and the import. The other tables are locked
    // against writers that do not take it (registry, windows, tokens, local audit).
    const int64_t revision = postgres::LockRevision(conn);
    std::string tables;
    for (const char* table : store_records::kImportedTables) {
      absl::StrAppend(&tables, tables.empty() ? "" : ", ", table);
    }
    conn.Exec(absl::StrCat("LOCK TABLE ", tables, " IN SHARE ROW EXCLUSIVE MODE"));
    std::vector<int64_t> counts;
    for (const char* table : store_records::kImportedTables) {
      counts.push_back(conn.Exec(absl::StrCat("SELECT count(*) FROM ", table)).Int(0, 0));
    }
    const int64_t last_event_version =
        conn.Exec("SELECT value FROM meta WHERE key = 'last_event_version'").Int(0, 0);
    if (absl::Status s =
            store_records::CheckImportTarget(name_, counts, revision, last_event_version);
        !s.ok()) {
      return s;
    }
    conn.ExecMany("INSERT INTO policies (name, resource_version, record) VALUES ($1, $2, $3)",
                  policy_rows);
    conn.ExecMany("INSERT INTO hosts (id, record) VALUES ($1, $2)", host_rows);
    conn.ExecMany("INSERT INTO adapters (host_id, id, record) VALUES ($1, $2, $3)", adapter_rows);
    for (const auto& [table, rows] :
         {std::pair{"events", &fleet_rows}, {"audit_events", &audit_rows}}) {
      conn.ExecMany(absl::StrCat("INSERT INTO ", table,
                                 " (resource_version, name, last_time_ns, record) VALUES ($1, $2, "
                                 "$3, $4)"),
                    *rows);
    }
    conn.ExecMany(
        "INSERT INTO experiments (name, create_time_ns, end_time_ns, record) "
        "VALUES ($1, $2, $3::int8, $4)",
        experiment_rows);
    conn.ExecMany(
        "INSERT INTO tunings (name, create_time_ns, end_time_ns, record) "
        "VALUES ($1, $2, $3::int8, $4)",
        tuning_rows);
    // Ids are assigned in the order sent: the arrival order of the windows is kept.
    conn.ExecMany(
        "INSERT INTO metric_windows (experiment, host_id, valid, segment_count, segment, record) "
        "VALUES ($1, $2, $3 <> 0, $4, $5, $6)",
        window_rows);
    conn.ExecMany(
        "INSERT INTO local_audit (id, time_ns, record) OVERRIDING SYSTEM VALUE "
        "VALUES ($1, $2, $3)",
        local_audit_rows);
    if (last_local_audit_id > 0) {
      conn.Exec("SELECT setval(pg_get_serial_sequence('local_audit', 'id'), $1)",
                pq::Params().Int(last_local_audit_id));
    }
    conn.ExecMany(
        "INSERT INTO tokens (name, role, hash, create_time_us, created_by) "
        "VALUES ($1, $2, $3, $4, $5)",
        token_rows);
    conn.Exec("UPDATE meta SET value = $1 WHERE key = 'bundle_version'",
              pq::Params().Int(static_cast<int64_t>(state.bundle_version)));
    conn.Exec("UPDATE meta SET value = $1 WHERE key = 'last_event_version'",
              pq::Params().Int(versions->last_event_version));
    postgres::SetRevision(conn, versions->revision);
    transaction.Commit();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot import into the database", name_);
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
