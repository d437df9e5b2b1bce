// The SQLite store (server/store/sqlite_store.h): hold tunings. Their metric windows are in
// metric_windows under the tuning's name, beside the experiments' (sqlite_store_experiments.cc):
// tunings and experiments share one name namespace.

#include <SQLiteCpp/SQLiteCpp.h>

#include <string_view>
#include <vector>

#include "server/store/records.h"
#include "server/store/sqlite_named_records.h"
#include "server/store/sqlite_store.h"

namespace rxfleet::server {
namespace {

constexpr sqlite_named::Table kTunings = {"tunings", "hold tuning", ""};

}  // namespace

absl::StatusOr<v1::HoldTuning> SqliteStore::CreateTuning(const v1::HoldTuning& tuning,
                                                         absl::Time now) {
  absl::MutexLock lock(&mu_);
  return sqlite_named::Create(*db_, path_, kTunings, tuning, now, store_records::NewTuning);
}

absl::StatusOr<v1::HoldTuning> SqliteStore::UpdateTuningStatus(std::string_view name,
                                                               const v1::HoldTuningStatus& status,
                                                               absl::Time now,
                                                               const LeaseFence* fence) {
  absl::MutexLock lock(&mu_);
  return sqlite_named::UpdateStatus<v1::HoldTuning>(*db_, path_, kTunings, name, status, now,
                                                    fence);
}

absl::Status SqliteStore::DeleteTuning(std::string_view name) {
  absl::MutexLock lock(&mu_);
  return sqlite_named::Delete(*db_, path_, kTunings, name);
}

absl::StatusOr<std::vector<v1::HoldTuning>> SqliteStore::LoadTunings() {
  absl::MutexLock lock(&mu_);
  return sqlite_named::LoadAll<v1::HoldTuning>(*db_, path_, kTunings, "hold tunings");
}

}  // namespace rxfleet::server
