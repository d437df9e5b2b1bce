#pragma once

// Operator tokens in the server's database (table `tokens`; SQLite: schema migration 3 of
// server/store/schema.h, PostgreSQL: migration 1 of server/store/postgres_schema.cc; the rest
// of the database belongs to server/store/store.h). Only SHA-256 hashes of tokens are stored
// (see server/auth/token.h). The token store has its own connection, so
// `rxfleet-server tokens ...` can change tokens while the server runs, and every lookup reads
// the database: a revoked token stops working with the next call.
//
// Thread-safety: all methods may be called from any thread (serialised on the connection).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/token.h"

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

/// A stored token with its hash, as a copy of the database must carry it so that existing
/// tokens keep working (`rxfleet-server migrate-store`, Store::ImportSnapshot).
struct StoredToken {
  TokenRecord record;
  std::string hash;  ///< HashToken of the token: 32 bytes of SHA-256
};

/// A token just created: the record and the token itself, which is shown once and not stored.
struct CreatedToken {
  TokenRecord record;
  std::string token;
};

class TokenStore {
 public:
  /// Opens `database` (an SQLite path, which must exist or be creatable, or a PostgreSQL URI,
  /// see IsPostgresUri in server/store/store.h) and migrates its schema. Errors:
  /// FailedPrecondition / Unavailable / Internal with the database's reason and name.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& database);

  virtual ~TokenStore() = default;
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  /// Creates a token. InvalidArgument for a bad name (see ValidateTokenName); AlreadyExists if
  /// the name is taken (revoke it first to replace it).
  absl::StatusOr<CreatedToken> Create(std::string_view name, Role role, std::string_view created_by,
                                      absl::Time now);

  /// Tokens ordered by name.
  virtual absl::StatusOr<std::vector<TokenRecord>> List() = 0;

  /// Every token with its stored hash, ordered by name. Errors only for database failures.
  virtual absl::StatusOr<std::vector<StoredToken>> ListWithHashes() = 0;

  /// Deletes the token named `name`; returns its record. NotFound if there is none.
  virtual absl::StatusOr<TokenRecord> Revoke(std::string_view name) = 0;

  /// The token whose hash matches `token`, or nullopt. Errors only for database failures.
  virtual absl::StatusOr<std::optional<TokenRecord>> Find(std::string_view token) = 0;

 protected:
  TokenStore() = default;
  /// Stores `record` with the token's hash, unless a token of that name exists: then false.
  /// Errors only for database failures.
  virtual absl::StatusOr<bool> Insert(const TokenRecord& record, std::string_view hash) = 0;
};

/// The PostgreSQL token store (server/store/postgres_token_store.cc); use TokenStore::Open.
absl::StatusOr<std::unique_ptr<TokenStore>> OpenPostgresTokenStore(const std::string& uri);

}  // namespace rxfleet::server
