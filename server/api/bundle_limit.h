#pragma once

// The bundle size bound at the API. Every host gets one ServerMessage per bundle: the shared
// body (every server policy as agents receive it, server/registry/policy_set.h BundlePolicy),
// the host's experiment assignments and probe slots (server/api/probe_slot_table.h) and the
// nonce (server/api/bundle_message.h). An agent
// cannot receive a message over its limit (common::kMaxServerMessageBytes): it would reconnect
// in a loop and never converge. So ApplyPolicy (also from PromoteExperiment) and
// CreateExperiment compute the message size each host would get after the change and refuse
// the change, storing nothing, when one would not fit.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/policy/policy.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "server/experiments/experiment_layer.h"
#include "server/registry/policy_set.h"

namespace rxfleet::server {

/// Host id -> bytes of the host's own fields: experiment assignments and probe slots
/// (PolicyBundle field 4 and 6 entries).
using HostFieldBytes = std::map<std::string, size_t>;

/// Adds the entry of `assignment` to the bytes of host `host_id`.
void AddAssignmentBytes(HostFieldBytes& hosts, const std::string& host_id,
                        const v1::ExperimentAssignment& assignment);

/// The assignment bytes of every host of `adapters` if the server's policies were `policies`
/// (ExperimentLayer::AssignmentFor, skipping experiment `ended`); empty without experiments.
HostFieldBytes AssignmentBytesOf(const std::vector<v1::Adapter>& adapters,
                                 const ExperimentLayer* experiments,
                                 const std::vector<common::Policy>& policies,
                                 std::string_view ended = {});

/// Adds the bytes of the probe slots (PolicyBundle field 6 entries) every host of `adapters`
/// would get if the server's valid policies were `policies`: one entry for each adapter of a
/// host that runs probes (`can_probe(host_id)`) whose probe a policy of `policies` decides
/// (common::ResolveProbe over the server layer, as the plan, server/registry/probe_slots.h),
/// counted with the largest offset the probe's interval allows, so exact or above by a few
/// bytes whatever sequence numbers the plan gives.
void AddProbeSlotBytes(HostFieldBytes& hosts, const std::vector<v1::Adapter>& adapters,
                       const std::vector<common::Policy>& policies,
                       const std::function<bool(const std::string&)>& can_probe);

/// The most probe slot bytes (AddProbeSlotBytes) any host gains from `before` to `after`; 0
/// when none gains.
size_t MostProbeSlotBytesAdded(const HostFieldBytes& before, const HostFieldBytes& after);

/// Bytes of the shared bundle body of `before` with policy `policy` (as an operator sent it)
/// stored in place of the policy of that name (or added). The metadata the store assigns
/// (uid, resource version, generation, times) is counted at its largest, so the result is
/// exact or above by a few bytes.
size_t BodyBytesWith(const PolicySnapshot& before, const v1::Policy& policy);

/// OK if the change adds nothing (`change_bytes` <= 0: a change that shrinks the bundle is
/// never refused) or the message of every host fits in `limit_bytes`: BundleMessageBytes(
/// body_bytes, bytes of the host) for each host of `hosts`, and for a host without
/// assignments. `change` names the change in the message ("policy 'x'", "experiment 'y'") and
/// `change_bytes` says how much it adds. FailedPrecondition otherwise, e.g.:
///   "policy 'big' would make the bundle agents receive 4194400 bytes (host pi-1), over their
///    limit of 4194304 bytes by 96 bytes; the change adds 200000 bytes. Shrink or delete
///    policies, or stop experiments, first"
absl::Status CheckBundleFits(std::string_view change, size_t body_bytes,
                             const HostFieldBytes& hosts, int64_t change_bytes, size_t limit_bytes);

}  // namespace rxfleet::server
