// server/store: what only the PostgreSQL store has, against real PostgreSQL 15 servers (the
// ctest fixture's, and servers of a test's own for outages): connection failures and their
// messages, reconnecting after a lost connection, the server lock, batches larger than one
// pipeline chunk, a database outage under a running store, migrate-store's hold on both
// databases, the upgrade of a database written before hold tunings and their wake-ups. The shared
// behaviour: store_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proto/time.h"
#include "server/store/database_lock.h"
#include "server/store/migrate.h"
#include "server/store/postgres_store.h"
#include "server/store/pq.h"
#include "server/store/store.h"
#include "server/store/token_store.h"
#include "tests/server/store_test_util.h"
#include "tests/support/paths.h"
#include "tests/support/postgres.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::PostgresUri;
using ::rxfleet::testing::PrivatePostgres;
using ::rxfleet::testing::RunSql;
using ::rxfleet::testing::TempDir;
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

// Server replicas share the database (the server lock, shared); migrate-store has it alone
// (exclusive): it is refused while a server runs, and servers are refused while it copies.
TEST_F(PostgresStoreTest, ReplicasShareTheServerLockAndMigrationHoldsItAlone) {
  TestDatabase db;
  StoreOptions replica;
  replica.path = db.uri();
  replica.server_lock = ServerLock::kShared;
  StoreOptions migration = replica;
  migration.server_lock = ServerLock::kExclusive;
  absl::StatusOr<std::unique_ptr<Store>> first = Store::Open(replica);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<Store>> second = Store::Open(replica);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<std::unique_ptr<Store>> refused = Store::Open(migration);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("in use by another rxfleet-server"));
  // Local commands open without the lock.
  EXPECT_NE(OpenStore(db.uri()), nullptr);
  first->reset();
  second->reset();
  absl::StatusOr<std::unique_ptr<Store>> alone = Store::Open(migration);
  ASSERT_TRUE(alone.ok()) << alone.status();
  absl::StatusOr<std::unique_ptr<Store>> waiting = Store::Open(replica);
  ASSERT_EQ(waiting.status().code(), absl::StatusCode::kFailedPrecondition) << waiting.status();
  EXPECT_THAT(waiting.status().message(), HasSubstr("migrate-store"));
  alone->reset();
  EXPECT_TRUE(Store::Open(replica).ok());
}

// Two servers never run under one replica id (their leases and agent sessions would be one):
// the second claim is refused until the first store is gone.
TEST_F(PostgresStoreTest, AReplicaIdIsClaimedByOneServerAtATime) {
  TestDatabase db;
  StoreOptions replica;
  replica.path = db.uri();
  replica.server_lock = ServerLock::kShared;
  absl::StatusOr<std::unique_ptr<Store>> first = Store::Open(replica);
  absl::StatusOr<std::unique_ptr<Store>> second = Store::Open(replica);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE((*first)->ClaimReplicaId("fleet-a").ok());
  const absl::Status twin = (*second)->ClaimReplicaId("fleet-a");
  EXPECT_EQ(twin.code(), absl::StatusCode::kFailedPrecondition) << twin;
  EXPECT_THAT(twin.message(), HasSubstr("another rxfleet-server runs with --replica-id fleet-a"));
  EXPECT_TRUE((*second)->ClaimReplicaId("fleet-b").ok());
  EXPECT_TRUE((*second)->Load(10).ok()) << "the store works on after a refused claim";
  first->reset();
  absl::StatusOr<std::unique_ptr<Store>> later = Store::Open(replica);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE((*later)->ClaimReplicaId("fleet-a").ok());
}

// A connection string libpq cannot parse is not echoed with its password.
TEST_F(PostgresStoreTest, AnUnparsableUriIsNotEchoed) {
  StoreOptions options;
  options.path = "postgresql://u:s3cret@[bad/rxfleet";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), ::testing::Not(HasSubstr("s3cret"))) << store.status();
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
      store->SaveRegistry(hosts, events, 1000, kNow - absl::Hours(1), {}, absl::InfinitePast())
          .status();
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

