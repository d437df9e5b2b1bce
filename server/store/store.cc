#include "server/store/store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_store.h"
#include "server/store/sqlite_store.h"

namespace rxfleet::server {

using common::ToAbslView;

bool IsPostgresUri(std::string_view database) {
  return absl::StartsWith(ToAbslView(database), "postgresql://") ||
         absl::StartsWith(ToAbslView(database), "postgres://");
}

absl::Status PolicyPreconditionFailed(std::string_view name, const std::string* stored,
                                      std::string_view expected) {
  if (stored == nullptr) {
    return absl::AbortedError(
        absl::StrCat("policy ", ToAbslView(name), " does not exist (you have resource version ",
                     ToAbslView(expected), "); it was deleted: get it again and retry"));
  }
  return absl::AbortedError(absl::StrCat("policy ", ToAbslView(name),
                                         " was modified (resource version ", *stored, ", you have ",
                                         ToAbslView(expected), "); get it again and retry"));
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("database path must not be empty");
  if (options.busy_timeout < absl::ZeroDuration() || options.busy_timeout > absl::Minutes(1)) {
    return absl::InvalidArgumentError(absl::StrCat("database busy timeout ",
                                                   absl::FormatDuration(options.busy_timeout),
                                                   " is out of range 0..1m"));
  }
  if (IsPostgresUri(options.path)) return PostgresStore::Open(options);
  return SqliteStore::Open(options);
}

}  // namespace rxfleet::server
