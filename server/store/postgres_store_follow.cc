// The PostgreSQL store's reads of what every replica wrote (server/store/postgres_store.h):
// the hosts written since a snapshot's xmin and the events above a version.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/postgres_store.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"

namespace rxfleet::server {

using postgres::SnapshotXmin;

absl::StatusOr<HostChanges> PostgresStore::LoadHostChanges(uint64_t cursor) {
  absl::MutexLock lock(&mu_);
  HostChanges changes;
  try {
    pq::Connection& conn = Connected();
    pq::Transaction transaction(conn, "ISOLATION LEVEL REPEATABLE READ READ ONLY");
    // The transaction's snapshot: every transaction with an id below its xmin has ended, so
    // it is visible here or never commits; a write still running has an id at or above xmin
    // and is read by the next call.
    changes.cursor = SnapshotXmin(conn);
    const std::string from = absl::StrCat(cursor);
    const pq::Result hosts = conn.Exec(
        "SELECT h.id, h.record, (h.adapters_xid >= $1::text::xid8)::int4::int8, s.replica, s.epoch "
        "FROM hosts h LEFT JOIN agent_sessions s ON s.host_id = h.id "
        "WHERE h.write_xid >= $1::text::xid8 ORDER BY h.id",
        pq::Params().Text(from));
    std::map<std::string, size_t, std::less<>> host_index;
    for (int i = 0; i < hosts.rows(); ++i) {
      HostRecord record;
      record.host = hosts.Record<v1::Host>(i, 1, "hosts");
      record.adapters_changed = hosts.Int(i, 2) != 0;
      if (!hosts.IsNull(i, 3)) {
        record.session_replica = hosts.Text(i, 3);
        record.session_epoch = static_cast<uint64_t>(hosts.Int(i, 4));
      }
      if (record.adapters_changed) host_index[hosts.Text(i, 0)] = changes.hosts.size();
      changes.hosts.push_back(std::move(record));
    }
    if (!host_index.empty()) {
      const pq::Result adapters = conn.Exec(
          "SELECT a.host_id, a.record FROM adapters a JOIN hosts h ON h.id = a.host_id "
          "WHERE h.write_xid >= $1::text::xid8 AND h.adapters_xid >= $1::text::xid8 "
          "ORDER BY a.host_id, a.id",
          pq::Params().Text(from));
      for (int i = 0; i < adapters.rows(); ++i) {
        auto it = host_index.find(adapters.Text(i, 0));
        if (it == host_index.end()) continue;
        changes.hosts[it->second].adapters.push_back(
            adapters.Record<v1::Adapter>(i, 1, "adapters"));
      }
    }
    transaction.Commit();
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot load the changed hosts", name_);
  }
  changes.cursor = std::max(changes.cursor, cursor);
  return changes;
}

absl::StatusOr<std::vector<v1::Event>> PostgresStore::LoadEventsAfter(uint64_t version,
                                                                      size_t limit) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Event> out;
  try {
    const pq::Result rows = Connected().Exec(
        "SELECT resource_version, record FROM (SELECT resource_version, record FROM events "
        "WHERE resource_version > $1 UNION ALL SELECT resource_version, record FROM "
        "audit_events WHERE resource_version > $1) AS e ORDER BY resource_version LIMIT $2",
        pq::Params()
            .Int(static_cast<int64_t>(std::min<uint64_t>(version, INT64_MAX)))
            .Int(static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX))));
    out.reserve(static_cast<size_t>(rows.rows()));
    for (int i = 0; i < rows.rows(); ++i) out.push_back(rows.Record<v1::Event>(i, 1, "events"));
  } catch (const pq::Error& e) {
    return pq::StatusFromPq(e, "cannot read the events", name_);
  }
  return out;
}

}  // namespace rxfleet::server
