#pragma once

// What both store implementations (server/store/sqlite_store.h, postgres_store.h) decide the
// same way, kept in one place so the backends cannot drift: policy write preconditions and the
// metadata a write stamps, new experiments' and tunings' metadata, metric window segments as one
// column, lease requests and the answer of a failed fence.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rxfleet/v1/experiment.pb.h"
#include "rxfleet/v1/policy.pb.h"
#include "rxfleet/v1/tuning.pb.h"
#include "server/store/store.h"

namespace rxfleet::server::store_records {

/// A random 128-bit id as 32 hex digits (metadata.uid).
std::string NewUid();

/// How a requested policy differs from the stored one (nullptr: none stored).
struct PolicyChange {
  bool spec_changed = false;
  bool meta_changed = false;  ///< labels or annotations
  bool any() const { return spec_changed || meta_changed; }
};

/// OK, or the Aborted status of a failed resource_version precondition (an empty
/// requested.metadata.resource_version always passes). See Store::ApplyPolicy.
absl::Status CheckPolicyPrecondition(const v1::Policy* stored, const v1::Policy& requested);
PolicyChange ComparePolicy(const v1::Policy* stored, const v1::Policy& requested);

/// The policy as a changed write stores it: name, labels, annotations and spec from
/// `requested`; resource_version = `revision`; uid and create_time kept from `stored` (new
/// ones if nullptr); generation 1, or the stored one plus one if the spec changed;
/// update_time = `now`.
v1::Policy StoredPolicy(const v1::Policy* stored, const v1::Policy& requested,
                        const PolicyChange& change, int64_t revision, absl::Time now);

/// A new experiment as stored: a new uid, generation 1, resource_version = `revision`,
/// create_time = update_time = `now`.
v1::Experiment NewExperiment(const v1::Experiment& requested, int64_t revision, absl::Time now);
/// A new hold tuning as stored, stamped as NewExperiment stamps an experiment.
v1::HoldTuning NewTuning(const v1::HoldTuning& requested, int64_t revision, absl::Time now);

/// Segment values in one column, joined with the ASCII unit separator (label values cannot
/// hold it); `count` is the number of values (0 means none, "" means one empty value).
/// `event` with the resource version the store assigned it (SaveRegistry, an event saved
/// without one): metadata.resource_version = `version` in decimal and, for a new event (no
/// name yet), name and uid "ev-VERSION".
v1::Event VersionedEvent(const v1::Event& event, int64_t version);

std::string JoinSegment(const std::vector<std::string>& segment);
std::vector<std::string> SplitSegment(std::string_view joined, int64_t count);

/// The tables Store::ImportSnapshot requires to be empty (the same names in both backends).
inline constexpr const char* kImportedTables[] = {
    "policies",       "hosts",       "adapters", "events", "audit_events",
    "metric_windows", "experiments", "tunings",  "tokens", "local_audit"};

/// OK if a database with these row counts (aligned with kImportedTables), revision and last
/// event version is empty; else FailedPrecondition naming `database` and what it holds.
absl::Status CheckImportTarget(std::string_view database, const std::vector<int64_t>& row_counts,
                               int64_t revision, int64_t last_event_version);

/// The numeric resource versions of a snapshot's policies and events (aligned with
/// snapshot.state.policies and snapshot.state.events), and the counters an import sets: the
/// snapshot's revision and last event version, raised to the highest resource version among
/// its policies, experiments and tunings, and events, if those are higher (never in a
/// consistent database), so later writes always continue above every imported version.
/// InvalidArgument naming the first policy, event, experiment or tuning without a numeric
/// resource version, or for a bundle version of 0.
struct SnapshotVersions {
  std::vector<int64_t> policies;
  std::vector<int64_t> events;
  int64_t revision = 0;
  int64_t last_event_version = 0;
};
absl::StatusOr<SnapshotVersions> CheckSnapshot(const StoreSnapshot& snapshot);

/// A host's agent session as stored (table agent_sessions).
struct StoredSession {
  std::string replica;
  uint64_t epoch = 0;
};
/// Whether SaveRegistry writes `record`, which has no open_session, when the host's stored
/// session is `stored` (nullptr: none): always without a session_replica, else only under
/// the same replica and epoch (see HostRecord::session_replica).
bool SessionHolds(const HostRecord& record, const StoredSession* stored);

/// OK, or InvalidArgument naming what is wrong with an AcquireLease request (see
/// Store::AcquireLease).
absl::Status ValidateLeaseRequest(std::string_view name, std::string_view holder,
                                  absl::Duration ttl);
/// The Aborted status of a fenced write whose lease is gone (see LeaseFence).
absl::Status LeaseLost(const LeaseFence& fence);

}  // namespace rxfleet::server::store_records
