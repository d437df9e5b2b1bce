#pragma once

// Refusal, at the API boundary, of RX aggregation settings aimed at observe-only chip families
// (rtw88, mt76: common/chips/family.h). Agents never write those adapters whatever a bundle
// says; the server says so to the operator instead of accepting a policy or experiment that
// would silently do nothing there.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/policy/policy.h"
#include "rxfleet/v1/adapter.pb.h"

namespace rxfleet::server {

/// True for adapters whose status names an observe-only family (status.family rtw88 or mt76).
bool IsObserveOnly(const v1::Adapter& adapter);

/// The reason an observe-only adapter cannot take a hold, e.g. "observe-only chip family mt76
/// (mt7921au): rxfleet reads its RX aggregation registers and never writes them".
std::string ObserveOnlyReason(const v1::Adapter& adapter);

/// The registered adapters `selector` matches that are observe-only (by the adapter's own
/// attributes and its host labels, common::Matches), in the order given.
std::vector<const v1::Adapter*> ObserveOnlyMatches(const common::Selector& selector,
                                                   const std::vector<v1::Adapter>& adapters);

/// FailedPrecondition when `what` (e.g. "policy 'mt-hold'") sets RX aggregation settings and
/// either its selector lists an observe-only family or it matches observe-only adapters; the
/// message names the families and up to 20 adapters as HOST/ADAPTER (and how many more), and
/// says how to narrow the selector. OK otherwise.
absl::Status RefuseSettingsOnObserveOnly(std::string_view what, const common::Selector& selector,
                                         const std::vector<v1::Adapter>& adapters);

}  // namespace rxfleet::server
