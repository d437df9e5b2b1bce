// The PostgreSQL store's leases of singleton jobs (Store::AcquireLease): a row per job, timed
// by the database's clock, with a fencing epoch that fenced writes check under FOR SHARE, so a
// take-over cannot commit between a fenced write's check and its commit.

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_store.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"
#include "server/store/records.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

// The database's clock in microseconds since the epoch (the transaction's start).
constexpr char kNowUs[] = "(EXTRACT(EPOCH FROM now()) * 1000000)::int8";

Lease LeaseOf(const pq::Result& row) {
  return Lease{row.Text(0, 0), row.Text(0, 1), static_cast<uint64_t>(row.Int(0, 2)),
               absl::FromUnixMicros(row.Int(0, 3))};
}

}  // namespace

namespace postgres {

absl::Status CheckFence(pq::Connection& conn, const LeaseFence* fence) {
  if (fence == nullptr) return absl::OkStatus();
  const pq::Result row = conn.Exec(
      absl::StrCat("SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3 AND "
                   "expire_time_us > ",
                   kNowUs, " FOR SHARE"),
      pq::Params().Text(fence->name).Text(fence->holder).Int(static_cast<int64_t>(fence->epoch)));
  return row.rows() == 1 ? absl::OkStatus() : store_records::LeaseLost(*fence);
}

}  // namespace postgres

absl::StatusOr<Lease> PostgresStore::AcquireLease(std::string_view name, std::string_view holder,
                                                  absl::Duration ttl) {
  if (absl::Status s = store_records::ValidateLeaseRequest(name, holder, ttl); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  try {
    pq::Connection& conn = Connected();
    // One statement: granted to a free, expired or own lease; the epoch moves unless it is a
    // renewal of an unexpired lease.
    const pq::Result granted = conn.Exec(
        absl::StrCat(
            "INSERT INTO leases AS l (name, holder, epoch, expire_time_us) VALUES ($1, $2, 1, ",
            kNowUs,
            " + $3) ON CONFLICT (name) DO UPDATE SET "
            "epoch = CASE WHEN l.holder = excluded.holder AND l.expire_time_us > ",
            kNowUs,
            " THEN l.epoch ELSE l.epoch + 1 END, holder = excluded.holder, "
            "expire_time_us = excluded.expire_time_us "
            "WHERE l.holder = excluded.holder OR l.expire_time_us <= ",
            kNowUs, " RETURNING name, holder, epoch, expire_time_us"),
        pq::Params().Text(name).Text(holder).Int(absl::ToInt64Microseconds(ttl)));
    if (granted.rows() == 1) return LeaseOf(granted);
    const pq::Result held =
        conn.Exec("SELECT name, holder, epoch, expire_time_us FROM leases WHERE name = $1",
                  pq::Params().Text(name));
    if (held.rows() != 1) throw pq::Error("XX001", "the lease row vanished");
    return LeaseOf(held);
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot take lease ", ToAbslView(name)), name_);
  }
}

absl::Status PostgresStore::ReleaseLease(const LeaseFence& fence) {
  absl::MutexLock lock(&mu_);
  try {
    Connected().Exec(
        absl::StrCat("UPDATE leases SET expire_time_us = ", kNowUs,
                     " WHERE name = $1 AND holder = $2 AND epoch = $3"),
        pq::Params().Text(fence.name).Text(fence.holder).Int(static_cast<int64_t>(fence.epoch)));
    return absl::OkStatus();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, absl::StrCat("cannot release lease ", fence.name), name_);
  }
}

}  // namespace rxfleet::server
