#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/client/fleet_client.h"

namespace rxfleet::cli {

// Every list call pages with the server's default page size until next_page_token is empty.
// A server that hands back the token it was given is a broken server: Internal, not a loop.

/// All hosts matching the request's selectors, in server order (by name).
absl::StatusOr<std::vector<v1::Host>> ListAllHosts(FleetClient& client,
                                                   v1::ListHostsRequest request);

/// All adapters matching the request's selectors, in server order (by host, then id).
absl::StatusOr<std::vector<v1::Adapter>> ListAllAdapters(FleetClient& client,
                                                         v1::ListAdaptersRequest request);

/// All policies matching the request's label selector, in server order (by name).
absl::StatusOr<std::vector<v1::Policy>> ListAllPolicies(FleetClient& client,
                                                        v1::ListPoliciesRequest request);

/// All experiments matching the request's label selector and phase, in server order (newest
/// first).
absl::StatusOr<std::vector<v1::Experiment>> ListAllExperiments(FleetClient& client,
                                                               v1::ListExperimentsRequest request);

/// All hold tunings, in server order (newest first).
absl::StatusOr<std::vector<v1::HoldTuning>> ListAllHoldTunings(FleetClient& client,
                                                               v1::ListHoldTuningsRequest request);

/// The newest `max_events` events matching the request's filters, oldest first.
absl::StatusOr<std::vector<v1::Event>> ListRecentEvents(FleetClient& client,
                                                        v1::ListEventsRequest request,
                                                        size_t max_events);

}  // namespace rxfleet::cli
