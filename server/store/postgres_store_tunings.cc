// The PostgreSQL store (server/store/postgres_store.h): hold tunings. Their metric windows are
// in metric_windows under the tuning's name, beside the experiments'
// (postgres_store_experiments.cc): tunings and experiments share one name namespace. Every
// write takes the revision lock and sends the revision's wake-up, as experiment writes do.

#include <string_view>
#include <vector>

#include "server/store/postgres_named_records.h"
#include "server/store/postgres_store.h"
#include "server/store/records.h"

namespace rxfleet::server {
namespace {

constexpr postgres_named::Table kTunings = {"tunings", "hold tuning", ""};

}  // namespace

absl::StatusOr<v1::HoldTuning> PostgresStore::CreateTuning(const v1::HoldTuning& tuning,
                                                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  return postgres_named::Create([this]() -> pq::Connection& { return Connected(); }, name_,
                                kTunings, tuning, now, store_records::NewTuning);
}

absl::StatusOr<v1::HoldTuning> PostgresStore::UpdateTuningStatus(std::string_view name,
                                                                 const v1::HoldTuningStatus& status,
                                                                 absl::Time now,
                                                                 const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  return postgres_named::UpdateStatus<v1::HoldTuning>(
      [this]() -> pq::Connection& { return Connected(); }, name_, kTunings, name, status, now,
      fence);
}

absl::Status PostgresStore::DeleteTuning(std::string_view name) {
  absl::MutexLock lock(&mu_);
  return postgres_named::Delete([this]() -> pq::Connection& { return Connected(); }, name_,
                                kTunings, name);
}

absl::StatusOr<std::vector<v1::HoldTuning>> PostgresStore::LoadTunings() {
  absl::MutexLock lock(&mu_);
  return postgres_named::LoadAll<v1::HoldTuning>(
      [this]() -> pq::Connection& { return Connected(); }, name_, kTunings, "hold tunings");
}

}  // namespace rxfleet::server
