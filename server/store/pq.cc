#include "server/store/pq.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/string_view_compat.h"

namespace rxfleet::server::pq {
namespace {

using common::ToAbslView;

// Type OIDs of the built-in types (src/include/catalog/pg_type.dat).
constexpr Oid kBool = 16;
constexpr Oid kBytea = 17;
constexpr Oid kInt8 = 20;
constexpr Oid kInt2 = 21;
constexpr Oid kInt4 = 23;
constexpr Oid kText = 25;

constexpr const char* kConnectionLost = "08006";
constexpr const char* kConnectionFailed = "08001";

std::string Trimmed(const char* message) {
  std::string_view text = message == nullptr ? "" : message;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  // libpq prefixes server messages with the severity: "ERROR:  ...".
  for (std::string_view prefix : {"ERROR:  ", "FATAL:  "}) {
    if (text.substr(0, prefix.size()) == prefix) text.remove_prefix(prefix.size());
  }
  return std::string(text);
}

// libpq reports no SQLSTATE for a failed connection attempt, only the message. A "FATAL:"
// in it means the server answered and refused (missing database or role, authentication,
// startup or shutdown, too many clients); anything else means it was not reached.
std::string ConnectFailureState(std::string_view message) {
  if (message.find("FATAL:") == std::string_view::npos) return kConnectionFailed;
  for (std::string_view busy : {"too many clients", "starting up", "shutting down",
                                "in recovery mode", "remaining connection slots"}) {
    if (message.find(busy) != std::string_view::npos) return "57P03";
  }
  if (message.find("does not exist") != std::string_view::npos) return "3D000";
  return "28000";  // authentication or authorization refused
}

// Notices (e.g. "relation ... already exists, skipping") are not errors: not printed.
void IgnoreNotice(void* /*arg*/, const char* /*message*/) {}

std::string NameOf(PGconn* conn) {
  const char* user = PQuser(conn);
  const char* host = PQhost(conn);
  const char* port = PQport(conn);
  const char* db = PQdb(conn);
  return absl::StrCat(user != nullptr ? user : "", "@", host != nullptr ? host : "", ":",
                      port != nullptr ? port : "", "/", db != nullptr ? db : "");
}

}  // namespace

absl::Status StatusFromPq(const Error& e, std::string_view what, std::string_view database) {
  const std::string message =
      absl::StrCat(ToAbslView(what), " (PostgreSQL ", ToAbslView(database), "): ", e.what());
  const std::string& code = e.sqlstate();
  const std::string error_class = code.substr(0, 2);
  if (error_class == "08" || code == "57P01" || code == "57P02" || code == "57P03" ||
      code == "40001" || code == "40P01" || code == "55P03" || code == "53300") {
    return absl::UnavailableError(message);
  }
  if (error_class == "53") return absl::ResourceExhaustedError(message);
  if (error_class == "28" || code == "42501" || code == "25006" || code == "XX001" ||
      code == "22P03" || code == "3D000" || code == "55000") {
    return absl::FailedPreconditionError(message);
  }
  return absl::InternalError(message);
}

Params& Params::Int(int64_t value) {
  const uint64_t network = htobe64(static_cast<uint64_t>(value));
  std::string bytes(sizeof(network), '\0');
  std::memcpy(bytes.data(), &network, sizeof(network));
  values_.push_back({kInt8, 1, std::move(bytes)});
  return *this;
}

Params& Params::Text(std::string_view value) {
  values_.push_back({kText, 0, std::string(value)});
  return *this;
}

Params& Params::Bytes(std::string_view value) {
  values_.push_back({kBytea, 1, std::string(value)});
  return *this;
}

Params& Params::Record(const google::protobuf::Message& message) {
  values_.push_back({kBytea, 1, message.SerializeAsString()});
  return *this;
}

Params& Params::Null() {
  values_.push_back({0, 0, std::nullopt});
  return *this;
}

int64_t Result::affected() const {
  int64_t n = 0;
  const char* text = PQcmdTuples(result_.get());
  for (const char* p = text; *p >= '0' && *p <= '9'; ++p) n = n * 10 + (*p - '0');
  return n;
}

int64_t Result::Int(int row, int column) const {
  if (IsNull(row, column)) {
    throw Error("XX000", absl::StrCat("column ", PQfname(result_.get(), column), " is NULL"));
  }
  const char* value = PQgetvalue(result_.get(), row, column);
  switch (PQftype(result_.get(), column)) {
    case kInt8: {
      uint64_t network;
      std::memcpy(&network, value, sizeof(network));
      return static_cast<int64_t>(be64toh(network));
    }
    case kInt4: {
      uint32_t network;
      std::memcpy(&network, value, sizeof(network));
      return static_cast<int32_t>(be32toh(network));
    }
    case kInt2: {
      uint16_t network;
      std::memcpy(&network, value, sizeof(network));
      return static_cast<int16_t>(be16toh(network));
    }
    case kBool:
      return value[0] != 0 ? 1 : 0;
    default:
      throw Error("XX000",
                  absl::StrCat("column ", PQfname(result_.get(), column),
                               " is not an integer (type ", PQftype(result_.get(), column), ")"));
  }
}

std::string_view Result::Bytes(int row, int column) const {
  if (IsNull(row, column)) return {};
  return std::string_view(PQgetvalue(result_.get(), row, column),
                          static_cast<size_t>(PQgetlength(result_.get(), row, column)));
}

void Result::ParseRecord(int row, int column, std::string_view table,
                         google::protobuf::Message* message) const {
  const std::string_view bytes = Bytes(row, column);
  if (!message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error("22P03", absl::StrCat("a record in table ", ToAbslView(table), " does not parse"));
  }
}

Connection::Connection(PGconn* conn) : conn_(conn), name_(NameOf(conn)) {}

Connection::~Connection() { PQfinish(conn_); }

std::unique_ptr<Connection> Connection::Open(const std::string& conninfo,
                                             absl::Duration connect_timeout) {
  // Keyword arrays with expand_dbname: the string (URI or key=value) supplies what it sets,
  // the defaults below and the environment the rest.
  const std::string timeout =
      absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(connect_timeout)));
  const bool sets_keepalives = absl::StrContains(conninfo, "keepalives");
  std::vector<const char*> keys = {"connect_timeout", "application_name"};
  std::vector<const char*> values = {timeout.c_str(), "rxfleet-server"};
  if (!sets_keepalives) {
    for (const auto& [key, value] : {std::pair{"keepalives", "1"},
                                     {"keepalives_idle", "10"},
                                     {"keepalives_interval", "5"},
                                     {"keepalives_count", "3"}}) {
      keys.push_back(key);
      values.push_back(value);
    }
  }
  // The connection string last, so its own settings win (expand_dbname applies "dbname" as a
  // full connection string on top of the keywords before it).
  keys.push_back("dbname");
  values.push_back(conninfo.c_str());
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) throw Error(kConnectionFailed, "out of memory creating the connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    // libpq quotes a connection string it cannot parse, password and all.
    if (!conninfo.empty()) {
      absl::StrReplaceAll({{conninfo, "(the connection string)"}}, &message);
    }
    throw Error(ConnectFailureState(message), absl::StrCat("cannot connect: ", message));
  }
  PQsetNoticeProcessor(conn, &IgnoreNotice, nullptr);
  // A store that reads and writes binary data relies on these; set them for every session.
  PGresult* set = PQexec(conn, "SET client_encoding = 'UTF8'; SET timezone = 'UTC'");
  const bool set_ok = PQresultStatus(set) == PGRES_COMMAND_OK;
  PQclear(set);
  if (!set_ok) {
    const std::string message = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    throw Error(kConnectionFailed, message);
  }
  return std::unique_ptr<Connection>(new Connection(conn));
}

