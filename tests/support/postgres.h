#pragma once

// PostgreSQL databases for tests, on the server of the ctest fixture "postgres"
// (rxfleet_postgres_tests in cmake/RxfleetOptions.cmake, tests/support/postgres-fixture).

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rxfleet::testing {

/// True if the fixture's server is configured ($RXFLEET_TEST_PG_DIR set, as ctest does for
/// tests registered with rxfleet_postgres_tests). A test binary run by hand without it skips
/// its PostgreSQL cases.
bool PostgresAvailable();

/// Connection URI of database `name` on the fixture's server.
std::string PostgresUri(std::string_view name);

/// A fresh, empty database ("t_" + 16 random hex digits) on the fixture's server, dropped on
/// destruction (FORCE: connections still open are ended). Aborts the test binary if it cannot
/// be created.
class TestDatabase {
 public:
  TestDatabase();
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  const std::string& name() const { return name_; }
  /// postgresql:///NAME?host=...&port=...&user=...
  const std::string& uri() const { return uri_; }

 private:
  std::string name_;
  std::string uri_;
};

/// Runs `sql` on database `name` of the fixture's server as the superuser (e.g. to end the
/// store's connections with pg_terminate_backend). Internal with the server's message on
/// failure.
absl::Status RunSql(std::string_view name, std::string_view sql);

/// A PostgreSQL server of a test's own (tests/support/postgres-fixture in a fresh directory),
/// for tests that stop and start it; removed on destruction. Aborts if it cannot start.
class PrivatePostgres {
 public:
  PrivatePostgres();
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  /// URI of database `name` ("postgres" exists; create others with Sql).
  std::string Uri(std::string_view name) const;
  /// Stops the server keeping its data / starts it again. false if the script failed.
  bool Halt();
  bool Resume();

 private:
  std::string dir_;
};

/// The fixture server's directory ($RXFLEET_TEST_PG_DIR) and its data directory, for tests that
/// stop and start the server (pg_ctl); empty if not configured.
std::string PostgresDir();

}  // namespace rxfleet::testing
