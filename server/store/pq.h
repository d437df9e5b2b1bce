#pragma once

// A small RAII layer over libpq (PostgreSQL's C client, Debian libpq-dev 15) for the server's
// PostgreSQL store (server/store/postgres_store.h). Inside server/store only: failures are
// thrown as pq::Error and turned into a Status once, by StatusFromPq, at the store's public
// methods (the same shape as the SQLite store's SQLite::Exception → StatusFromSqlite).
//
// Every statement is sent with PQexecParams: parameters are typed (int8 and bytea in binary,
// text as text), so no value is ever spliced into SQL text, and results come back in binary
// (int2/int4/int8 in network byte order, bytea and text as raw bytes).

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"

namespace rxfleet::server::pq {

/// A failed statement or connection: `sqlstate` is PostgreSQL's five-character error code
/// (https://www.postgresql.org/docs/15/errcodes-appendix.html), "08006" when the connection is
/// gone; what() is the server's or libpq's message.
class Error : public std::runtime_error {
 public:
  Error(std::string sqlstate, const std::string& message)
      : std::runtime_error(message), sqlstate_(std::move(sqlstate)) {}
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

/// Maps a pq::Error to a Status: "<what> (<database>): <reason>". Connection errors (class 08),
/// shutdowns (57P01..57P03), lock and serialisation failures (40001, 40P01, 55P03) and
/// too-many-connections (53300) -> Unavailable (retry later); disk full (53100) and other
/// insufficient resources (class 53) -> ResourceExhausted; authentication, privilege and
/// read-only failures (class 28, 42501, 25006), a missing database (3D000), a schema or lock
/// in the wrong state (55000) and corrupt records (XX001, "22P03" for unparsable records) ->
/// FailedPrecondition; everything else -> Internal.
absl::Status StatusFromPq(const Error& e, std::string_view what, std::string_view database);

/// The parameters of one statement, in order ($1, $2, ...). Values are copied.
class Params {
 public:
  Params& Int(int64_t value);                                ///< int8
  Params& Text(std::string_view value);                      ///< text
  Params& Bytes(std::string_view value);                     ///< bytea
  Params& Record(const google::protobuf::Message& message);  ///< bytea: the serialised message
  Params& Null();                                            ///< NULL (type left to the server)

  size_t size() const { return values_.size(); }

 private:
  friend class Connection;
  struct Value {
    Oid type = 0;
    int format = 0;  // 0 text, 1 binary
    std::optional<std::string> bytes;
  };
  std::vector<Value> values_;
};

/// A statement's result (owns the PGresult). Rows and columns count from 0.
class Result {
 public:
  explicit Result(PGresult* result) : result_(result) {}

  int rows() const { return PQntuples(result_.get()); }
  /// Rows changed by INSERT/UPDATE/DELETE.
  int64_t affected() const;
  bool IsNull(int row, int column) const { return PQgetisnull(result_.get(), row, column) != 0; }
  /// An int2/int4/int8 column; throws pq::Error (XX000) for other types or NULL.
  int64_t Int(int row, int column) const;
  /// A bytea or text column's bytes (valid while the Result lives); empty for NULL.
  std::string_view Bytes(int row, int column) const;
  std::string Text(int row, int column) const { return std::string(Bytes(row, column)); }
  /// Parses a bytea column as `Message`; throws pq::Error ("22P03") naming `table` if it does
  /// not parse.
  template <typename Message>
  Message Record(int row, int column, std::string_view table) const {
    Message message;
    ParseRecord(row, column, table, &message);
    return message;
  }

 private:
  void ParseRecord(int row, int column, std::string_view table,
                   google::protobuf::Message* message) const;
  struct Deleter {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Deleter> result_;
};

/// One connection (owns the PGconn). Not thread-safe: callers serialise.
class Connection {
 public:
  /// Connects with a libpq connection string: a URI (postgresql://user@host:port/db?...) or
  /// key=value pairs; unset parts come from the PG* environment variables (PGHOST, PGPORT,
  /// PGDATABASE, PGUSER, PGPASSWORD, ...) and libpq's defaults. TCP keepalives are turned on
  /// unless the string sets them; notices are dropped. Throws pq::Error if the connection
  /// fails: 08001 if the server was not reached, 3D000 (missing database or role), 57P03
  /// (starting, stopping, full) or 28000 (refused) if it answered.
  static std::unique_ptr<Connection> Open(const std::string& conninfo,
                                          absl::Duration connect_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Runs one statement with parameters; throws pq::Error on failure.
  Result Exec(std::string_view sql, const Params& params = Params());
  /// Runs several statements without parameters (a migration); throws pq::Error on failure.
  void ExecScript(std::string_view sql);
  /// Runs one statement once per element of `rows` (same parameter types in each), sent in
  /// pipeline mode so a batch costs a round trip per 256 rows instead of one per row. Meant
  /// inside a Transaction: throws the first row's pq::Error after reading every result (the
  /// server skips the rest of a failed pipeline).
  void ExecMany(std::string_view sql, const std::vector<Params>& rows);

  /// True while the connection is up (as far as libpq knows after its last call); a store
  /// replaces a broken connection with a new one.
  bool healthy() const { return PQstatus(conn_) == CONNECTION_OK; }

  /// "user@host:port/dbname" of the connection, without any password, for messages.
  const std::string& name() const { return name_; }

  /// The socket (for LISTEN/notification waits) and the raw handle.
  int socket() const { return PQsocket(conn_); }
  /// Reads what the server has sent (call when socket() is readable) and returns the payloads
  /// of the notifications received so far (LISTEN), oldest first; empty if none. Throws
  /// pq::Error ("08006") if the connection is gone.
  std::vector<std::string> TakeNotifications();
  PGconn* raw() { return conn_; }

 private:
  explicit Connection(PGconn* conn);
  Error ErrorOf(const PGresult* result) const;
  [[noreturn]] void Fail(const PGresult* result) { throw ErrorOf(result); }
  PGconn* conn_;
  std::string name_;
};

/// Describes a connection string for messages, without any password: "user@host:port/dbname"
/// with the parts it sets ("(libpq defaults)" if none). Never throws.
std::string DescribeConninfo(const std::string& conninfo);

/// A transaction on `conn`: BEGIN at construction, ROLLBACK in the destructor unless Commit()
/// ran. `isolation` is put after BEGIN (e.g. "ISOLATION LEVEL REPEATABLE READ READ ONLY").
class Transaction {
 public:
  explicit Transaction(Connection& conn, std::string_view isolation = "");
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void Commit();

 private:
  Connection& conn_;
  bool done_ = false;
};

}  // namespace rxfleet::server::pq
