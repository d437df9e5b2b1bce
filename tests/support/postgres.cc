#include "tests/support/postgres.h"

#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/support/paths.h"

namespace rxfleet::testing {
namespace {

constexpr const char* kPort = "5432";
constexpr const char* kUser = "rxfleet";

std::string UriIn(const std::string& dir, std::string_view name) {
  return absl::StrCat("postgresql:///", std::string(name), "?host=", dir, "&port=", kPort,
                      "&user=", kUser);
}

bool RunFixture(const char* action, const std::string& dir) {
  const std::string command = absl::StrCat(SourcePath("tests/support/postgres-fixture"), " ",
                                           action, " ", dir, " >/dev/null");
  return std::system(command.c_str()) == 0;
}

}  // namespace

std::string PostgresDir() {
  const char* dir = std::getenv("RXFLEET_TEST_PG_DIR");
  return dir != nullptr ? std::string(dir) : std::string();
}

bool PostgresAvailable() { return !PostgresDir().empty(); }

std::string PostgresUri(std::string_view name) { return UriIn(PostgresDir(), name); }

PrivatePostgres::PrivatePostgres() {
  std::random_device seed;
  dir_ = absl::StrFormat("/tmp/rxfleet-pg-%08x", seed());
  if (!RunFixture("start", dir_)) {
    std::fprintf(stderr, "PrivatePostgres: cannot start a server in %s\n", dir_.c_str());
    std::abort();
  }
}

PrivatePostgres::~PrivatePostgres() { RunFixture("stop", dir_); }

std::string PrivatePostgres::Uri(std::string_view name) const { return UriIn(dir_, name); }
bool PrivatePostgres::Halt() { return RunFixture("halt", dir_); }
bool PrivatePostgres::Resume() { return RunFixture("resume", dir_); }

absl::Status RunSql(std::string_view name, std::string_view sql) {
  const std::string uri = PostgresUri(name);
  PGconn* conn = PQconnectdb(uri.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::InternalError(absl::StrCat("cannot connect to ", uri, ": ", message));
  }
  PGresult* result = PQexec(conn, std::string(sql).c_str());
  const ExecStatusType status = PQresultStatus(result);
  const std::string message = PQresultErrorMessage(result);
  PQclear(result);
  PQfinish(conn);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return absl::InternalError(absl::StrCat(std::string(sql), ": ", message));
  }
  return absl::OkStatus();
}

TestDatabase::TestDatabase() {
  std::random_device seed;
  std::mt19937_64 random(seed());
  name_ = absl::StrFormat("t_%016x", random());
  uri_ = PostgresUri(name_);
  if (absl::Status s = RunSql("postgres", absl::StrCat("CREATE DATABASE ", name_)); !s.ok()) {
    std::fprintf(stderr, "TestDatabase: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

TestDatabase::~TestDatabase() {
  (void)RunSql("postgres", absl::StrCat("DROP DATABASE IF EXISTS ", name_, " WITH (FORCE)"));
}

}  // namespace rxfleet::testing
