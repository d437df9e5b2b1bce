#pragma once

// Helpers shared by the files that talk SQL to the server's database (server/store/): the one
// mapping of SQLite errors to Status, the meta table, protobuf records in BLOB columns.

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "google/protobuf/message.h"
#include "server/store/store.h"

namespace rxfleet::server {

/// Maps an SQLite error to a Status for callers: the code says what the caller can do, the
/// message names the operation, the file and SQLite's reason ("<what> (<path>): <reason>").
/// BUSY/LOCKED -> Unavailable (retry later); FULL -> ResourceExhausted; READONLY, CANTOPEN,
/// PERM, NOTADB, CORRUPT, AUTH -> FailedPrecondition (fix the file); others -> Internal.
absl::Status StatusFromSqlite(const SQLite::Exception& e, std::string_view what,
                              std::string_view path);

/// The integer under `key` in the meta table; throws SQLite::Exception (CORRUPT) if missing.
int64_t ReadMeta(SQLite::Database& db, const char* key);
void WriteMeta(SQLite::Database& db, const char* key, int64_t value);

/// OK if `fence` is null or still holds its lease (holder, epoch, not expired by the system
/// clock); else the Aborted status of store_records::LeaseLost. Inside a write transaction
/// (sqlite_store_leases.cc).
absl::Status CheckSqliteFence(SQLite::Database& db, const LeaseFence* fence);

/// Parses a protobuf record from a BLOB column; throws SQLite::Exception (CORRUPT) naming
/// `table` if it does not parse.
template <typename Message>
Message ParseRecord(const SQLite::Column& column, std::string_view table) {
  Message message;
  if (!message.ParseFromArray(column.getBlob(), column.getBytes())) {
    throw SQLite::Exception(
        absl::StrCat("a record in table ", common::ToAbslView(table), " does not parse"),
        SQLITE_CORRUPT);
  }
  return message;
}

/// Binds `m` serialised into `buffer` (which must outlive the statement's execution).
void BindRecord(SQLite::Statement& statement, int index, const google::protobuf::Message& m,
                std::string* buffer);

}  // namespace rxfleet::server
