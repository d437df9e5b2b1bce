#pragma once

// Helpers of the PostgreSQL store's files (postgres_store.cc, postgres_store_experiments.cc,
// postgres_store_tunings.cc): the configuration-write lock on the revision row and its change
// notification. Throw pq::Error.

#include <cstdint>

#include "absl/status/status.h"
#include "server/store/pq.h"
#include "server/store/store.h"

namespace rxfleet::server::postgres {

/// Locks the revision row of `meta`, serialising configuration writers across every
/// connection (see postgres_store.h); returns the current revision. Inside a transaction.
int64_t LockRevision(pq::Connection& conn);
/// Sets the revision (after LockRevision, in the same transaction) and queues its wake-up:
/// NOTIFY on kRevisionChannel with the new revision in decimal as the payload, delivered to
/// every listening session when (and only if) the transaction commits.
void SetRevision(pq::Connection& conn, int64_t revision);

/// OK if `fence` is null or still holds its lease (the lease row is then locked FOR SHARE
/// until the transaction ends, so no take-over commits in between); else the Aborted status
/// of store_records::LeaseLost. Inside a transaction (postgres_store_leases.cc).
absl::Status CheckFence(pq::Connection& conn, const LeaseFence* fence);

/// The xmin of the transaction's snapshot (pg_snapshot_xmin): every transaction whose id is
/// below it had ended when the snapshot was taken, so rows that such a transaction wrote are
/// visible in it or never will be, and a row still being written carries an id at or above
/// it. The cursor of the registry and window followers (Store::LoadHostChanges). Inside a
/// REPEATABLE READ transaction, before its first query.
uint64_t SnapshotXmin(pq::Connection& conn);

/// The parameters of an `experiments` row: name, create_time_ns, end_time_ns (NULL while it
/// has none), record.
pq::Params ExperimentRow(const v1::Experiment& experiment);
/// The parameters of a `tunings` row, in the same shape.
pq::Params TuningRow(const v1::HoldTuning& tuning);

/// The NOTIFY channel of revision changes (server/store/change_feed.h listens on it).
inline constexpr char kRevisionChannel[] = "rxfleet_revision";

}  // namespace rxfleet::server::postgres
