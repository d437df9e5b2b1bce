#include "server/api/bundle_limit.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/policy/resolver.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/api/bundle_message.h"
#include "server/api/explain.h"

namespace rxfleet::server {

void AddAssignmentBytes(HostFieldBytes& hosts, const std::string& host_id,
                        const v1::ExperimentAssignment& assignment) {
  hosts[host_id] += RepeatedEntryBytes(assignment.ByteSizeLong());
}

HostFieldBytes AssignmentBytesOf(const std::vector<v1::Adapter>& adapters,
                                 const ExperimentLayer* experiments,
                                 const std::vector<common::Policy>& policies,
                                 std::string_view ended) {
  HostFieldBytes hosts;
  if (experiments == nullptr) return hosts;
  for (const v1::Adapter& adapter : adapters) {
    if (std::optional<v1::ExperimentAssignment> assignment =
            experiments->AssignmentFor(AttributesOf(adapter), policies, ended)) {
      AddAssignmentBytes(hosts, adapter.host_id(), *assignment);
    }
  }
  return hosts;
}

void AddProbeSlotBytes(HostFieldBytes& hosts, const std::vector<v1::Adapter>& adapters,
                       const std::vector<common::Policy>& policies,
                       const std::function<bool(const std::string&)>& can_probe) {
  if (std::none_of(policies.begin(), policies.end(),
                   [](const common::Policy& p) { return p.probe.has_value(); })) {
    return;
  }
  const common::PolicyLayer layers[] = {{common::PolicySource::kServerPolicy, &policies}};
  std::string last_host;
  bool last_can_probe = false;
  for (const v1::Adapter& adapter : adapters) {
    if (adapter.host_id() != last_host || last_host.empty()) {
      last_host = adapter.host_id();
      last_can_probe = can_probe(last_host);
    }
    if (!last_can_probe) continue;
    std::optional<common::Resolved<common::ProbeSpec>> probe =
        common::ResolveProbe(AttributesOf(adapter), layers);
    if (!probe.has_value()) continue;
    v1::ProbeSlot slot;
    slot.set_adapter_id(adapter.metadata().name());
    slot.set_policy(probe->provenance.name);
    // The largest offset below the interval: its whole seconds and 999999999 ns.
    *slot.mutable_offset() =
        common::DurationToProto(absl::Seconds(absl::ToInt64Seconds(probe->value.interval)));
    slot.mutable_offset()->set_nanos(999'999'999);
    hosts[adapter.host_id()] += RepeatedEntryBytes(slot.ByteSizeLong());
  }
}

size_t MostProbeSlotBytesAdded(const HostFieldBytes& before, const HostFieldBytes& after) {
  size_t most = 0;
  for (const auto& [host, bytes] : after) {
    auto it = before.find(host);
    const size_t was = it == before.end() ? 0 : it->second;
    if (bytes > was) most = std::max(most, bytes - was);
  }
  return most;
}

size_t BodyBytesWith(const PolicySnapshot& before, const v1::Policy& policy) {
  size_t body = before.Bundle()->bytes.size();
  const std::string& name = policy.metadata().name();
  auto existing = before.policies.find(name);
  if (existing != before.policies.end()) {
    body -= RepeatedEntryBytes(BundlePolicy(existing->second).ByteSizeLong());
  }
  v1::Policy stored = BundlePolicy(policy);
  v1::ObjectMeta* meta = stored.mutable_metadata();
  meta->set_uid(std::string(32, 'f'));               // NewUid: 32 hex digits
  meta->set_resource_version(std::string(20, '9'));  // the largest uint64 in decimal
  meta->set_generation(std::numeric_limits<int64_t>::max());
  for (google::protobuf::Timestamp* time :
       {meta->mutable_create_time(), meta->mutable_update_time()}) {
    time->set_seconds(std::numeric_limits<int64_t>::max() / 2);
    time->set_nanos(999'999'999);
  }
  return body + RepeatedEntryBytes(stored.ByteSizeLong());
}

absl::Status CheckBundleFits(std::string_view change, size_t body_bytes,
                             const HostFieldBytes& hosts, int64_t change_bytes,
                             size_t limit_bytes) {
  if (change_bytes <= 0) return absl::OkStatus();
  std::string largest_host;
  size_t largest = BundleMessageBytes(body_bytes, 0);
  for (const auto& [host, bytes] : hosts) {
    const size_t message = BundleMessageBytes(body_bytes, bytes);
    if (message > largest) {
      largest = message;
      largest_host = host;
    }
  }
  if (largest <= limit_bytes) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(common::ToAbslView(change), " would make the bundle agents receive ", largest,
                   " bytes", largest_host.empty() ? "" : absl::StrCat(" (host ", largest_host, ")"),
                   ", over their limit of ", limit_bytes, " bytes by ", largest - limit_bytes,
                   " bytes; the change adds ", change_bytes,
                   " bytes. Shrink or delete policies, or stop experiments, first"));
}

}  // namespace rxfleet::server
