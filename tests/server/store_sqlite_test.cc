// server/store: what only the SQLite store has (real files in temporary directories): the
// WAL journal, the file size limit standing in for a full disk, foreign files, and the
// upgrades of files written by older releases (schema 4 and 8). The shared behaviour:
// store_test.cc.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/proto/time.h"
#include "server/store/schema.h"
#include "server/store/store.h"
#include "tests/server/store_test_util.h"
#include "tests/support/paths.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::TempDir;
using ::testing::HasSubstr;
using namespace store_test;  // NOLINT(google-build-using-namespace): the records of every test

TEST(SqliteStoreTest, FreshFileUsesTheWalJournal) {
  TempDir dir;
  // The directory of the file does not exist yet: Open creates it.
  std::unique_ptr<Store> store = OpenStore(dir.File("var/lib/rxfleet/server.db"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), server::LatestSchemaVersion());
  SQLite::Database raw(dir.File("var/lib/rxfleet/server.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("PRAGMA journal_mode").getString(), "wal");
}

TEST(SqliteStoreTest, FullDatabaseFailsTheWriteWithoutHalfWrites) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  StoreOptions options;
  options.path = path;
  options.max_size_bytes = 256 * 1024;  // the same SQLITE_FULL a full disk gives
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->ApplyPolicy(MakePolicy("a", 32), kNow).ok());

  HostRecord small;
  small.host.mutable_metadata()->set_name("small");
  HostRecord big;
  big.host.mutable_metadata()->set_name("big");
  for (int i = 0; i < 100; ++i) {
    v1::Adapter& adapter = big.adapters.emplace_back();
    adapter.mutable_metadata()->set_name(absl::StrCat("port-1-", i));
    adapter.mutable_status()->set_product(std::string(8000, 'p'));
  }
  const absl::Status full =
      (*store)->SaveRegistry({small, big}, {}, 100, kNow, {}, absl::InfinitePast()).status();
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr("cannot save the registry"));
  EXPECT_THAT(full.message(), HasSubstr("full"));

  // Nothing of the batch was stored, not even the small host; the store keeps working.
  absl::StatusOr<StoredState> state = (*store)->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->hosts.empty());
  ASSERT_TRUE((*store)->SaveRegistry({small}, {}, 100, kNow, {}, absl::InfinitePast()).ok());
  absl::StatusOr<PolicyWriteResult> next = (*store)->ApplyPolicy(MakePolicy("b", 32), kNow);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->bundle_version, 3u);
}

TEST(SqliteStoreTest, RefusesNewerSchemaAndForeignFiles) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  { ASSERT_NE(OpenStore(path), nullptr); }
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE);
    raw.exec("INSERT INTO schema_migrations VALUES (99, 'from the future', 0)");
  }
  absl::StatusOr<std::unique_ptr<Store>> newer = Store::Open({path});
  ASSERT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(newer.status().message(), HasSubstr("schema version 99"));

  const std::string junk = dir.File("junk.db");
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(junk, std::string(4096, 'x')).ok());
  absl::StatusOr<std::unique_ptr<Store>> foreign = Store::Open({junk});
  ASSERT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(foreign.status().message(), HasSubstr(junk));

  EXPECT_EQ(Store::Open({""}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SqliteStoreTest, TokenTableIsAMigrationAndKeepsTokensOfOlderFiles) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT "
        "NULL, applied_time_ns INTEGER NOT NULL);"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
        "INSERT INTO meta VALUES ('bundle_version', 1), ('revision', 0), "
        "('last_event_version', 0);"
        "CREATE TABLE policies (name TEXT PRIMARY KEY, resource_version INTEGER NOT NULL, "
        "record BLOB NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE hosts (id TEXT PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE adapters (host_id TEXT NOT NULL, id TEXT NOT NULL, record BLOB NOT NULL, "
        "PRIMARY KEY (host_id, id)) WITHOUT ROWID;"
        "CREATE TABLE events (resource_version INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
        "last_time_ns INTEGER NOT NULL, record BLOB NOT NULL);"
        "CREATE TABLE experiments (name TEXT PRIMARY KEY, create_time_ns INTEGER NOT NULL, "
        "end_time_ns INTEGER, record BLOB NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE metric_windows (id INTEGER PRIMARY KEY, experiment TEXT NOT NULL, "
        "host_id TEXT NOT NULL, valid INTEGER NOT NULL, segment_count INTEGER NOT NULL, "
        "segment TEXT NOT NULL, record BLOB NOT NULL);"
        "INSERT INTO schema_migrations VALUES (1, 'one', 0), (2, 'two', 0);"
        "CREATE TABLE tokens (name TEXT PRIMARY KEY, role TEXT NOT NULL, hash BLOB NOT NULL "
        "UNIQUE, create_time_us INTEGER NOT NULL, created_by TEXT NOT NULL) WITHOUT ROWID;"
        "INSERT INTO tokens VALUES ('ops', 'operator', x'00', 0, 'local administrator');");
  }
  std::unique_ptr<Store> store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), server::LatestSchemaVersion());
  SQLite::Database raw(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("SELECT created_by FROM tokens WHERE name = 'ops'").getString(),
            "local administrator");
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM schema_migrations WHERE version = 3 AND "
                           "description = 'operator tokens'")
                .getInt(),
            1);
}

