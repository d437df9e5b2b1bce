#pragma once

// Helpers of the PostgreSQL store's files (postgres_store.cc, postgres_store_experiments.cc):
// the configuration-write lock on the revision row and its change notification. Throw
// pq::Error.

#include <cstdint>

#include "server/store/pq.h"

namespace rxfleet::server::postgres {

/// Locks the revision row of `meta`, serialising configuration writers across every
/// connection (see postgres_store.h); returns the current revision. Inside a transaction.
int64_t LockRevision(pq::Connection& conn);
/// Sets the revision (after LockRevision, in the same transaction) and queues its wake-up:
/// NOTIFY on kRevisionChannel with the new revision in decimal as the payload, delivered to
/// every listening session when (and only if) the transaction commits.
void SetRevision(pq::Connection& conn, int64_t revision);

/// The NOTIFY channel of revision changes (server/store/change_feed.h listens on it).
inline constexpr char kRevisionChannel[] = "rxfleet_revision";

}  // namespace rxfleet::server::postgres