// Replicas on one database: a held lease is refused to others until it expires by the
// database's clock or is released; the take-over moves the epoch and fences the old holder out.
TEST_F(PostgresStoreTest, AHeldLeaseIsRefusedUntilItExpiresAndThenTakenOver) {
  TestDatabase db;
  std::unique_ptr<Store> a = OpenStore(db.uri());
  std::unique_ptr<Store> b = OpenStore(db.uri());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<Lease> held = a->AcquireLease("experiments", "a:7443", absl::Seconds(1));
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<Lease> refused = b->AcquireLease("experiments", "b:7443", absl::Seconds(30));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->holder, "a:7443") << "granted while another holder's lease ran";
  EXPECT_EQ(refused->epoch, held->epoch);

  absl::SleepFor(absl::Milliseconds(1200));  // a's lease expires (it did not renew)
  absl::StatusOr<Lease> taken = b->AcquireLease("experiments", "b:7443", absl::Seconds(30));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->holder, "b:7443");
  EXPECT_EQ(taken->epoch, held->epoch + 1);
  const LeaseFence old{"experiments", "a:7443", held->epoch};
  EXPECT_EQ(a->DeleteWindowsOfExperimentsEndedBefore(absl::Now(), &old).status().code(),
            absl::StatusCode::kAborted);
  // a comes back: it is refused and sees who holds the lease.
  absl::StatusOr<Lease> late = a->AcquireLease("experiments", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->holder, "b:7443");

  // A release hands it over at once.
  ASSERT_TRUE(b->ReleaseLease({"experiments", "b:7443", taken->epoch}).ok());
  absl::StatusOr<Lease> handed = a->AcquireLease("experiments", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_EQ(handed->holder, "a:7443");
  EXPECT_EQ(handed->epoch, taken->epoch + 1);
}

// Racing replicas: exactly one is granted each round.
TEST_F(PostgresStoreTest, RacingReplicasGetOneLeaseHolder) {
  TestDatabase db;
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < 3; ++i) stores.push_back(OpenStore(db.uri()));
  for (int round = 0; round < 10; ++round) {
    const std::string lease = absl::StrCat("job-", round);
    std::atomic<int> granted{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        absl::StatusOr<Lease> got =
            stores[i]->AcquireLease(lease, absl::StrCat("r", i), absl::Seconds(30));
        ASSERT_TRUE(got.ok()) << got.status();
        if (got->holder == absl::StrCat("r", i)) ++granted;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(granted.load(), 1) << lease;
  }
}

// A database of the release before hold tunings (schema 4) keeps its policies, experiments and
// windows through the upgrade, and takes tunings afterwards, continuing its revision.
TEST_F(PostgresStoreTest, UpgradeFromSchemaFourKeepsDataAndAddsTunings) {
  TestDatabase db;
  v1::Experiment experiment;
  experiment.mutable_metadata()->set_name("hold-ab");
  experiment.mutable_metadata()->set_resource_version("2");
  *experiment.mutable_metadata()->mutable_create_time() = common::TimeToProto(kNow);
  experiment.mutable_status()->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  {
    std::unique_ptr<pq::Connection> raw = pq::Connection::Open(db.uri(), absl::Seconds(5));
    MigratePostgresSchema(*raw, 4);
    ASSERT_EQ(raw->Exec("SELECT MAX(version)::int8 FROM schema_migrations").Int(0, 0), 4);
    ASSERT_EQ(raw->Exec("SELECT COUNT(*) FROM pg_tables WHERE tablename = 'tunings'").Int(0, 0), 0);
    raw->Exec("INSERT INTO policies VALUES ('a', 1, $1)",
              pq::Params().Record(MakePolicy("a", 32, "1")));
    raw->Exec(
        "INSERT INTO experiments (name, create_time_ns, end_time_ns, record) "
        "VALUES ('hold-ab', $1, NULL, $2)",
        pq::Params().Int(absl::ToUnixNanos(kNow)).Record(experiment));
    raw->Exec(
        "INSERT INTO metric_windows (experiment, host_id, valid, segment_count, segment, "
        "record) VALUES ('hold-ab', 'h1', true, 0, '', $1)",
        pq::Params().Record(MakeWindow("hold-ab", "h1", {}, true).window));
    raw->Exec("UPDATE meta SET value = 2 WHERE key = 'revision'");
  }
  std::unique_ptr<Store> store = OpenStore(db.uri());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), store->LatestSchemaVersion());
  absl::StatusOr<ConfigState> config = store->LoadConfig();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->revision, 2u);
  ASSERT_EQ(config->policies.size(), 1u);
  EXPECT_EQ(config->policies[0].spec().settings().hold_us(), 32u);
  absl::StatusOr<std::vector<v1::Experiment>> experiments = store->LoadExperiments();
  ASSERT_TRUE(experiments.ok()) << experiments.status();
  ASSERT_EQ(experiments->size(), 1u);
  EXPECT_EQ((*experiments)[0].status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_EQ((*store->CountWindows())["hold-ab"].total, 1u);
  absl::StatusOr<std::vector<v1::HoldTuning>> tunings = store->LoadTunings();
  ASSERT_TRUE(tunings.ok()) << tunings.status();
  EXPECT_TRUE(tunings->empty());

  absl::StatusOr<v1::HoldTuning> created = store->CreateTuning(MakeTuning("tune-a"), kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->metadata().resource_version(), "3");
  std::unique_ptr<pq::Connection> raw = pq::Connection::Open(db.uri(), absl::Seconds(5));
  EXPECT_EQ(raw->Exec("SELECT COUNT(*) FROM schema_migrations WHERE version = 5 AND "
                      "description = 'hold tunings'")
                .Int(0, 0),
            1);
}

