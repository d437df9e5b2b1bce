#pragma once

// Experiments and hold tunings are stored alike in PostgreSQL (as in SQLite,
// sqlite_named_records.h): one row per name (name, create_time_ns, end_time_ns, record), a
// status replaced as a whole under a lease fence, deletion together with the metric windows
// stored under the name, and every write taking the revision lock and setting the new revision
// (which sends the change-feed wake-up). These are the shared steps; the callers hold the
// store's mutex and pass its connection. Internal to the PostgreSQL store
// (postgres_store_experiments.cc, postgres_store_tunings.cc).

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"
#include "server/store/store.h"

namespace rxfleet::server::postgres_named {

/// One table of named resources.
struct Table {
  const char* table;        ///< e.g. "experiments"
  const char* kind;         ///< in messages, e.g. "experiment"
  const char* exists_hint;  ///< appended to the AlreadyExists message ("" for none)
};

inline pq::Params RowOf(const v1::Experiment& experiment) {
  return postgres::ExperimentRow(experiment);
}
inline pq::Params RowOf(const v1::HoldTuning& tuning) { return postgres::TuningRow(tuning); }

template <typename Resource>
std::optional<Resource> Find(pq::Connection& conn, const Table& t, std::string_view name) {
  pq::Result row = conn.Exec(absl::StrCat("SELECT record FROM ", t.table, " WHERE name = $1"),
                             pq::Params().Text(name));
  if (row.rows() == 0) return std::nullopt;
  return row.Record<Resource>(0, 0, t.table);
}

template <typename Resource>
void Upsert(pq::Connection& conn, const Table& t, const Resource& resource) {
  conn.Exec(absl::StrCat("INSERT INTO ", t.table,
                         " (name, create_time_ns, end_time_ns, record) VALUES ($1, $2, $3::int8, "
                         "$4) ON CONFLICT (name) DO UPDATE SET end_time_ns = "
                         "excluded.end_time_ns, record = excluded.record"),
            RowOf(resource));
}

/// Store::CreateExperiment / CreateTuning: `stamp(requested, revision, now)` makes the stored
/// form (store_records::NewExperiment, NewTuning). `connect` returns the store's connection
/// (reconnecting if needed); `database` names it in messages.
template <typename Resource, typename Connect, typename Stamp>
absl::StatusOr<Resource> Create(Connect connect, std::string_view database, const Table& t,
                                const Resource& requested, absl::Time now, Stamp stamp) {
  const std::string& name = requested.metadata().name();
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(t.kind, " metadata.name must be set"));
  }
  try {
    pq::Connection& conn = connect();
    pq::Transaction transaction(conn);
    const int64_t revision = postgres::LockRevision(conn) + 1;
    if (Find<Resource>(conn, t, name).has_value()) {
      return absl::AlreadyExistsError(
          absl::StrCat(t.kind, " ", name, " already exists", t.exists_hint));
    }
    const Resource out = stamp(requested, revision, now);
    Upsert(conn, t, out);
    postgres::SetRevision(conn, revision);
    transaction.Commit();
    return out;
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot store ", t.kind, " ", name), database);
  }
}

/// Store::UpdateExperimentStatus / UpdateTuningStatus.
template <typename Resource, typename Connect, typename Status>
absl::StatusOr<Resource> UpdateStatus(Connect connect, std::string_view database, const Table& t,
                                      std::string_view name, const Status& status, absl::Time now,
                                      const LeaseFence* fence) {
  try {
    pq::Connection& conn = connect();
    pq::Transaction transaction(conn);
    if (absl::Status s = postgres::CheckFence(conn, fence); !s.ok()) return s;
    const int64_t revision = postgres::LockRevision(conn) + 1;
    std::optional<Resource> stored = Find<Resource>(conn, t, name);
    if (!stored.has_value()) {
      return absl::NotFoundError(
          absl::StrCat(t.kind, " ", common::ToAbslView(name), " does not exist"));
    }
    *stored->mutable_status() = status;
    stored->mutable_metadata()->set_resource_version(absl::StrCat(revision));
    *stored->mutable_metadata()->mutable_update_time() = common::TimeToProto(now);
    Upsert(conn, t, *stored);
    postgres::SetRevision(conn, revision);
    transaction.Commit();
    return *std::move(stored);
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(
        e, absl::StrCat("cannot update ", t.kind, " ", common::ToAbslView(name)), database);
  }
}

/// Store::DeleteExperiment / DeleteTuning: the row and the windows stored under its name.
template <typename Connect>
absl::Status Delete(Connect connect, std::string_view database, const Table& t,
                    std::string_view name) {
  try {
    pq::Connection& conn = connect();
    pq::Transaction transaction(conn);
    const int64_t revision = postgres::LockRevision(conn) + 1;
    if (conn.Exec(absl::StrCat("DELETE FROM ", t.table, " WHERE name = $1"),
                  pq::Params().Text(name))
            .affected() == 0) {
      return absl::NotFoundError(
          absl::StrCat(t.kind, " ", common::ToAbslView(name), " does not exist"));
    }
    conn.Exec("DELETE FROM metric_windows WHERE experiment = $1", pq::Params().Text(name));
    postgres::SetRevision(conn, revision);
    transaction.Commit();
    return absl::OkStatus();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(
        e, absl::StrCat("cannot delete ", t.kind, " ", common::ToAbslView(name)), database);
  }
}

/// Store::LoadExperiments / LoadTunings: by create time, then name.
template <typename Resource, typename Connect>
absl::StatusOr<std::vector<Resource>> LoadAll(Connect connect, std::string_view database,
                                              const Table& t, std::string_view what) {
  std::vector<Resource> out;
  try {
    pq::Result rows = connect().Exec(
        absl::StrCat("SELECT record FROM ", t.table, " ORDER BY create_time_ns, name"));
    for (int i = 0; i < rows.rows(); ++i) out.push_back(rows.Record<Resource>(i, 0, t.table));
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot load ", common::ToAbslView(what)), database);
  }
  return out;
}

}  // namespace rxfleet::server::postgres_named
