#pragma once

// Operator tokens in the server's SQLite file (table `tokens`, schema migration 3 of
// server/store/schema.h; the rest of the file belongs to server/store/store.h). Only SHA-256 hashes
// of tokens are stored (see server/auth/token.h). The store has its own connection, so
// `rxfleet-server tokens ...` can change tokens while the server runs, and every lookup reads the
// file: a revoked token stops working with the next call.
//
// Thread-safety: all methods may be called from any thread (serialised on the connection).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/auth/token.h"

namespace SQLite {
class Database;
}  // namespace SQLite

namespace rxfleet::server {

/// A stored token, without its secret.
struct TokenRecord {
  std::string name;
  Role role = Role::kViewer;
  absl::Time create_time;
  /// Who created it: "local administrator (OS user root)" (rxfleet-server tokens) or the
  /// creating token ("token:admin").
  std::string created_by;
};

/// A token just created: the record and the token itself, which is shown once and not stored.
struct CreatedToken {
  TokenRecord record;
  std::string token;
};

class TokenStore {
 public:
  /// Opens `path` (which must exist or be creatable) and migrates its schema (MigrateSchema).
  /// Errors: FailedPrecondition / Unavailable / Internal with SQLite's reason and the path.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path);

  ~TokenStore();
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  /// Creates a token. InvalidArgument for a bad name (see ValidateTokenName); AlreadyExists if
  /// the name is taken (revoke it first to replace it).
  absl::StatusOr<CreatedToken> Create(std::string_view name, Role role, std::string_view created_by,
                                      absl::Time now);

  /// Tokens ordered by name.
  absl::StatusOr<std::vector<TokenRecord>> List();

  /// Deletes the token named `name`; returns its record. NotFound if there is none.
  absl::StatusOr<TokenRecord> Revoke(std::string_view name);

  /// The token whose hash matches `token`, or nullopt. Errors only for database failures.
  absl::StatusOr<std::optional<TokenRecord>> Find(std::string_view token);

 private:
  TokenStore() = default;

  absl::Mutex mu_;
  std::string path_;
  std::unique_ptr<SQLite::Database> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::server
