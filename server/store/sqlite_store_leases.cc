// The SQLite store's leases (Store::AcquireLease): the same table and fence as on PostgreSQL,
// but one server process owns the file (its lock file), so a lease is always granted to the
// asking holder, taken over from any previous one; the fence still checks holder, epoch and
// expiry, so the jobs run the same code on both backends.

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/string_view_compat.h"
#include "server/store/records.h"
#include "server/store/sqlite_store.h"
#include "server/store/sqlite_util.h"

namespace rxfleet::server {

absl::Status CheckSqliteFence(SQLite::Database& db, const LeaseFence* fence) {
  if (fence == nullptr) return absl::OkStatus();
  SQLite::Statement query(db,
                          "SELECT 1 FROM leases WHERE name = ? AND holder = ? AND epoch = ? AND "
                          "expire_time_us > ?");
  query.bind(1, fence->name);
  query.bind(2, fence->holder);
  query.bind(3, static_cast<int64_t>(fence->epoch));
  query.bind(4, absl::ToUnixMicros(absl::Now()));
  return query.executeStep() ? absl::OkStatus() : store_records::LeaseLost(*fence);
}

absl::StatusOr<Lease> SqliteStore::AcquireLease(std::string_view name, std::string_view holder,
                                                absl::Duration ttl) {
  if (absl::Status s = store_records::ValidateLeaseRequest(name, holder, ttl); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Database& db = *db_;
    const int64_t now_us = absl::ToUnixMicros(absl::Now());
    SQLite::Statement upsert(
        db,
        "INSERT INTO leases (name, holder, epoch, expire_time_us) VALUES (?1, ?2, 1, ?3 + ?4) "
        "ON CONFLICT (name) DO UPDATE SET "
        "epoch = CASE WHEN holder = excluded.holder AND expire_time_us > ?3 THEN epoch "
        "ELSE epoch + 1 END, holder = excluded.holder, expire_time_us = excluded.expire_time_us "
        "RETURNING epoch, expire_time_us");
    upsert.bind(1, std::string(name));
    upsert.bind(2, std::string(holder));
    upsert.bind(3, now_us);
    upsert.bind(4, absl::ToInt64Microseconds(ttl));
    if (!upsert.executeStep()) {
      throw SQLite::Exception("the lease upsert returned nothing", SQLITE_INTERNAL);
    }
    Lease lease{std::string(name), std::string(holder),
                static_cast<uint64_t>(upsert.getColumn(0).getInt64()),
                absl::FromUnixMicros(upsert.getColumn(1).getInt64())};
    while (upsert.executeStep()) {
    }
    return lease;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot take lease ", common::ToAbslView(name)), path_);
  }
}

absl::Status SqliteStore::ReleaseLease(const LeaseFence& fence) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Statement update(*db_,
                             "UPDATE leases SET expire_time_us = ? WHERE name = ? AND holder = ? "
                             "AND epoch = ?");
    update.bind(1, absl::ToUnixMicros(absl::Now()));
    update.bind(2, fence.name);
    update.bind(3, fence.holder);
    update.bind(4, static_cast<int64_t>(fence.epoch));
    update.exec();
    return absl::OkStatus();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, absl::StrCat("cannot release lease ", fence.name), path_);
  }
}

}  // namespace rxfleet::server