std::vector<std::string> Connection::TakeNotifications() {
  if (PQconsumeInput(conn_) == 0) {
    const std::string message = Trimmed(PQerrorMessage(conn_));
    throw Error(kConnectionLost,
                message.empty() ? "the connection to the database was lost" : message);
  }
  std::vector<std::string> payloads;
  while (PGnotify* notify = PQnotifies(conn_)) {
    payloads.emplace_back(notify->extra != nullptr ? notify->extra : "");
    PQfreemem(notify);
  }
  return payloads;
}

Error Connection::ErrorOf(const PGresult* result) const {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  std::string message =
      Trimmed(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn_));
  if (message.empty()) message = Trimmed(PQerrorMessage(conn_));
  if (sqlstate.empty()) sqlstate = healthy() ? "XX000" : kConnectionLost;
  if (message.empty()) message = "the connection to the database was lost";
  return Error(std::move(sqlstate), message);
}

Result Connection::Exec(std::string_view sql, const Params& params) {
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Params::Value& v : params.values_) {
    types.push_back(v.type);
    values.push_back(v.bytes.has_value() ? v.bytes->data() : nullptr);
    lengths.push_back(v.bytes.has_value() ? static_cast<int>(v.bytes->size()) : 0);
    formats.push_back(v.format);
  }
  const std::string text(sql);
  PGresult* result =
      PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), types.data(),
                   values.data(), lengths.data(), formats.data(), /*resultFormat=*/1);
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Result owned(result);  // freed after the message is taken
    Fail(result);
  }
  return Result(result);
}