// Every tuning write sends the revision's wake-up to listening replicas, with the new revision
// as its payload, at commit; a refused write sends none.
TEST_F(PostgresStoreTest, TuningWritesWakeListeningReplicas) {
  TestDatabase db;
  std::unique_ptr<Store> store = OpenStore(db.uri());
  ASSERT_NE(store, nullptr);
  std::unique_ptr<pq::Connection> listener = pq::Connection::Open(db.uri(), absl::Seconds(5));
  listener->Exec("LISTEN rxfleet_revision");
  std::vector<std::string> payloads;
  // Notifications reach the listener's client some moments after the commit.
  const auto wait_for = [&](size_t count) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (payloads.size() < count && absl::Now() < deadline) {
      listener->Exec("SELECT 1");
      for (std::string& payload : listener->TakeNotifications()) {
        payloads.push_back(std::move(payload));
      }
      if (payloads.size() < count) absl::SleepFor(absl::Milliseconds(10));
    }
    return payloads.size() >= count;
  };

  absl::StatusOr<v1::HoldTuning> created = store->CreateTuning(MakeTuning("tune-a"), kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(wait_for(1)) << "no wake-up for the create";
  EXPECT_EQ(payloads.back(), created->metadata().resource_version());

  EXPECT_EQ(store->CreateTuning(MakeTuning("tune-a"), kNow).status().code(),
            absl::StatusCode::kAlreadyExists);
  v1::HoldTuningStatus stopped;
  stopped.set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
  absl::StatusOr<v1::HoldTuning> updated =
      store->UpdateTuningStatus("tune-a", stopped, kNow, nullptr);
  ASSERT_TRUE(updated.ok()) << updated.status();
  ASSERT_TRUE(wait_for(2)) << "no wake-up for the update";
  EXPECT_EQ(payloads.back(), updated->metadata().resource_version())
      << "the refused create sent a wake-up";

  ASSERT_TRUE(store->DeleteTuning("tune-a").ok());
  ASSERT_TRUE(wait_for(3)) << "no wake-up for the delete";
  EXPECT_EQ(payloads.back(), absl::StrCat(store->LoadConfig()->revision));
  EXPECT_EQ(payloads.size(), 3u);
}

TEST(MigrateStoreSourceTest, AcceptsSqliteUrisAndBarePathsOnly) {
  EXPECT_EQ(*SqlitePathOfSource("sqlite:/var/lib/rxfleet/server.db"), "/var/lib/rxfleet/server.db");
  EXPECT_EQ(*SqlitePathOfSource("sqlite:///var/lib/rxfleet/server.db"),
            "/var/lib/rxfleet/server.db");
  EXPECT_EQ(*SqlitePathOfSource("sqlite:server.db"), "server.db");
  EXPECT_EQ(*SqlitePathOfSource("/srv/server.db"), "/srv/server.db");
  EXPECT_EQ(SqlitePathOfSource("sqlite:").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SqlitePathOfSource("postgresql://db/fleet").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// MigrateStore holds both databases for the copy: a server on either refuses it, and the
// target is left as it was.
TEST_F(PostgresStoreTest, MigrateStoreCopiesOnlyWhenNoServerHoldsEitherDatabase) {
  TempDir dir;
  const std::string source = dir.File("server.db");
  {
    std::unique_ptr<Store> store = OpenStore(source);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
    ASSERT_TRUE(store->CreateTuning(MakeTuning("tune-a"), kNow).ok());
  }
  TestDatabase target;
  {
    absl::StatusOr<DatabaseFileLock> server = DatabaseFileLock::Acquire(source);
    ASSERT_TRUE(server.ok()) << server.status();
    absl::StatusOr<MigrateSummary> refused = MigrateStore(source, target.uri());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
    EXPECT_THAT(
        refused.status().message(),
        HasSubstr(absl::StrCat("database ", source, " is in use by another rxfleet-server")));
  }
  {
    StoreOptions options;
    options.path = target.uri();
    options.server_lock = ServerLock::kShared;  // a server runs on the target
    absl::StatusOr<std::unique_ptr<Store>> server = Store::Open(options);
    ASSERT_TRUE(server.ok()) << server.status();
    absl::StatusOr<MigrateSummary> refused = MigrateStore(source, target.uri());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("in use by another rxfleet-server"));
    EXPECT_TRUE((*server)->Load(10)->policies.empty());
  }
  EXPECT_EQ(MigrateStore(dir.File("none.db"), target.uri()).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<MigrateSummary> copied = MigrateStore(source, target.uri());
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->policies, 1u);
  EXPECT_EQ(copied->tunings, 1u);
  EXPECT_EQ(copied->revision, 2u);
  EXPECT_EQ(copied->bundle_version, 2u);
  EXPECT_EQ(copied->to, OpenStore(target.uri())->path());
  EXPECT_EQ(MigrateStore(source, target.uri()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace rxfleet::server
