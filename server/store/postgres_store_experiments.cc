// The PostgreSQL store (server/store/postgres_store.h): experiments and their metric windows;
// policies, registry and events are in postgres_store.cc.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_named_records.h"
#include "server/store/postgres_store.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"
#include "server/store/records.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;
using postgres::SnapshotXmin;

constexpr postgres_named::Table kExperiments = {"experiments", "experiment",
                                                " (names are never reused, even after it ended)"};

}  // namespace

absl::StatusOr<v1::Experiment> PostgresStore::CreateExperiment(const v1::Experiment& experiment,
                                                               absl::Time now) {
  absl::MutexLock lock(&mu_);
  return postgres_named::Create([this]() -> pq::Connection& { return Connected(); }, name_,
                                kExperiments, experiment, now, store_records::NewExperiment);
}

absl::StatusOr<v1::Experiment> PostgresStore::UpdateExperimentStatus(
    std::string_view name, const v1::ExperimentStatus& status, absl::Time now,
    const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  return postgres_named::UpdateStatus<v1::Experiment>(
      [this]() -> pq::Connection& { return Connected(); }, name_, kExperiments, name, status, now,
      fence);
}

absl::Status PostgresStore::DeleteExperiment(std::string_view name) {
  absl::MutexLock lock(&mu_);
  return postgres_named::Delete([this]() -> pq::Connection& { return Connected(); }, name_,
                                kExperiments, name);
}

absl::StatusOr<std::vector<v1::Experiment>> PostgresStore::LoadExperiments() {
  absl::MutexLock lock(&mu_);
  return postgres_named::LoadAll<v1::Experiment>(
      [this]() -> pq::Connection& { return Connected(); }, name_, kExperiments, "experiments");
}

absl::Status PostgresStore::AddWindows(absl::Span<const StoredWindow> windows) {
  if (windows.empty()) return absl::OkStatus();
  std::vector<pq::Params> rows;
  rows.reserve(windows.size());
  for (const StoredWindow& w : windows) {
    rows.push_back(pq::Params()
                       .Text(w.experiment)
                       .Text(w.host_id)
                       .Int(w.window.valid() ? 1 : 0)
                       .Int(static_cast<int64_t>(w.segment.size()))
                       .Text(store_records::JoinSegment(w.segment))
                       .Record(w.window));
  }
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    conn.ExecMany(
        "INSERT INTO metric_windows (experiment, host_id, valid, segment_count, segment, record) "
        "VALUES ($1, $2, $3 <> 0, $4, $5, $6)",
        rows);
    transaction.Commit();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot store metric windows", name_);
  }
  return absl::OkStatus();
}

absl::Status PostgresStore::ForEachWindow(
    std::string_view experiment,
    const std::function<void(const std::string& host_id, std::vector<std::string> segment,
                             const v1::MetricWindow& window)>& fn) {
  absl::MutexLock lock(&mu_);
  try {
    pq::Result rows = Connected().Exec(
        "SELECT host_id, segment_count::int8, segment, record FROM metric_windows "
        "WHERE experiment = $1 ORDER BY id",
        pq::Params().Text(experiment));
    v1::MetricWindow window;
    for (int i = 0; i < rows.rows(); ++i) {
      window = rows.Record<v1::MetricWindow>(i, 3, "metric_windows");
      fn(rows.Text(i, 0), store_records::SplitSegment(rows.Bytes(i, 2), rows.Int(i, 1)), window);
    }
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(
        e, absl::StrCat("cannot read the metric windows of experiment ", ToAbslView(experiment)),
        name_);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PostgresStore::ForEachWindowSince(
    std::string_view experiment, uint64_t cursor,
    const std::function<void(const WindowRow& row, const std::string& host_id,
                             std::vector<std::string> segment, const v1::MetricWindow& window)>&
        fn) {
  absl::MutexLock lock(&mu_);
  uint64_t next = cursor;
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn, "ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const uint64_t xmin = SnapshotXmin(conn);
    const pq::Result rows = conn.Exec(
        "SELECT id, write_xid::text::int8, host_id, segment_count::int8, segment, record FROM "
        "metric_windows WHERE experiment = $1 AND write_xid >= $2::text::xid8 ORDER BY id",
        pq::Params().Text(experiment).Text(absl::StrCat(cursor)));
    transaction.Commit();
    v1::MetricWindow window;
    for (int i = 0; i < rows.rows(); ++i) {
      window = rows.Record<v1::MetricWindow>(i, 5, "metric_windows");
      fn(WindowRow{rows.Int(i, 0), static_cast<uint64_t>(rows.Int(i, 1))}, rows.Text(i, 2),
         store_records::SplitSegment(rows.Bytes(i, 4), rows.Int(i, 3)), window);
    }
    next = std::max(next, xmin);
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(
        e, absl::StrCat("cannot read the metric windows of experiment ", ToAbslView(experiment)),
        name_);
  }
  return next;
}

absl::StatusOr<std::map<std::string, WindowCounts>> PostgresStore::CountWindows() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, WindowCounts> out;
  try {
    pq::Result rows = Connected().Exec(
        "SELECT experiment, COUNT(*), COUNT(*) FILTER (WHERE valid) FROM metric_windows "
        "GROUP BY experiment");
    for (int i = 0; i < rows.rows(); ++i) {
      WindowCounts& counts = out[rows.Text(i, 0)];
      counts.total = static_cast<uint64_t>(rows.Int(i, 1));
      counts.valid = static_cast<uint64_t>(rows.Int(i, 2));
    }
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot count metric windows", name_);
  }
  return out;
}

absl::StatusOr<uint64_t> PostgresStore::DeleteWindowsOfExperimentsEndedBefore(
    absl::Time ended_before, const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    if (absl::Status s = postgres::CheckFence(conn, fence); !s.ok()) return s;
    pq::Result deleted = conn.Exec(
        "DELETE FROM metric_windows WHERE experiment IN (SELECT name FROM experiments WHERE "
        "end_time_ns IS NOT NULL AND end_time_ns < $1)",
        pq::Params().Int(absl::ToUnixNanos(ended_before)));
    transaction.Commit();
    return static_cast<uint64_t>(deleted.affected());
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot delete expired metric windows", name_);
  }
}

absl::StatusOr<uint64_t> PostgresStore::DeleteWindowsBelow(std::string_view experiment,
                                                           int64_t below_id,
                                                           const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    if (absl::Status s = postgres::CheckFence(conn, fence); !s.ok()) return s;
    pq::Result deleted = conn.Exec("DELETE FROM metric_windows WHERE experiment = $1 AND id < $2",
                                   pq::Params().Text(experiment).Int(below_id));
    transaction.Commit();
    return static_cast<uint64_t>(deleted.affected());
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(
        e, absl::StrCat("cannot delete old metric windows of ", common::ToAbslView(experiment)),
        name_);
  }
}

}  // namespace rxfleet::server