TEST(SqliteStoreTest, UpgradeFromSchemaFourMovesAuditEventsOutOfTheFleetEvents) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_TRUE(MigrateSchema(raw, path, 4).ok());
    ASSERT_EQ(raw.execAndGet("SELECT MAX(version) FROM schema_migrations").getInt(), 4);
    SQLite::Statement insert(raw, "INSERT INTO events VALUES (?, ?, ?, ?)");
    auto put = [&](const v1::Event& event, int64_t version) {
      const std::string record = event.SerializeAsString();
      insert.bind(1, version);
      insert.bind(2, event.metadata().name());
      insert.bind(3, absl::ToUnixNanos(kNow));
      insert.bind(4, record.data(), static_cast<int>(record.size()));
      insert.exec();
      insert.reset();
    };
    v1::Event audit = MakeEvent("audit-1", 1, kNow);
    audit.mutable_audit()->set_actor("token:ops");
    audit.mutable_audit()->set_action("ApplyPolicy");
    put(audit, 1);
    for (int version = 2; version <= 11; ++version) {
      put(MakeEvent(absl::StrCat("fleet-", version), version, kNow), version);
    }
  }
  std::unique_ptr<Store> store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), server::LatestSchemaVersion());
  {
    SQLite::Database raw(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("SELECT name FROM audit_events").getString(), "audit-1");
    EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM events").getInt(), 10);
  }
  // Ten more fleet events with a limit of ten push out every older fleet event, never the
  // audit event.
  std::vector<v1::Event> newer;
  for (int version = 12; version <= 21; ++version) {
    newer.push_back(MakeEvent(absl::StrCat("fleet-", version), version, kNow));
  }
  ASSERT_TRUE(
      store->SaveRegistry({}, newer, 10, kNow - absl::Hours(1), {}, absl::InfinitePast()).ok());
  absl::StatusOr<StoredState> state = store->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->events.size(), 11u);
  EXPECT_EQ(state->events.front().metadata().name(), "audit-1");
  EXPECT_EQ(state->events.front().audit().action(), "ApplyPolicy");
}

// A file of the release before hold tunings (schema 8) keeps its policies, experiments and
// windows through the upgrade, and takes tunings afterwards, continuing its revision.
TEST(SqliteStoreTest, UpgradeFromSchemaEightKeepsDataAndAddsTunings) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  v1::Experiment experiment;
  experiment.mutable_metadata()->set_name("hold-ab");
  experiment.mutable_metadata()->set_resource_version("2");
  *experiment.mutable_metadata()->mutable_create_time() = common::TimeToProto(kNow);
  experiment.mutable_status()->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_TRUE(MigrateSchema(raw, path, 8).ok());
    ASSERT_EQ(raw.execAndGet("SELECT MAX(version) FROM schema_migrations").getInt(), 8);
    ASSERT_EQ(raw.execAndGet("SELECT COUNT(*) FROM sqlite_master WHERE name = 'tunings'").getInt(),
              0);
    const std::string policy = MakePolicy("a", 32, "1").SerializeAsString();
    SQLite::Statement insert_policy(raw, "INSERT INTO policies VALUES ('a', 1, ?)");
    insert_policy.bind(1, policy.data(), static_cast<int>(policy.size()));
    insert_policy.exec();
    const std::string record = experiment.SerializeAsString();
    SQLite::Statement insert_experiment(raw,
                                        "INSERT INTO experiments (name, create_time_ns, "
                                        "end_time_ns, record) VALUES ('hold-ab', ?, NULL, ?)");
    insert_experiment.bind(1, absl::ToUnixNanos(kNow));
    insert_experiment.bind(2, record.data(), static_cast<int>(record.size()));
    insert_experiment.exec();
    const std::string window = MakeWindow("hold-ab", "h1", {}, true).window.SerializeAsString();
    SQLite::Statement insert_window(raw,
                                    "INSERT INTO metric_windows (experiment, host_id, valid, "
                                    "segment_count, segment, record) "
                                    "VALUES ('hold-ab', 'h1', 1, 0, '', ?)");
    insert_window.bind(1, window.data(), static_cast<int>(window.size()));
    insert_window.exec();
    raw.exec("UPDATE meta SET value = 2 WHERE key = 'revision'");
  }
  std::unique_ptr<Store> store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), server::LatestSchemaVersion());
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
  SQLite::Database raw(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM schema_migrations WHERE version = 9 AND "
                           "description = 'hold tunings'")
                .getInt(),
            1);
}

TEST(SqliteStoreTest, MigrationsAreRecordedOnce) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  { ASSERT_NE(OpenStore(path), nullptr); }
  { ASSERT_NE(OpenStore(path), nullptr); }
  SQLite::Database raw(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM schema_migrations").getInt(),
            server::LatestSchemaVersion());
}

// One server process owns an SQLite file (its lock file), so the lease is always granted: a
// restarted server under another replica id takes it over at once, with a new epoch, and the
// previous holder's fence no longer passes.
TEST(SqliteStoreTest, TheLeaseIsAlwaysGrantedAndTakenOver) {
  TempDir dir;
  std::unique_ptr<Store> store = store_test::OpenStore(dir.File("server.db"));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<Lease> first = store->AcquireLease("experiments", "a:7443", absl::Minutes(1));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Lease> taken = store->AcquireLease("experiments", "b:7443", absl::Minutes(1));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->holder, "b:7443");
  EXPECT_EQ(taken->epoch, first->epoch + 1);
  const LeaseFence old{"experiments", "a:7443", first->epoch};
  EXPECT_EQ(store->DeleteWindowsOfExperimentsEndedBefore(absl::Now(), &old).status().code(),
            absl::StatusCode::kAborted);
  const LeaseFence current{"experiments", "b:7443", taken->epoch};
  EXPECT_TRUE(store->DeleteWindowsOfExperimentsEndedBefore(absl::Now(), &current).ok());
}

}  // namespace
}  // namespace rxfleet::server
