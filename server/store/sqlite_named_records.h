#pragma once

// Experiments and hold tunings are stored alike in SQLite: a table with one row per name
// (name, create_time_ns, end_time_ns, record = the serialised resource), a status replaced as a
// whole under a lease fence, deletion together with the metric windows stored under the name,
// and every write bumping the store-wide revision. These are the shared steps; the callers hold
// the store's mutex. Internal to the SQLite store (sqlite_store_experiments.cc,
// sqlite_store_tunings.cc).

#include <SQLiteCpp/SQLiteCpp.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/sqlite_util.h"
#include "server/store/store.h"

namespace rxfleet::server::sqlite_named {

/// One table of named resources.
struct Table {
  const char* table;        ///< e.g. "experiments"
  const char* kind;         ///< in messages, e.g. "experiment"
  const char* exists_hint;  ///< appended to the AlreadyExists message ("" for none)
};

template <typename Resource>
std::optional<Resource> Find(SQLite::Database& db, const Table& t, std::string_view name) {
  SQLite::Statement query(db, absl::StrCat("SELECT record FROM ", t.table, " WHERE name = ?"));
  query.bind(1, std::string(name));
  if (!query.executeStep()) return std::nullopt;
  return ParseRecord<Resource>(query.getColumn(0), t.table);
}

template <typename Resource>
void Upsert(SQLite::Database& db, const Table& t, const Resource& resource) {
  std::string buffer;
  SQLite::Statement upsert(
      db, absl::StrCat("INSERT INTO ", t.table,
                       " (name, create_time_ns, end_time_ns, record) VALUES (?, ?, ?, ?) ON "
                       "CONFLICT (name) DO UPDATE SET end_time_ns = excluded.end_time_ns, "
                       "record = excluded.record"));
  upsert.bind(1, resource.metadata().name());
  upsert.bind(2, absl::ToUnixNanos(common::TimeFromProto(resource.metadata().create_time())));
  if (resource.status().has_end_time()) {
    upsert.bind(3, absl::ToUnixNanos(common::TimeFromProto(resource.status().end_time())));
  } else {
    upsert.bind(3);
  }
  BindRecord(upsert, 4, resource, &buffer);
  upsert.exec();
}

/// Store::CreateExperiment / CreateTuning: `stamp(requested, revision, now)` makes the stored
/// form (store_records::NewExperiment, NewTuning).
template <typename Resource, typename Stamp>
absl::StatusOr<Resource> Create(SQLite::Database& db, std::string_view path, const Table& t,
                                const Resource& requested, absl::Time now, Stamp stamp) {
  const std::string& name = requested.metadata().name();
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(t.kind, " metadata.name must be set"));
  }
  try {
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    if (Find<Resource>(db, t, name).has_value()) {
      return absl::AlreadyExistsError(
          absl::StrCat(t.kind, " ", name, " already exists", t.exists_hint));
    }
    const int64_t revision = ReadMeta(db, "revision") + 1;
    const Resource out = stamp(requested, revision, now);
    Upsert(db, t, out);
    WriteMeta(db, "revision", revision);
    transaction.commit();
    return out;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot store ", t.kind, " ", name), path);
  }
}

/// Store::UpdateExperimentStatus / UpdateTuningStatus.
template <typename Resource, typename Status>
absl::StatusOr<Resource> UpdateStatus(SQLite::Database& db, std::string_view path, const Table& t,
                                      std::string_view name, const Status& status, absl::Time now,
                                      const LeaseFence* fence) {
  try {
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    if (absl::Status s = CheckSqliteFence(db, fence); !s.ok()) return s;
    std::optional<Resource> stored = Find<Resource>(db, t, name);
    if (!stored.has_value()) {
      return absl::NotFoundError(
          absl::StrCat(t.kind, " ", common::ToAbslView(name), " does not exist"));
    }
    const int64_t revision = ReadMeta(db, "revision") + 1;
    *stored->mutable_status() = status;
    stored->mutable_metadata()->set_resource_version(absl::StrCat(revision));
    *stored->mutable_metadata()->mutable_update_time() = common::TimeToProto(now);
    Upsert(db, t, *stored);
    WriteMeta(db, "revision", revision);
    transaction.commit();
    return *std::move(stored);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(
        e, absl::StrCat("cannot update ", t.kind, " ", common::ToAbslView(name)), path);
  }
}

/// Store::DeleteExperiment / DeleteTuning: the row and the windows stored under its name.
inline absl::Status Delete(SQLite::Database& db, std::string_view path, const Table& t,
                           std::string_view name) {
  try {
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement remove(db, absl::StrCat("DELETE FROM ", t.table, " WHERE name = ?"));
    remove.bind(1, std::string(name));
    if (remove.exec() == 0) {
      return absl::NotFoundError(
          absl::StrCat(t.kind, " ", common::ToAbslView(name), " does not exist"));
    }
    SQLite::Statement windows(db, "DELETE FROM metric_windows WHERE experiment = ?");
    windows.bind(1, std::string(name));
    windows.exec();
    WriteMeta(db, "revision", ReadMeta(db, "revision") + 1);
    transaction.commit();
    return absl::OkStatus();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(
        e, absl::StrCat("cannot delete ", t.kind, " ", common::ToAbslView(name)), path);
  }
}

/// Store::LoadExperiments / LoadTunings: by create time, then name.
template <typename Resource>
absl::StatusOr<std::vector<Resource>> LoadAll(SQLite::Database& db, std::string_view path,
                                              const Table& t, std::string_view what) {
  std::vector<Resource> out;
  try {
    SQLite::Statement query(
        db, absl::StrCat("SELECT record FROM ", t.table, " ORDER BY create_time_ns, name"));
    while (query.executeStep()) out.push_back(ParseRecord<Resource>(query.getColumn(0), t.table));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot load ", common::ToAbslView(what)), path);
  }
  return out;
}

}  // namespace rxfleet::server::sqlite_named
