#pragma once

// What the server expects of adapters, computed with the shared precedence
// (common/policy/precedence.h) over the experiment layer (the running experiments' arms, from
// an ExperimentLayer), the server's policies and the built-in default: expected settings with
// provenance, why a policy does or does not match, which adapters a policy change affects,
// policy statuses and ExplainAdapter. Every function taking an ExperimentLayer accepts null
// (no experiments). The server never touches registers; it compares these expectations with
// what agents report.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/policy/policy.h"
#include "common/policy/precedence.h"
#include "common/policy/resolver.h"
#include "common/policy/selectors.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "server/experiments/experiment_layer.h"
#include "server/registry/policy_set.h"

namespace rxfleet::server {

/// True for adapters whose RX aggregation an agent manages: not GONE, UNSUPPORTED,
/// STORAGE_MODE, IGNORED_OTHER_VENDOR, NO_DRIVER or OBSERVED (observe-only chip family).
bool IsManaged(const v1::Adapter& adapter);

/// Selector attributes of a registry adapter (host labels from its metadata.labels).
common::AdapterAttributes AttributesOf(const v1::Adapter& adapter);

/// The experiment layer for `adapter` under `policies` (skipping experiment `ended`), server
/// policies and the built-in default, resolved for one adapter; origins carry
/// `bundle_version`.
common::LayeredSettings ExpectedSettings(const common::AdapterAttributes& adapter,
                                         const std::vector<common::Policy>& policies,
                                         const ExperimentLayer* experiments,
                                         uint64_t bundle_version = 0, std::string_view ended = {});

/// `expected` as EffectiveSettings, provenance with the deciding policy's or experiment's
/// priority and bundle version, and server policies' generation from `snapshot`.
v1::EffectiveSettings ExpectedToProto(const common::LayeredSettings& expected,
                                      const PolicySnapshot& snapshot);

/// Why `selector` does not match `adapter`, e.g. "usb_speeds [super, super_plus] do not include
/// high"; empty if it matches.
std::string MismatchReason(const common::Selector& selector,
                           const common::AdapterAttributes& adapter);

/// Managed adapters whose server-expected settings (ExpectedSettings, experiments included:
/// a policy an experiment outranks changes nothing while it runs, one that outranks the
/// experiment takes the adapter out of it) differ between the policy sets `before` and
/// `after`, with both settings, ordered like `adapters`. `changed` are the selectors of the
/// policies that differ between the two sets (old and new versions): only adapters one of them
/// matches can change, so the others are not resolved at all. `ended`: predict as if that
/// experiment were over (promotion).
std::vector<v1::AffectedAdapter> AffectedAdapters(
    const std::vector<v1::Adapter>& adapters, const std::vector<common::Policy>& before,
    const std::vector<common::Policy>& after, const std::vector<const common::Selector*>& changed,
    const ExperimentLayer* experiments, std::string_view ended = {});

/// PolicyStatus of the policies of `snapshot` over the managed `adapters`: matched and
/// effective adapter counts (effective: the policy decides at least one field after the
/// experiment layer), conditions `Valid` and `Shadowed`. With `only`, just that policy (and
/// only the adapters it matches are resolved).
std::map<std::string, v1::PolicyStatus> PolicyStatuses(const PolicySnapshot& snapshot,
                                                       const std::vector<v1::Adapter>& adapters,
                                                       const ExperimentLayer* experiments,
                                                       const std::string* only = nullptr);

/// The ExplainAdapter answer for `adapter` of `host`, with its experiment assignment.
v1::ExplainAdapterResponse Explain(const v1::Adapter& adapter, const v1::Host& host,
                                   const PolicySnapshot& snapshot,
                                   const ExperimentLayer* experiments);

}  // namespace rxfleet::server
