#include "server/store/sqlite_util.h"

namespace rxfleet::server {

using common::ToAbslView;

absl::Status StatusFromSqlite(const SQLite::Exception& e, std::string_view what,
                              std::string_view path) {
  const std::string message =
      absl::StrCat(ToAbslView(what), " (", ToAbslView(path), "): ", e.what());
  switch (e.getErrorCode()) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(message);
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_AUTH:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

int64_t ReadMeta(SQLite::Database& db, const char* key) {
  SQLite::Statement query(db, "SELECT value FROM meta WHERE key = ?");
  query.bind(1, key);
  if (!query.executeStep()) {
    throw SQLite::Exception(absl::StrCat("meta key '", key, "' is missing"), SQLITE_CORRUPT);
  }
  return query.getColumn(0).getInt64();
}

void WriteMeta(SQLite::Database& db, const char* key, int64_t value) {
  SQLite::Statement update(db, "UPDATE meta SET value = ? WHERE key = ?");
  update.bind(1, value);
  update.bind(2, key);
  update.exec();
}

void BindRecord(SQLite::Statement& statement, int index, const google::protobuf::Message& m,
                std::string* buffer) {
  m.SerializeToString(buffer);
  statement.bind(index, buffer->data(), static_cast<int>(buffer->size()));
}

}  // namespace rxfleet::server
