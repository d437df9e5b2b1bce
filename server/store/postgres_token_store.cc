// The PostgreSQL token store (server/store/token_store.h): its own connection to the
// database, the table from migration 1 of server/store/postgres_schema.cc.

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/string_view_compat.h"
#include "server/store/postgres_store.h"
#include "server/store/pq.h"
#include "server/store/token_store.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

constexpr absl::Duration kConnectTimeout = absl::Seconds(5);

TokenRecord ReadRecord(const pq::Result& row, int i) {
  TokenRecord record;
  record.name = row.Text(i, 0);
  absl::StatusOr<Role> role = ParseRole(row.Text(i, 1));
  // An unknown role in the database (edited by hand) grants the least.
  record.role = role.ok() ? *role : Role::kViewer;
  record.create_time = absl::FromUnixMicros(row.Int(i, 2));
  record.created_by = row.Text(i, 3);
  return record;
}

class PostgresTokenStore final : public TokenStore {
 public:
  explicit PostgresTokenStore(std::string uri)
      : uri_(std::move(uri)), name_(pq::DescribeConninfo(uri_)) {}

  absl::Status Open() {
    absl::MutexLock lock(&mu_);
    try {
      Connected();
      name_ = conn_->name();
      MigratePostgresSchema(*conn_, LatestPostgresSchemaVersion());
    } catch (const pq::Error& e) {
      return pq::StatusFromPq(e, "cannot open the token table", name_);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<TokenRecord>> List() override {
    absl::MutexLock lock(&mu_);
    std::vector<TokenRecord> records;
    try {
      const pq::Result rows = Connected().Exec(
          "SELECT name, role, create_time_us, created_by FROM tokens ORDER BY name");
      for (int i = 0; i < rows.rows(); ++i) records.push_back(ReadRecord(rows, i));
    } catch (const pq::Error& e) {
      return pq::StatusFromPq(e, "cannot list tokens", name_);
    }
    return records;
  }

  absl::StatusOr<std::vector<StoredToken>> ListWithHashes() override {
    absl::MutexLock lock(&mu_);
    std::vector<StoredToken> tokens;
    try {
      const pq::Result rows = Connected().Exec(
          "SELECT name, role, create_time_us, created_by, hash FROM tokens ORDER BY name");
      for (int i = 0; i < rows.rows(); ++i) {
        tokens.push_back({ReadRecord(rows, i), std::string(rows.Bytes(i, 4))});
      }
    } catch (const pq::Error& e) {
      return pq::StatusFromPq(e, "cannot list tokens", name_);
    }
    return tokens;
  }

  absl::StatusOr<TokenRecord> Revoke(std::string_view name) override {
    absl::MutexLock lock(&mu_);
    try {
      const pq::Result rows = Connected().Exec(
          "DELETE FROM tokens WHERE name = $1 RETURNING name, role, create_time_us, created_by",
          pq::Params().Text(name));
      if (rows.rows() == 0) {
        return absl::NotFoundError(absl::StrCat("no token named '", ToAbslView(name), "'"));
      }
      return ReadRecord(rows, 0);
    } catch (const pq::Error& e) {
      return pq::StatusFromPq(e, "cannot revoke the token", name_);
    }
  }

  absl::StatusOr<std::optional<TokenRecord>> Find(std::string_view token) override {
    const std::string hash = HashToken(token);
    absl::MutexLock lock(&mu_);
    try {
      const pq::Result rows = Connected().Exec(
          "SELECT name, role, create_time_us, created_by, hash FROM tokens WHERE hash = $1",
          pq::Params().Bytes(hash));
      if (rows.rows() == 0 || !HashesEqual(rows.Bytes(0, 4), hash)) {
        return std::optional<TokenRecord>();
      }
      return std::optional<TokenRecord>(ReadRecord(rows, 0));
    } catch (const pq::Error& e) {
      return pq::StatusFromPq(e, "cannot look up the token", name_);
    }
  }

 private:
  absl::StatusOr<bool> Insert(const TokenRecord& record, std::string_view hash) override {
    absl::MutexLock lock(&mu_);
    try {
      return Connected()
                 .Exec(
                     "INSERT INTO tokens (name, role, hash, create_time_us, created_by) "
                     "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
                     pq::Params()
                         .Text(record.name)
                         .Text(RoleName(record.role))
                         .Bytes(hash)
                         .Int(absl::ToUnixMicros(record.create_time))
                         .Text(record.created_by))
                 .affected() == 1;
    } catch (const pq::Error& e) {
      return pq::StatusFromPq(e, "cannot store the token", name_);
    }
  }

  pq::Connection& Connected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (conn_ == nullptr || !conn_->healthy()) {
      conn_.reset();
      conn_ = pq::Connection::Open(uri_, kConnectTimeout);
    }
    return *conn_;
  }

  const std::string uri_;
  std::string name_;
  absl::Mutex mu_;
  std::unique_ptr<pq::Connection> conn_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<TokenStore>> OpenPostgresTokenStore(const std::string& uri) {
  auto store = std::make_unique<PostgresTokenStore>(uri);
  if (absl::Status s = store->Open(); !s.ok()) return s;
  return store;
}

}  // namespace rxfleet::server
