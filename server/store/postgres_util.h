#pragma once

// Helpers of the PostgreSQL store's files (postgres_store.cc, postgres_store_experiments.cc):
// the configuration-write lock on the revision row. Throw pq::Error.

#include <cstdint>

#include "server/store/pq.h"

namespace rxfleet::server::postgres {

/// Locks the revision row of `meta`, serialising configuration writers across every
/// connection (see postgres_store.h); returns the current revision. Inside a transaction.
int64_t LockRevision(pq::Connection& conn);
/// Sets the revision (after LockRevision, in the same transaction).
void SetRevision(pq::Connection& conn, int64_t revision);

}  // namespace rxfleet::server::postgres
