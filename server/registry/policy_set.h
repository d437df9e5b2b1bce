#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/policy/policy.h"
#include "rxfleet/v1/policy.pb.h"

namespace rxfleet::server {

/// A PolicyBundle serialised once for one bundle version, without its nonce: every stream
/// shares these bytes and adds its own nonce field (see server/api/bundle_message.h).
struct BundleBody {
  uint64_t version = 0;
  /// Serialised rxfleet.v1.PolicyBundle with version, policies (as BundlePolicy) and
  /// create_time set.
  std::string bytes;
  size_t policy_count = 0;
};

/// `stored` as agents receive it in a bundle: metadata and spec without annotations (notes for
/// operators, never used by agents; they would only make bundles larger) and without status.
v1::Policy BundlePolicy(const v1::Policy& stored);

/// One immutable state of the server's policies.
struct PolicySnapshot {
  /// Bundle version of this state (>= 1).
  uint64_t bundle_version = 0;
  /// Stored policies by name (metadata and spec; status empty).
  std::map<std::string, v1::Policy> policies;
  /// The policies that pass ValidatePolicy, converted for the resolver, ordered by name.
  std::vector<common::Policy> valid;
  /// Stored policies that fail validation (possible only when they were written bypassing the
  /// API, or validation rules changed): name -> reason. They are still pushed, and agents NACK
  /// the bundle with the same reason.
  std::map<std::string, std::string> invalid;

  /// The bundle body of this state, serialised on first use and then shared.
  std::shared_ptr<const BundleBody> Bundle() const;

 private:
  mutable std::once_flag bundle_once_;
  mutable std::shared_ptr<const BundleBody> bundle_;
};

/// The server's policies in memory, mirroring the store after each committed write. Readers
/// take an immutable snapshot (cheap: one shared_ptr copy); writers replace it. Thread-safe.
class PolicySet {
 public:
  /// The store's policies and bundle version.
  PolicySet(const std::vector<v1::Policy>& stored, uint64_t bundle_version);

  /// The current state.
  std::shared_ptr<const PolicySnapshot> snapshot() const;

  /// After a committed create/update: `stored` as the store returned it, and the bundle
  /// version of that write. Versions never go backwards: an older version is ignored.
  void Put(const v1::Policy& stored, uint64_t bundle_version);
  /// After a committed bundle version bump that changed no policy (experiment assignments
  /// changed): the same policies under `bundle_version`. Older versions are ignored.
  void SetVersion(uint64_t bundle_version);
  /// After a committed delete.
  void Remove(std::string_view name, uint64_t bundle_version);
  /// After reading the store's configuration (Store::LoadConfig), e.g. when another process
  /// changed it: every policy replaced by `stored` under `bundle_version`. A bundle version
  /// names one committed state, so a version not newer than the current one is ignored.
  /// Returns whether the state changed.
  bool Replace(const std::vector<v1::Policy>& stored, uint64_t bundle_version);

 private:
  static std::shared_ptr<PolicySnapshot> Rebuild(std::map<std::string, v1::Policy> policies,
                                                 uint64_t bundle_version);

  mutable absl::Mutex mu_;
  std::shared_ptr<const PolicySnapshot> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::server
