#include "server/store/records.h"

#include "absl/base/const_init.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/store/store.h"

namespace rxfleet::server::store_records {
namespace {

using google::protobuf::util::MessageDifferencer;

constexpr char kSegmentSeparator = '\x1f';

bool SameLabelsAndAnnotations(const v1::ObjectMeta& a, const v1::ObjectMeta& b) {
  v1::ObjectMeta only_a, only_b;
  *only_a.mutable_labels() = a.labels();
  *only_a.mutable_annotations() = a.annotations();
  *only_b.mutable_labels() = b.labels();
  *only_b.mutable_annotations() = b.annotations();
  return MessageDifferencer::Equals(only_a, only_b);
}

}  // namespace

std::string NewUid() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(*gen),
                         absl::Uniform<uint64_t>(*gen));
}

absl::Status CheckPolicyPrecondition(const v1::Policy* stored, const v1::Policy& requested) {
  const std::string& expected = requested.metadata().resource_version();
  if (expected.empty() ||
      (stored != nullptr && stored->metadata().resource_version() == expected)) {
    return absl::OkStatus();
  }
  return PolicyPreconditionFailed(
      requested.metadata().name(),
      stored != nullptr ? &stored->metadata().resource_version() : nullptr, expected);
}

PolicyChange ComparePolicy(const v1::Policy* stored, const v1::Policy& requested) {
  if (stored == nullptr) return {true, true};
  return {!MessageDifferencer::Equals(stored->spec(), requested.spec()),
          !SameLabelsAndAnnotations(stored->metadata(), requested.metadata())};
}

v1::Policy StoredPolicy(const v1::Policy* stored, const v1::Policy& requested,
                        const PolicyChange& change, int64_t revision, absl::Time now) {
  v1::Policy out;
  v1::ObjectMeta* meta = out.mutable_metadata();
  meta->set_name(requested.metadata().name());
  *meta->mutable_labels() = requested.metadata().labels();
  *meta->mutable_annotations() = requested.metadata().annotations();
  meta->set_resource_version(absl::StrCat(revision));
  if (stored != nullptr) {
    meta->set_uid(stored->metadata().uid());
    meta->set_generation(stored->metadata().generation() + (change.spec_changed ? 1 : 0));
    *meta->mutable_create_time() = stored->metadata().create_time();
  } else {
    meta->set_uid(NewUid());
    meta->set_generation(1);
    *meta->mutable_create_time() = common::TimeToProto(now);
  }
  *meta->mutable_update_time() = common::TimeToProto(now);
  *out.mutable_spec() = requested.spec();
  return out;
}

v1::Experiment NewExperiment(const v1::Experiment& requested, int64_t revision, absl::Time now) {
  v1::Experiment out = requested;
  v1::ObjectMeta* meta = out.mutable_metadata();
  meta->set_uid(NewUid());
  meta->set_generation(1);
  meta->set_resource_version(absl::StrCat(revision));
  *meta->mutable_create_time() = common::TimeToProto(now);
  *meta->mutable_update_time() = common::TimeToProto(now);
  return out;
}

std::string JoinSegment(const std::vector<std::string>& segment) {
  return absl::StrJoin(segment, std::string(1, kSegmentSeparator));
}

std::vector<std::string> SplitSegment(std::string_view joined, int64_t count) {
  if (count <= 0) return {};
  return absl::StrSplit(common::ToAbslView(joined), kSegmentSeparator);
}

bool SessionHolds(const HostRecord& record, const StoredSession* stored) {
  if (record.session_replica.empty()) return true;
  return stored != nullptr && stored->replica == record.session_replica &&
         stored->epoch == record.session_epoch;
}

absl::Status ValidateLeaseRequest(std::string_view name, std::string_view holder,
                                  absl::Duration ttl) {
  constexpr size_t kMaxLength = 256;
  if (name.empty() || name.size() > kMaxLength || holder.empty() || holder.size() > kMaxLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease name and holder must be 1..", kMaxLength, " bytes"));
  }
  if (ttl < kMinLeaseTtl || ttl > kMaxLeaseTtl) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease ttl ", absl::FormatDuration(ttl), " is out of range ",
                     absl::FormatDuration(kMinLeaseTtl), "..", absl::FormatDuration(kMaxLeaseTtl)));
  }
  return absl::OkStatus();
}

absl::Status LeaseLost(const LeaseFence& fence) {
  return absl::AbortedError(absl::StrCat("lease ", fence.name, " is no longer held by ",
                                         fence.holder, " at epoch ", fence.epoch,
                                         "; the job stops here and its new holder takes over"));
}

}  // namespace rxfleet::server::store_records
