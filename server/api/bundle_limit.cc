#include "server/api/bundle_limit.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
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
