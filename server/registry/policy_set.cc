#include "server/registry/policy_set.h"

#include <utility>

#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "rxfleet/v1/agent_service.pb.h"

namespace rxfleet::server {

v1::Policy BundlePolicy(const v1::Policy& stored) {
  v1::Policy out = stored;
  out.mutable_metadata()->clear_annotations();
  out.clear_status();
  return out;
}

std::shared_ptr<const BundleBody> PolicySnapshot::Bundle() const {
  std::call_once(bundle_once_, [this] {
    v1::PolicyBundle bundle;
    bundle.set_version(bundle_version);
    for (const auto& [name, policy] : policies) *bundle.add_policies() = BundlePolicy(policy);
    *bundle.mutable_create_time() = common::TimeToProto(absl::Now());
    auto body = std::make_shared<BundleBody>();
    body->version = bundle_version;
    body->policy_count = policies.size();
    bundle.SerializeToString(&body->bytes);
    bundle_ = std::move(body);
  });
  return bundle_;
}

PolicySet::PolicySet(const std::vector<v1::Policy>& stored, uint64_t bundle_version) {
  std::map<std::string, v1::Policy> policies;
  for (const v1::Policy& policy : stored) policies[policy.metadata().name()] = policy;
  current_ = Rebuild(std::move(policies), bundle_version);
}

std::shared_ptr<PolicySnapshot> PolicySet::Rebuild(std::map<std::string, v1::Policy> policies,
                                                   uint64_t bundle_version) {
  auto snapshot = std::make_shared<PolicySnapshot>();
  snapshot->bundle_version = bundle_version;
  for (const auto& [name, policy] : policies) {
    absl::StatusOr<common::Policy> converted = common::PolicyFromProto(policy, "server");
    if (converted.ok()) {
      snapshot->valid.push_back(*std::move(converted));
    } else {
      snapshot->invalid[name] = std::string(converted.status().message());
    }
  }
  snapshot->policies = std::move(policies);
  return snapshot;
}

std::shared_ptr<const PolicySnapshot> PolicySet::snapshot() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void PolicySet::Put(const v1::Policy& stored, uint64_t bundle_version) {
  absl::MutexLock lock(&mu_);
  if (bundle_version < current_->bundle_version) return;
  std::map<std::string, v1::Policy> policies = current_->policies;
  v1::Policy& slot = policies[stored.metadata().name()];
  slot = stored;
  slot.clear_status();
  current_ = Rebuild(std::move(policies), bundle_version);
}

void PolicySet::SetVersion(uint64_t bundle_version) {
  absl::MutexLock lock(&mu_);
  if (bundle_version <= current_->bundle_version) return;
  current_ = Rebuild(current_->policies, bundle_version);
}

bool PolicySet::Replace(const std::vector<v1::Policy>& stored, uint64_t bundle_version) {
  std::map<std::string, v1::Policy> policies;
  for (const v1::Policy& policy : stored) {
    v1::Policy& slot = policies[policy.metadata().name()];
    slot = policy;
    slot.clear_status();
  }
  absl::MutexLock lock(&mu_);
  if (bundle_version <= current_->bundle_version) return false;
  current_ = Rebuild(std::move(policies), bundle_version);
  return true;
}

void PolicySet::Remove(std::string_view name, uint64_t bundle_version) {
  absl::MutexLock lock(&mu_);
  if (bundle_version < current_->bundle_version) return;
  std::map<std::string, v1::Policy> policies = current_->policies;
  policies.erase(std::string(name));
  current_ = Rebuild(std::move(policies), bundle_version);
}

}  // namespace rxfleet::server
