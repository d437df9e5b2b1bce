// The PostgreSQL store (server/store/postgres_store.h): hold tunings. Their metric windows are
// in metric_windows under the tuning's name, beside the experiments'
// (postgres_store_experiments.cc): tunings and experiments share one name namespace. Every
// write takes the revision lock and sends the revision's wake-up, as experiment writes do.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_store.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"
#include "server/store/records.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;
using postgres::LockRevision;
using postgres::SetRevision;

std::optional<v1::HoldTuning> FindTuning(pq::Connection& conn, std::string_view name) {
  pq::Result row = conn.Exec("SELECT record FROM tunings WHERE name = $1", pq::Params().Text(name));
  if (row.rows() == 0) return std::nullopt;
  return row.Record<v1::HoldTuning>(0, 0, "tunings");
}

void UpsertTuning(pq::Connection& conn, const v1::HoldTuning& tuning) {
  conn.Exec(
      "INSERT INTO tunings (name, create_time_ns, end_time_ns, record) "
      "VALUES ($1, $2, $3::int8, $4) ON CONFLICT (name) DO UPDATE SET "
      "end_time_ns = excluded.end_time_ns, record = excluded.record",
      postgres::TuningRow(tuning));
}

}  // namespace

absl::StatusOr<v1::HoldTuning> PostgresStore::CreateTuning(const v1::HoldTuning& tuning,
                                                           absl::Time now) {
  const std::string& name = tuning.metadata().name();
  if (name.empty()) return absl::InvalidArgumentError("hold tuning metadata.name must be set");
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    const int64_t revision = LockRevision(conn) + 1;
    if (FindTuning(conn, name).has_value()) {
      return absl::AlreadyExistsError(absl::StrCat("hold tuning ", name, " already exists"));
    }
    const v1::HoldTuning out = store_records::NewTuning(tuning, revision, now);
    UpsertTuning(conn, out);
    SetRevision(conn, revision);
    transaction.Commit();
    return out;
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot store hold tuning ", name), name_);
  }
}

absl::StatusOr<v1::HoldTuning> PostgresStore::UpdateTuningStatus(std::string_view name,
                                                                 const v1::HoldTuningStatus& status,
                                                                 absl::Time now,
                                                                 const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    if (absl::Status s = postgres::CheckFence(conn, fence); !s.ok()) return s;
    const int64_t revision = LockRevision(conn) + 1;
    std::optional<v1::HoldTuning> stored = FindTuning(conn, name);
    if (!stored.has_value()) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", ToAbslView(name), " does not exist"));
    }
    *stored->mutable_status() = status;
    stored->mutable_metadata()->set_resource_version(absl::StrCat(revision));
    *stored->mutable_metadata()->mutable_update_time() = common::TimeToProto(now);
    UpsertTuning(conn, *stored);
    SetRevision(conn, revision);
    transaction.Commit();
    return *std::move(stored);
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot update hold tuning ", ToAbslView(name)), name_);
  }
}

absl::Status PostgresStore::DeleteTuning(std::string_view name) {
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn);
    const int64_t revision = LockRevision(conn) + 1;
    if (conn.Exec("DELETE FROM tunings WHERE name = $1", pq::Params().Text(name)).affected() == 0) {
      return absl::NotFoundError(absl::StrCat("hold tuning ", ToAbslView(name), " does not exist"));
    }
    conn.Exec("DELETE FROM metric_windows WHERE experiment = $1", pq::Params().Text(name));
    SetRevision(conn, revision);
    transaction.Commit();
    return absl::OkStatus();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot delete hold tuning ", ToAbslView(name)), name_);
  }
}

absl::StatusOr<std::vector<v1::HoldTuning>> PostgresStore::LoadTunings() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::HoldTuning> out;
  try {
    pq::Result rows = Connected().Exec("SELECT record FROM tunings ORDER BY create_time_ns, name");
    for (int i = 0; i < rows.rows(); ++i) {
      out.push_back(rows.Record<v1::HoldTuning>(i, 0, "tunings"));
    }
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot load hold tunings", name_);
  }
  return out;
}

}  // namespace rxfleet::server
