#include "server/store/records.h"

#include <algorithm>
#include <iterator>

#include "absl/base/const_init.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
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

// A new uid, generation 1, resource_version = `revision`, create_time = update_time = `now`.
template <typename Resource>
Resource NewResource(const Resource& requested, int64_t revision, absl::Time now) {
  Resource out = requested;
  v1::ObjectMeta* meta = out.mutable_metadata();
  meta->set_uid(NewUid());
  meta->set_generation(1);
  meta->set_resource_version(absl::StrCat(revision));
  *meta->mutable_create_time() = common::TimeToProto(now);
  *meta->mutable_update_time() = common::TimeToProto(now);
  return out;
}

}  // namespace

absl::Status CheckImportTarget(std::string_view database, const std::vector<int64_t>& row_counts,
                               int64_t revision, int64_t last_event_version) {
  std::vector<std::string> held;
  for (size_t i = 0; i < row_counts.size() && i < std::size(kImportedTables); ++i) {
    if (row_counts[i] > 0) held.push_back(absl::StrCat(row_counts[i], " in ", kImportedTables[i]));
  }
  if (revision > 0) held.push_back(absl::StrCat("revision ", revision));
  if (last_event_version > 0) {
    held.push_back(absl::StrCat("last event version ", last_event_version));
  }
  if (held.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("database ", common::ToAbslView(database),
                                                    " is not empty (", absl::StrJoin(held, ", "),
                                                    "); import only into a new, empty database"));
}

absl::StatusOr<SnapshotVersions> CheckSnapshot(const StoreSnapshot& snapshot) {
  if (snapshot.state.bundle_version == 0) {
    return absl::InvalidArgumentError("the snapshot's bundle version is 0 (it starts at 1)");
  }
  SnapshotVersions versions;
  const auto parse = [](const char* kind, const v1::ObjectMeta& meta,
                        std::vector<int64_t>* out) -> absl::Status {
    int64_t version = 0;
    if (!absl::SimpleAtoi(meta.resource_version(), &version) || version <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(kind, " ", meta.name(),
                                                     " has no numeric resource version ('",
                                                     meta.resource_version(), "')"));
    }
    out->push_back(version);
    return absl::OkStatus();
  };
  for (const v1::Policy& policy : snapshot.state.policies) {
    if (absl::Status s = parse("policy", policy.metadata(), &versions.policies); !s.ok()) return s;
  }
  for (const v1::Event& event : snapshot.state.events) {
    if (absl::Status s = parse("event", event.metadata(), &versions.events); !s.ok()) return s;
  }
  std::vector<int64_t> experiments;
  for (const v1::Experiment& experiment : snapshot.experiments) {
    if (absl::Status s = parse("experiment", experiment.metadata(), &experiments); !s.ok()) {
      return s;
    }
  }
  std::vector<int64_t> tunings;
  for (const v1::HoldTuning& tuning : snapshot.tunings) {
    if (absl::Status s = parse("hold tuning", tuning.metadata(), &tunings); !s.ok()) return s;
  }
  versions.revision = static_cast<int64_t>(snapshot.state.revision);
  for (const std::vector<int64_t>* list : {&versions.policies, &experiments, &tunings}) {
    for (int64_t version : *list) versions.revision = std::max(versions.revision, version);
  }
  versions.last_event_version = static_cast<int64_t>(snapshot.state.last_event_version);
  for (int64_t version : versions.events) {
    versions.last_event_version = std::max(versions.last_event_version, version);
  }
  return versions;
}

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
  return NewResource(requested, revision, now);
}

v1::HoldTuning NewTuning(const v1::HoldTuning& requested, int64_t revision, absl::Time now) {
  return NewResource(requested, revision, now);
}

v1::Event VersionedEvent(const v1::Event& event, int64_t version) {
  v1::Event out = event;
  v1::ObjectMeta* meta = out.mutable_metadata();
  meta->set_resource_version(absl::StrCat(version));
  if (meta->name().empty()) {
    meta->set_name(absl::StrCat("ev-", version));
    meta->set_uid(meta->name());
  }
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
