#include "server/store/token_store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/string_view_compat.h"
#include "server/store/schema.h"
#include "server/store/sqlite_util.h"
#include "server/store/store.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

TokenRecord ReadRecord(SQLite::Statement& row) {
  TokenRecord record;
  record.name = row.getColumn(0).getString();
  absl::StatusOr<Role> role = ParseRole(row.getColumn(1).getString());
  // An unknown role in the file (edited by hand) grants the least.
  record.role = role.ok() ? *role : Role::kViewer;
  record.create_time = absl::FromUnixMicros(row.getColumn(2).getInt64());
  record.created_by = row.getColumn(3).getString();
  return record;
}

// The SQLite token store: its own connection to the server's file.
class SqliteTokenStore final : public TokenStore {
 public:
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path);
  absl::StatusOr<std::vector<TokenRecord>> List() override;
  absl::StatusOr<std::vector<StoredToken>> ListWithHashes() override;
  absl::StatusOr<TokenRecord> Revoke(std::string_view name) override;
  absl::StatusOr<std::optional<TokenRecord>> Find(std::string_view token) override;

 private:
  absl::StatusOr<bool> Insert(const TokenRecord& record, std::string_view hash) override;

  absl::Mutex mu_;
  std::string path_;
  std::unique_ptr<SQLite::Database> db_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<TokenStore>> SqliteTokenStore::Open(const std::string& path) {
  std::unique_ptr<SqliteTokenStore> store(new SqliteTokenStore());
  store->path_ = path;
  absl::MutexLock lock(&store->mu_);
  try {
    store->db_ = std::make_unique<SQLite::Database>(
        path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_FULLMUTEX, 5000);
    store->db_->exec("PRAGMA journal_mode=WAL");
    store->db_->exec("PRAGMA synchronous=FULL");
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot open the token table", path);
  }
  if (absl::Status s = MigrateSchema(*store->db_, path); !s.ok()) return s;
  return store;
}

absl::StatusOr<bool> SqliteTokenStore::Insert(const TokenRecord& record, std::string_view hash) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Statement insert(*db_,
                             "INSERT INTO tokens (name, role, hash, create_time_us, created_by) "
                             "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING");
    insert.bind(1, record.name);
    insert.bind(2, std::string(RoleName(record.role)));
    insert.bind(3, hash.data(), static_cast<int>(hash.size()));
    insert.bind(4, absl::ToUnixMicros(record.create_time));
    insert.bind(5, record.created_by);
    return insert.exec() == 1;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot store the token", path_);
  }
}

absl::StatusOr<std::vector<TokenRecord>> SqliteTokenStore::List() {
  absl::MutexLock lock(&mu_);
  std::vector<TokenRecord> records;
  try {
    SQLite::Statement query(
        *db_, "SELECT name, role, create_time_us, created_by FROM tokens ORDER BY name");
    while (query.executeStep()) records.push_back(ReadRecord(query));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list tokens", path_);
  }
  return records;
}

absl::StatusOr<std::vector<StoredToken>> SqliteTokenStore::ListWithHashes() {
  absl::MutexLock lock(&mu_);
  std::vector<StoredToken> tokens;
  try {
    SQLite::Statement query(
        *db_, "SELECT name, role, create_time_us, created_by, hash FROM tokens ORDER BY name");
    while (query.executeStep()) {
      const SQLite::Column hash = query.getColumn(4);
      tokens.push_back({ReadRecord(query), std::string(static_cast<const char*>(hash.getBlob()),
                                                       static_cast<size_t>(hash.getBytes()))});
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list tokens", path_);
  }
  return tokens;
}

absl::StatusOr<TokenRecord> SqliteTokenStore::Revoke(std::string_view name) {
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Transaction transaction(*db_);
    SQLite::Statement query(
        *db_, "SELECT name, role, create_time_us, created_by FROM tokens WHERE name = ?");
    query.bind(1, std::string(name));
    if (!query.executeStep()) {
      return absl::NotFoundError(absl::StrCat("no token named '", ToAbslView(name), "'"));
    }
    TokenRecord record = ReadRecord(query);
    query.reset();
    SQLite::Statement remove(*db_, "DELETE FROM tokens WHERE name = ?");
    remove.bind(1, std::string(name));
    remove.exec();
    transaction.commit();
    return record;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot revoke the token", path_);
  }
}

absl::StatusOr<std::optional<TokenRecord>> SqliteTokenStore::Find(std::string_view token) {
  const std::string hash = HashToken(token);
  absl::MutexLock lock(&mu_);
  try {
    SQLite::Statement query(
        *db_, "SELECT name, role, create_time_us, created_by, hash FROM tokens WHERE hash = ?");
    query.bind(1, hash.data(), static_cast<int>(hash.size()));
    if (!query.executeStep()) return std::optional<TokenRecord>();
    const SQLite::Column stored = query.getColumn(4);
    const std::string_view stored_hash(static_cast<const char*>(stored.getBlob()),
                                       static_cast<size_t>(stored.getBytes()));
    if (!HashesEqual(stored_hash, hash)) return std::optional<TokenRecord>();
    return std::optional<TokenRecord>(ReadRecord(query));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot look up the token", path_);
  }
}

}  // namespace

absl::StatusOr<CreatedToken> TokenStore::Create(std::string_view name, Role role,
                                                std::string_view created_by, absl::Time now) {
  if (absl::Status s = ValidateTokenName(name); !s.ok()) return s;
  absl::StatusOr<std::string> token = GenerateToken();
  if (!token.ok()) return token.status();
  CreatedToken created;
  created.record = {std::string(name), role, now, std::string(created_by)};
  absl::StatusOr<bool> inserted = Insert(created.record, HashToken(*token));
  if (!inserted.ok()) return inserted.status();
  if (!*inserted) {
    return absl::AlreadyExistsError(absl::StrCat("name: a token named '", ToAbslView(name),
                                                 "' exists; revoke it first to replace it"));
  }
  created.token = *std::move(token);
  return created;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& database) {
  if (IsPostgresUri(database)) return OpenPostgresTokenStore(database);
  return SqliteTokenStore::Open(database);
}

}  // namespace rxfleet::server
