// Store: experiments and their metric windows (the rest of the store is in store.cc).

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/records.h"
#include "server/store/sqlite_named_records.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

constexpr sqlite_named::Table kExperiments = {"experiments", "experiment",
                                              " (names are never reused, even after it ended)"};

}  // namespace

absl::StatusOr<v1::Experiment> SqliteStore::CreateExperiment(const v1::Experiment& experiment,
                                                             absl::Time now) {
  absl::MutexLock lock(&mu_);
  return sqlite_named::Create(*db_, path_, kExperiments, experiment, now,
                              store_records::NewExperiment);
}

absl::StatusOr<v1::Experiment> SqliteStore::UpdateExperimentStatus(
    std::string_view name, const v1::ExperimentStatus& status, absl::Time now,
    const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  return sqlite_named::UpdateStatus<v1::Experiment>(*db_, path_, kExperiments, name, status, now,
                                                    fence);
}

absl::Status SqliteStore::DeleteExperiment(std::string_view name) {
  absl::MutexLock lock(&mu_);
  return sqlite_named::Delete(*db_, path_, kExperiments, name);
}

absl::StatusOr<std::vector<v1::Experiment>> SqliteStore::LoadExperiments() {
  absl::MutexLock lock(&mu_);
  return sqlite_named::LoadAll<v1::Experiment>(*db_, path_, kExperiments, "experiments");
}

absl::Status SqliteStore::AddWindows(absl::Span<const StoredWindow> windows) {
  if (windows.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    std::string buffer;
    SQLite::Statement insert(db,
                             "INSERT INTO metric_windows (experiment, host_id, valid, "
                             "segment_count, segment, record) VALUES (?, ?, ?, ?, ?, ?)");
    for (const StoredWindow& w : windows) {
      insert.bind(1, w.experiment);
      insert.bind(2, w.host_id);
      insert.bind(3, w.window.valid() ? 1 : 0);
      insert.bind(4, static_cast<int64_t>(w.segment.size()));
      insert.bind(5, store_records::JoinSegment(w.segment));
      BindRecord(insert, 6, w.window, &buffer);
      insert.exec();
      insert.reset();
    }
    transaction.commit();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot store metric windows", path_);
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::ForEachWindow(
    std::string_view experiment,
    const std::function<void(const std::string& host_id, std::vector<std::string> segment,
                             const v1::MetricWindow& window)>& fn) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Statement query(*db_,
                            "SELECT host_id, segment_count, segment, record FROM metric_windows "
                            "WHERE experiment = ? ORDER BY id");
    query.bind(1, std::string(experiment));
    v1::MetricWindow window;
    while (query.executeStep()) {
      const SQLite::Column record = query.getColumn(3);
      if (!window.ParseFromArray(record.getBlob(), record.getBytes())) {
        throw SQLite::Exception("a record in table metric_windows does not parse", SQLITE_CORRUPT);
      }
      fn(query.getColumn(0).getString(),
         store_records::SplitSegment(query.getColumn(2).getString(), query.getColumn(1).getInt64()),
         window);
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(
        e, absl::StrCat("cannot read the metric windows of experiment ", ToAbslView(experiment)),
        path_);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SqliteStore::ForEachWindowSince(
    std::string_view experiment, uint64_t cursor,
    const std::function<void(const WindowRow& row, const std::string& host_id,
                             std::vector<std::string> segment, const v1::MetricWindow& window)>&
        fn) {
  absl::MutexLock lock(&mu_);
  uint64_t next = cursor;
  try {
    // One server writes the file, one transaction at a time: row ids commit in order, so the
    // next row id is an exact cursor.
    SQLite::Statement query(*db_,
                            "SELECT id, host_id, segment_count, segment, record FROM "
                            "metric_windows WHERE experiment = ? AND id >= ? ORDER BY id");
    query.bind(1, std::string(experiment));
    query.bind(2, static_cast<int64_t>(std::min<uint64_t>(cursor, INT64_MAX)));
    v1::MetricWindow window;
    while (query.executeStep()) {
      const SQLite::Column record = query.getColumn(4);
      if (!window.ParseFromArray(record.getBlob(), record.getBytes())) {
        throw SQLite::Exception("a record in table metric_windows does not parse", SQLITE_CORRUPT);
      }
      const int64_t id = query.getColumn(0).getInt64();
      fn(WindowRow{id, static_cast<uint64_t>(id)}, query.getColumn(1).getString(),
         store_records::SplitSegment(query.getColumn(3).getString(), query.getColumn(2).getInt64()),
         window);
      next = std::max(next, static_cast<uint64_t>(id) + 1);
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(
        e, absl::StrCat("cannot read the metric windows of experiment ", ToAbslView(experiment)),
        path_);
  }
  return next;
}

absl::StatusOr<std::map<std::string, WindowCounts>> SqliteStore::CountWindows() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, WindowCounts> out;
  try {
    SQLite::Statement query(*db_,
                            "SELECT experiment, COUNT(*), SUM(valid) FROM metric_windows "
                            "GROUP BY experiment");
    while (query.executeStep()) {
      WindowCounts& counts = out[query.getColumn(0).getString()];
      counts.total = static_cast<uint64_t>(query.getColumn(1).getInt64());
      counts.valid = static_cast<uint64_t>(query.getColumn(2).getInt64());
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot count metric windows", path_);
  }
  return out;
}

absl::StatusOr<uint64_t> SqliteStore::DeleteWindowsOfExperimentsEndedBefore(
    absl::Time ended_before, const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    if (absl::Status s = CheckSqliteFence(db, fence); !s.ok()) return s;
    SQLite::Statement remove(db,
                             "DELETE FROM metric_windows WHERE experiment IN (SELECT name FROM "
                             "experiments WHERE end_time_ns IS NOT NULL AND end_time_ns < ?)");
    remove.bind(1, absl::ToUnixNanos(ended_before));
    const int deleted = remove.exec();
    transaction.commit();
    return static_cast<uint64_t>(deleted);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot delete expired metric windows", path_);
  }
}

absl::StatusOr<uint64_t> SqliteStore::DeleteWindowsBelow(std::string_view experiment,
                                                         int64_t below_id,
                                                         const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    if (absl::Status s = CheckSqliteFence(db, fence); !s.ok()) return s;
    SQLite::Statement remove(db, "DELETE FROM metric_windows WHERE experiment = ? AND id < ?");
    remove.bind(1, std::string(experiment));
    remove.bind(2, below_id);
    const int deleted = remove.exec();
    transaction.commit();
    return static_cast<uint64_t>(deleted);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(
        e, absl::StrCat("cannot delete old metric windows of ", common::ToAbslView(experiment)),
        path_);
  }
}

}  // namespace rxfleet::server
