#pragma once

// FleetService logic without gRPC: every request is validated here (INVALID_ARGUMENT naming the
// field), then served from the registry, the policy snapshot, the store and the event log.
// FleetServiceImpl (fleet_service.h) only moves requests and statuses across the wire.
//
// Policy writes (ApplyPolicy, DeletePolicy) are serialised: the store commits first (durable
// before the call returns), then the in-memory policy set is updated in the same order, then
// the push is triggered (debounced). A failed store write changes nothing and returns the
// store's error.

#include <functional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/link_limits.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "server/experiments/experiment_layer.h"
#include "server/http/metrics.h"
#include "server/registry/event_log.h"
#include "server/registry/policy_set.h"
#include "server/registry/registry.h"
#include "server/store/store.h"

namespace rxfleet::server {

/// Who called a write, for audit events.
struct Caller {
  /// The authenticated operator: "token:<name>" (server/auth/authorizer.h), or with
  /// --insecure "unauthenticated from <peer> (<user-agent>)".
  std::string actor = "unauthenticated";
};

/// Records in `events`, stamped now, the audit event of a change `caller` asked for, built by
/// the one audit builder (server/registry/audit_event.h): object `kind` ("Policy",
/// "Experiment", "Token") and `name`, the RPC `action`, `detail` appended to the object in the
/// message (may be empty), the resource versions before and after ("" when there is none),
/// whether it was a dry run, and the result.
void RecordAudit(EventLog& events, const Caller& caller, std::string_view kind,
                 std::string_view action, std::string_view name, std::string_view detail,
                 std::string_view old_version, std::string_view new_version, bool dry_run,
                 const absl::Status& result);

struct FleetApiDeps {
  Store* store;
  Registry* registry;
  PolicySet* policies;
  EventLog* events;
  ServerMetrics* metrics;
  /// Called after a committed policy change (the push debouncer's Trigger).
  std::function<void()> on_policy_change;
  /// Largest bundle message a host may get (server/api/bundle_limit.h); at most
  /// common::kMaxServerMessageBytes, what agents accept.
  size_t max_bundle_bytes = common::kMaxServerMessageBytes;
};

/// Field selector over hosts: comma-separated `connected=true|false` and `stale=true|false`
/// terms (also with `!=`). InvalidArgument naming an unknown field or value.
struct HostFieldSelector {
  struct Term {
    bool stale_field = false;  // false: connected
    bool negated = false;
    bool value = false;
  };
  std::vector<Term> terms;
  bool Matches(const v1::Host& host) const;
};
absl::StatusOr<HostFieldSelector> ParseHostFieldSelector(std::string_view text);

class FleetApi {
 public:
  explicit FleetApi(FleetApiDeps deps);

  absl::StatusOr<v1::ListHostsResponse> ListHosts(const v1::ListHostsRequest& request) const;
  absl::StatusOr<v1::Host> GetHost(const v1::GetHostRequest& request) const;
  absl::StatusOr<v1::ListAdaptersResponse> ListAdapters(
      const v1::ListAdaptersRequest& request) const;
  absl::StatusOr<v1::Adapter> GetAdapter(const v1::GetAdapterRequest& request) const;

  /// The experiment layer every prediction resolves against (the ExperimentController, which
  /// is created after the FleetApi). Call before serving; null = no experiments.
  void SetExperimentLayer(const ExperimentLayer* experiments) { experiments_ = experiments; }

  /// Creates or replaces a policy; the affected adapters are predicted with the experiment
  /// layer, as if experiment `ended` were over (promotion; empty: none). InvalidArgument for an
  /// invalid policy (the agent's rules, common/policy ValidatePolicy), description over 1024
  /// characters or labels and annotations over their bounds (server/api/metadata_bounds.h);
  /// FailedPrecondition, storing nothing, when a host's bundle would then exceed
  /// max_bundle_bytes (server/api/bundle_limit.h; also for dry runs); Aborted for a stale
  /// metadata.resource_version (empty = unconditional); store errors (Unavailable,
  /// ResourceExhausted, FailedPrecondition, Internal) with SQLite's reason.
  absl::StatusOr<v1::ApplyPolicyResponse> ApplyPolicy(const v1::ApplyPolicyRequest& request,
                                                      const Caller& caller,
                                                      std::string_view ended = {});
  absl::StatusOr<v1::Policy> GetPolicy(const v1::GetPolicyRequest& request) const;
  absl::StatusOr<v1::ListPoliciesResponse> ListPolicies(
      const v1::ListPoliciesRequest& request) const;
  /// NotFound if unknown; Aborted if resource_version is set and stale; store errors.
  absl::StatusOr<v1::DeletePolicyResponse> DeletePolicy(const v1::DeletePolicyRequest& request,
                                                        const Caller& caller);

  absl::StatusOr<v1::ExplainAdapterResponse> ExplainAdapter(
      const v1::ExplainAdapterRequest& request) const;

  absl::StatusOr<v1::ListEventsResponse> ListEvents(const v1::ListEventsRequest& request) const;

  /// A new bundle version with the same policies, for changes outside the policies
  /// (experiment assignments): committed to the store, then to the policy set, then pushed
  /// like a policy change, serialised with policy writes. Store errors as ApplyPolicy.
  absl::Status BumpBundleVersion();

  /// The registry's adapters (GONE excluded), for checks at the API boundary.
  std::vector<v1::Adapter> RegisteredAdapters() const;

 private:
  /// `policy` with its status over `adapters` (the registry's, not GONE).
  v1::Policy WithStatus(const v1::Policy& policy, const PolicySnapshot& snapshot,
                        const std::vector<v1::Adapter>& adapters) const;
  void Audit(const Caller& caller, std::string_view action, std::string_view policy,
             std::string_view old_version, std::string_view new_version, bool dry_run,
             const absl::Status& result);

  const FleetApiDeps deps_;
  const ExperimentLayer* experiments_ = nullptr;
  absl::Mutex write_mu_;  // serialises policy writes (store order == in-memory order)
};

}  // namespace rxfleet::server
