#include "cli/client/paging.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::cli {
namespace {

// Calls `list` page by page; `take` moves the items of one response into the result.
template <typename Item, typename Request, typename ListFn, typename TakeFn>
absl::StatusOr<std::vector<Item>> ListAll(Request request, ListFn list, TakeFn take,
                                          absl::string_view what) {
  std::vector<Item> items;
  request.set_page_token("");
  while (true) {
    auto response = list(request);
    if (!response.ok()) return response.status();
    take(*response, items);
    const std::string& next = response->next_page_token();
    if (next.empty()) return items;
    if (next == request.page_token()) {
      return absl::InternalError(
          absl::StrCat("server returned the same ", what, " page token twice: '", next, "'"));
    }
    request.set_page_token(next);
  }
}

template <typename Item, typename Repeated>
void Append(Repeated* from, std::vector<Item>& to) {
  for (auto& item : *from) to.push_back(std::move(item));
}

}  // namespace

absl::StatusOr<std::vector<v1::Host>> ListAllHosts(FleetClient& client,
                                                   v1::ListHostsRequest request) {
  return ListAll<v1::Host>(
      std::move(request), [&](const v1::ListHostsRequest& r) { return client.ListHosts(r); },
      [](v1::ListHostsResponse& r, std::vector<v1::Host>& out) { Append(r.mutable_hosts(), out); },
      "host");
}

absl::StatusOr<std::vector<v1::Adapter>> ListAllAdapters(FleetClient& client,
                                                         v1::ListAdaptersRequest request) {
  return ListAll<v1::Adapter>(
      std::move(request), [&](const v1::ListAdaptersRequest& r) { return client.ListAdapters(r); },
      [](v1::ListAdaptersResponse& r, std::vector<v1::Adapter>& out) {
        Append(r.mutable_adapters(), out);
      },
      "adapter");
}

absl::StatusOr<std::vector<v1::Policy>> ListAllPolicies(FleetClient& client,
                                                        v1::ListPoliciesRequest request) {
  return ListAll<v1::Policy>(
      std::move(request), [&](const v1::ListPoliciesRequest& r) { return client.ListPolicies(r); },
      [](v1::ListPoliciesResponse& r, std::vector<v1::Policy>& out) {
        Append(r.mutable_policies(), out);
      },
      "policy");
}

absl::StatusOr<std::vector<v1::Experiment>> ListAllExperiments(FleetClient& client,
                                                               v1::ListExperimentsRequest request) {
  return ListAll<v1::Experiment>(
      std::move(request),
      [&](const v1::ListExperimentsRequest& r) { return client.ListExperiments(r); },
      [](v1::ListExperimentsResponse& r, std::vector<v1::Experiment>& out) {
        Append(r.mutable_experiments(), out);
      },
      "experiment");
}

absl::StatusOr<std::vector<v1::HoldTuning>> ListAllHoldTunings(FleetClient& client,
                                                               v1::ListHoldTuningsRequest request) {
  return ListAll<v1::HoldTuning>(
      std::move(request),
      [&](const v1::ListHoldTuningsRequest& r) { return client.ListHoldTunings(r); },
      [](v1::ListHoldTuningsResponse& r, std::vector<v1::HoldTuning>& out) {
        Append(r.mutable_tunings(), out);
      },
      "hold tuning");
}

absl::StatusOr<std::vector<v1::Event>> ListRecentEvents(FleetClient& client,
                                                        v1::ListEventsRequest request,
                                                        size_t max_events) {
  auto events = ListAll<v1::Event>(
      std::move(request), [&](const v1::ListEventsRequest& r) { return client.ListEvents(r); },
      [max_events](v1::ListEventsResponse& r, std::vector<v1::Event>& out) {
        Append(r.mutable_events(), out);
        // Keep memory bounded on long histories: only the newest max_events matter.
        if (out.size() > max_events) {
          out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(max_events));
        }
      },
      "event");
  return events;
}

}  // namespace rxfleet::cli
