// server/store: what only the PostgreSQL store has, against real PostgreSQL 15 servers (the
// ctest fixture's, and servers of a test's own for outages): connection failures and their
// messages, reconnecting after a lost connection, the server lock, batches larger than one
// pipeline chunk, and a database outage under a running store. The shared behaviour:
// store_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/store/pq.h"
#include "server/store/store.h"
#include "server/store/token_store.h"
#include "tests/server/store_test_util.h"
#include "tests/support/postgres.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::PostgresUri;
using ::rxfleet::testing::PrivatePostgres;
using ::rxfleet::testing::RunSql;
using ::rxfleet::testing::TestDatabase;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace store_test;  // NOLINT(google-build-using-namespace): the records of every test

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rxfleet::testing::PostgresAvailable()) {
      GTEST_SKIP() << "no test PostgreSQL server: RXFLEET_TEST_PG_DIR is unset (ctest sets it)";
    }
  }
};

TEST(PostgresUriTest, SelectsTheBackend) {
  EXPECT_TRUE(IsPostgresUri("postgresql://db.example:5432/rxfleet"));
  EXPECT_TRUE(IsPostgresUri("postgres://"));
  EXPECT_FALSE(IsPostgresUri("/var/lib/rxfleet/server.db"));
  EXPECT_FALSE(IsPostgresUri("postgresql.db"));
  EXPECT_EQ(pq::DescribeConninfo("postgresql://rx:secret@db.example:6432/fleet"),
            "rx@db.example:6432/fleet");
  EXPECT_EQ(pq::DescribeConninfo("postgresql://"), "(libpq defaults)");
}

TEST(PostgresUriTest, UnreachableServerIsUnavailableAndTheMessageHasNoPassword) {
  StoreOptions options;
  // Port 1 on loopback: nothing listens; the connect fails at once.
  options.path = "postgresql://rx:hunter2@127.0.0.1:1/fleet";
  options.busy_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_EQ(store.status().code(), absl::StatusCode::kUnavailable) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("cannot open the database"));
  EXPECT_THAT(store.status().message(), HasSubstr("rx@127.0.0.1:1/fleet"));
  EXPECT_THAT(store.status().message(), Not(HasSubstr("hunter2")));
  EXPECT_EQ(TokenStore::Open(options.path).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(PostgresStoreTest, MissingDatabaseIsAFailedPrecondition) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({PostgresUri("no_such_database")});
  ASSERT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("does not exist"));
}

// The database ends the store's connection (a restart, a failover, an administrator): the call
// in progress fails with Unavailable, the next one reconnects, and nothing is half-written.
TEST_F(PostgresStoreTest, LostConnectionFailsOneCallAndTheNextReconnects) {
  TestDatabase db;
  std::unique_ptr<Store> store = OpenStore(db.uri());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  ASSERT_TRUE(RunSql("postgres", absl::StrCat("SELECT pg_terminate_backend(pid) FROM "
                                              "pg_stat_activity WHERE datname = '",
                                              db.name(), "'"))
                  .ok());
  absl::StatusOr<PolicyWriteResult> lost = store->ApplyPolicy(MakePolicy("b", 64), kNow);
  ASSERT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_THAT(lost.status().message(), HasSubstr("cannot store policy b"));

  absl::StatusOr<PolicyWriteResult> retried = store->ApplyPolicy(MakePolicy("b", 64), kNow);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->bundle_version, 3u);
  EXPECT_EQ(store->Load(10)->policies.size(), 2u);
}

TEST_F(PostgresStoreTest, ExclusiveStoreKeepsASecondServerOut) {
  TestDatabase db;
  StoreOptions options;
  options.path = db.uri();
  options.exclusive = true;
  absl::StatusOr<std::unique_ptr<Store>> first = Store::Open(options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<Store>> second = Store::Open(options);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another rxfleet-server"));
  // Local commands open without the lock.
  EXPECT_NE(OpenStore(db.uri()), nullptr);
  first->reset();
  absl::StatusOr<std::unique_ptr<Store>> after = Store::Open(options);
  EXPECT_TRUE(after.ok()) << after.status();
}

// Batches are sent in pipeline chunks of 256 statements: a save of 1,000 hosts with 3 adapters
// each spans many, and a failing row in the last chunk rolls back every chunk before it.
TEST_F(PostgresStoreTest, LargeBatchesAreAllOrNothing) {
  TestDatabase db;
  std::unique_ptr<Store> store = OpenStore(db.uri());
  ASSERT_NE(store, nullptr);
  std::vector<HostRecord> hosts(1000);
  for (size_t i = 0; i < hosts.size(); ++i) {
    hosts[i].host.mutable_metadata()->set_name(absl::StrCat("host-", i));
    for (int port = 1; port <= 3; ++port) {
      hosts[i].adapters.emplace_back().mutable_metadata()->set_name(absl::StrCat("port-1-", port));
    }
  }
  std::vector<v1::Event> events;
  for (int i = 1; i <= 300; ++i) events.push_back(MakeEvent(absl::StrCat("e", i), i, kNow));
  events.push_back(MakeEvent("duplicate-version", 300, kNow));  // events.resource_version is unique
  const absl::Status failed =
      store->SaveRegistry(hosts, events, 1000, kNow - absl::Hours(1), {}, absl::InfinitePast());
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("cannot save the registry"));
  absl::StatusOr<StoredState> empty = store->Load(1000);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->hosts.empty());
  EXPECT_TRUE(empty->events.empty());

  events.pop_back();
  ASSERT_TRUE(
      store->SaveRegistry(hosts, events, 1000, kNow - absl::Hours(1), {}, absl::InfinitePast())
          .ok());
  absl::StatusOr<StoredState> state = store->Load(1000);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->hosts.size(), 1000u);
  EXPECT_EQ(state->hosts[999].adapters.size(), 3u);
  EXPECT_EQ(state->events.size(), 300u);
  EXPECT_EQ(state->last_event_version, 300u);
}

// The database goes away under a running store and comes back: calls fail with Unavailable
// while it is down, nothing acknowledged is lost, and the store works again by itself.
TEST(PostgresOutageTest, WritesFailWhileTheDatabaseIsDownAndResumeAfter) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  PrivatePostgres server;
  StoreOptions options;
  options.path = server.Uri("postgres");
  options.busy_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->ApplyPolicy(MakePolicy("a", 32), kNow).ok());

  ASSERT_TRUE(server.Halt());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PolicyWriteResult> down = (*store)->ApplyPolicy(MakePolicy("b", 64), kNow);
    ASSERT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  }
  EXPECT_EQ((*store)->Load(10).status().code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(server.Resume());
  absl::StatusOr<PolicyWriteResult> back = (*store)->ApplyPolicy(MakePolicy("b", 64), kNow);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bundle_version, 3u);
  absl::StatusOr<StoredState> state = (*store)->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->policies.size(), 2u);
}

}  // namespace
}  // namespace rxfleet::server
