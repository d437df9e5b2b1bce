#pragma once

// What the server expects of adapters, computed with the shared resolver (common/policy) from
// the server's policies and the built-in default: expected settings with provenance, why a
// policy does or does not match, which adapters a policy change affects, policy statuses and
// ExplainAdapter. The server never touches registers; it compares these expectations with
// what agents report.

#include <map>
#include <string>
#include <vector>

#include "common/policy/policy.h"
#include "common/policy/resolver.h"
#include "common/policy/selectors.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "server/registry/policy_set.h"

namespace rxfleet::server {

/// True for adapters whose RX aggregation an agent manages: not GONE, UNSUPPORTED,
/// STORAGE_MODE, IGNORED_OTHER_VENDOR, NO_DRIVER or OBSERVED (observe-only chip family).
bool IsManaged(const v1::Adapter& adapter);

/// Selector attributes of a registry adapter (host labels from its metadata.labels).
common::AdapterAttributes AttributesOf(const v1::Adapter& adapter);

/// Server policies + built-in default, resolved for one adapter.
common::ResolvedSettings ExpectedSettings(const common::AdapterAttributes& adapter,
                                          const std::vector<common::Policy>& policies);

/// `resolved` as EffectiveSettings, provenance completed with the deciding policy's priority,
/// generation and the bundle version of `snapshot` (server policies).
v1::EffectiveSettings ExpectedToProto(const common::ResolvedSettings& resolved,
                                      const PolicySnapshot& snapshot);

/// Why `selector` does not match `adapter`, e.g. "usb_speeds [super, super_plus] do not include
/// high"; empty if it matches.
std::string MismatchReason(const common::Selector& selector,
                           const common::AdapterAttributes& adapter);

/// Managed adapters whose server-expected settings differ between the policy sets `before`
/// and `after`, with both settings, ordered like `adapters`. `changed` are the selectors of the
/// policies that differ between the two sets (old and new versions): only adapters one of them
/// matches can change, so the others are not resolved at all.
std::vector<v1::AffectedAdapter> AffectedAdapters(
    const std::vector<v1::Adapter>& adapters, const std::vector<common::Policy>& before,
    const std::vector<common::Policy>& after, const std::vector<const common::Selector*>& changed);

/// PolicyStatus of the policies of `snapshot` over the managed `adapters`: matched and
/// effective adapter counts, conditions `Valid` and `Shadowed`. With `only`, just that policy
/// (and only the adapters it matches are resolved).
std::map<std::string, v1::PolicyStatus> PolicyStatuses(const PolicySnapshot& snapshot,
                                                       const std::vector<v1::Adapter>& adapters,
                                                       const std::string* only = nullptr);

/// The ExplainAdapter answer for `adapter` of `host`.
v1::ExplainAdapterResponse Explain(const v1::Adapter& adapter, const v1::Host& host,
                                   const PolicySnapshot& snapshot);

}  // namespace rxfleet::server