void Connection::ExecScript(std::string_view sql) {
  const std::string text(sql);
  PGresult* result = PQexec(conn_, text.c_str());
  Result owned(result);
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) Fail(result);
}

void Connection::ExecMany(std::string_view sql, const std::vector<Params>& rows) {
  // Results are read after every chunk, so the server never blocks on a full socket buffer
  // while this side is still sending (libpq's pipeline-mode deadlock note).
  constexpr size_t kChunk = 256;
  if (rows.empty()) return;
  const std::string text(sql);
  std::optional<Error> first_error;
  for (size_t begin = 0; begin < rows.size(); begin += kChunk) {
    const size_t end = std::min(rows.size(), begin + kChunk);
    if (PQenterPipelineMode(conn_) != 1) Fail(nullptr);
    std::vector<Oid> types;
    for (const Params::Value& v : rows[begin].values_) types.push_back(v.type);
    bool sent =
        PQsendPrepare(conn_, "", text.c_str(), static_cast<int>(types.size()), types.data()) == 1;
    for (size_t i = begin; sent && i < end; ++i) {
      std::vector<const char*> values;
      std::vector<int> lengths;
      std::vector<int> formats;
      for (const Params::Value& v : rows[i].values_) {
        values.push_back(v.bytes.has_value() ? v.bytes->data() : nullptr);
        lengths.push_back(v.bytes.has_value() ? static_cast<int>(v.bytes->size()) : 0);
        formats.push_back(v.format);
      }
      sent = PQsendQueryPrepared(conn_, "", static_cast<int>(values.size()), values.data(),
                                 lengths.data(), formats.data(), /*resultFormat=*/1) == 1;
    }
    sent = sent && PQpipelineSync(conn_) == 1;
    if (!sent) {
      const Error error = ErrorOf(nullptr);
      PQexitPipelineMode(conn_);
      throw error;
    }
    // Each command's results end with a NULL; the sync point ends the chunk.
    while (true) {
      PGresult* result = PQgetResult(conn_);
      if (result == nullptr) {
        if (!healthy()) break;
        continue;
      }
      const ExecStatusType status = PQresultStatus(result);
      if (status == PGRES_FATAL_ERROR && !first_error.has_value()) first_error = ErrorOf(result);
      PQclear(result);
      if (status == PGRES_PIPELINE_SYNC) break;
    }
    PQexitPipelineMode(conn_);
    if (!healthy() && !first_error.has_value()) first_error = ErrorOf(nullptr);
    if (first_error.has_value()) throw *first_error;
  }
}

std::string DescribeConninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "(unparsable connection string)";
  }
  std::string user, host, port, db;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string_view key = o->keyword;
    if (key == "user") user = o->val;
    if (key == "host") host = o->val;
    if (key == "port") port = o->val;
    if (key == "dbname") db = o->val;
  }
  PQconninfoFree(options);
  if (user.empty() && host.empty() && port.empty() && db.empty()) return "(libpq defaults)";
  return absl::StrCat(user, user.empty() ? "" : "@", host, port.empty() ? "" : ":", port, "/", db);
}

Transaction::Transaction(Connection& conn, std::string_view isolation) : conn_(conn) {
  conn_.Exec(isolation.empty() ? std::string("BEGIN")
                               : absl::StrCat("BEGIN ", ToAbslView(isolation)));
}

Transaction::~Transaction() {
  if (done_ || !conn_.healthy()) return;
  try {
    conn_.Exec("ROLLBACK");
  } catch (const Error&) {
    // The connection broke: the server rolls the transaction back on its own.
  }
}

void Transaction::Commit() {
  conn_.Exec("COMMIT");
  done_ = true;
}

}  // namespace rxfleet::server::pq
