// The SQLite store (server/store/sqlite_store.h): hold tunings. Their metric windows are in
// metric_windows under the tuning's name, beside the experiments' (sqlite_store_experiments.cc):
// tunings and experiments share one name namespace.

#include <SQLiteCpp/SQLiteCpp.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/records.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

std::optional<v1::HoldTuning> FindTuning(SQLite::Database& db, std::string_view name) {
  SQLite::Statement query(db, "SELECT record FROM tunings WHERE name = ?");
  query.bind(1, std::string(name));
  if (!query.executeStep()) return std::nullopt;
  return ParseRecord<v1::HoldTuning>(query.getColumn(0), "tunings");
}

void UpsertTuning(SQLite::Database& db, const v1::HoldTuning& tuning) {
  std::string buffer;
  SQLite::Statement upsert(db,
                           "INSERT INTO tunings (name, create_time_ns, end_time_ns, record) "
                           "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                           "end_time_ns = excluded.end_time_ns, record = excluded.record");
  upsert.bind(1, tuning.metadata().name());
  upsert.bind(2, absl::ToUnixNanos(common::TimeFromProto(tuning.metadata().create_time())));
  if (tuning.status().has_end_time()) {
    upsert.bind(3, absl::ToUnixNanos(common::TimeFromProto(tuning.status().end_time())));
  } else {
    upsert.bind(3);
  }
  BindRecord(upsert, 4, tuning, &buffer);
  upsert.exec();
}

}  // namespace

absl::StatusOr<v1::HoldTuning> SqliteStore::CreateTuning(const v1::HoldTuning& tuning,
                                                         absl::Time now) {
  const std::string& name = tuning.metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("hold tuning metadata.name must be set");
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    if (FindTuning(db, name).has_value()) {
      return absl::AlreadyExistsError(absl::StrCat("hold tuning ", name, " already exists"));
    }
    const int64_t revision = ReadMeta(db, "revision") + 1;
    const v1::HoldTuning out = store_records::NewTuning(tuning, revision, now);
    UpsertTuning(db, out);
    WriteMeta(db, "revision", revision);
    transaction.commit();
    return out;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot store hold tuning ", name), path_);
  }
}

absl::StatusOr<v1::HoldTuning> SqliteStore::UpdateTuningStatus(std::string_view name,
                                                               const v1::HoldTuningStatus& status,
                                                               absl::Time now,
                                                               const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    if (absl::Status s = CheckSqliteFence(db, fence); !s.ok()) return s;
    std::optional<v1::HoldTuning> stored = FindTuning(db, name);
    if (!stored.has_value()) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", ToAbslView(name), " does not exist"));
    }
    const int64_t revision = ReadMeta(db, "revision") + 1;
    *stored->mutable_status() = status;
    stored->mutable_metadata()->set_resource_version(absl::StrCat(revision));
    *stored->mutable_metadata()->mutable_update_time() = common::TimeToProto(now);
    UpsertTuning(db, *stored);
    WriteMeta(db, "revision", revision);
    transaction.commit();
    return *std::move(stored);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot update hold tuning ", ToAbslView(name)), path_);
  }
}

absl::Status SqliteStore::DeleteTuning(std::string_view name) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement remove(db, "DELETE FROM tunings WHERE name = ?");
    remove.bind(1, std::string(name));
    if (remove.exec() == 0) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", ToAbslView(name), " does not exist"));
    }
    SQLite::Statement windows(db, "DELETE FROM metric_windows WHERE experiment = ?");
    windows.bind(1, std::string(name));
    windows.exec();
    WriteMeta(db, "revision", ReadMeta(db, "revision") + 1);
    transaction.commit();
    return absl::OkStatus();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot delete hold tuning ", ToAbslView(name)), path_);
  }
}

absl::StatusOr<std::vector<v1::HoldTuning>> SqliteStore::LoadTunings() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::HoldTuning> out;
  try {
    SQLite::Statement query(*db_, "SELECT record FROM tunings ORDER BY create_time_ns, name");
    while (query.executeStep()) {
      out.push_back(ParseRecord<v1::HoldTuning>(query.getColumn(0), "tunings"));
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot load hold tunings", path_);
  }
  return out;
}

}  // namespace rxfleet::server
