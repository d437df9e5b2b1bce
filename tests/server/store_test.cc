// server/store: real SQLite files in temporary directories.
#include "server/store/store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/proto/time.h"
#include "server/store/schema.h"
#include "tests/support/paths.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::TempDir;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1767225600);

v1::Policy MakePolicy(const std::string& name, uint32_t hold_us,
                      const std::string& resource_version = "") {
  v1::Policy policy;
  policy.mutable_metadata()->set_name(name);
  policy.mutable_metadata()->set_resource_version(resource_version);
  policy.mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  return policy;
}

std::unique_ptr<Store> OpenStore(const std::string& path,
                                 absl::Duration busy_timeout = absl::Seconds(5)) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({path, busy_timeout});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

v1::Event MakeEvent(const std::string& name, uint64_t version, absl::Time last_time) {
  v1::Event event;
  event.mutable_metadata()->set_name(name);
  event.mutable_metadata()->set_resource_version(absl::StrCat(version));
  event.set_reason("Connected");
  *event.mutable_last_time() = common::TimeToProto(last_time);
  return event;
}

TEST(StoreTest, FreshDatabaseHasLatestSchemaAndBundleVersionOne) {
  TempDir dir;
  // The directory of the file does not exist yet: Open creates it.
  std::unique_ptr<Store> store = OpenStore(dir.File("var/lib/rxfleet/server.db"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), Store::LatestSchemaVersion());
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->bundle_version, 1u);
  EXPECT_TRUE(state->policies.empty());
  EXPECT_TRUE(state->hosts.empty());
  EXPECT_EQ(state->last_event_version, 0u);

  // WAL journal and synchronous=FULL on the file.
  SQLite::Database raw(dir.File("var/lib/rxfleet/server.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("PRAGMA journal_mode").getString(), "wal");
}

TEST(StoreTest, ApplyAssignsVersionsAndGenerations) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenStore(dir.File("server.db"));
  absl::StatusOr<PolicyWriteResult> created = store->ApplyPolicy(MakePolicy("a", 32), kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->created);
  EXPECT_TRUE(created->changed);
  EXPECT_EQ(created->policy.metadata().resource_version(), "1");
  EXPECT_EQ(created->policy.metadata().generation(), 1);
  EXPECT_FALSE(created->policy.metadata().uid().empty());
  EXPECT_EQ(common::TimeFromProto(created->policy.metadata().create_time()), kNow);
  EXPECT_EQ(created->bundle_version, 2u);

  // The same spec again: nothing moves.
  absl::StatusOr<PolicyWriteResult> same = store->ApplyPolicy(MakePolicy("a", 32), kNow);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(same->changed);
  EXPECT_FALSE(same->created);
  EXPECT_EQ(same->policy.metadata().resource_version(), "1");
  EXPECT_EQ(same->bundle_version, 2u);

  // A spec change bumps generation, resource version and bundle version.
  absl::StatusOr<PolicyWriteResult> changed =
      store->ApplyPolicy(MakePolicy("a", 64), kNow + absl::Seconds(1));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->policy.metadata().resource_version(), "2");
  EXPECT_EQ(changed->policy.metadata().generation(), 2);
  EXPECT_EQ(changed->policy.metadata().uid(), created->policy.metadata().uid());
  EXPECT_EQ(common::TimeFromProto(changed->policy.metadata().create_time()), kNow);
  EXPECT_EQ(changed->bundle_version, 3u);

  // A label-only change keeps the generation.
  v1::Policy labelled = MakePolicy("a", 64);
  (*labelled.mutable_metadata()->mutable_labels())["team"] = "edge";
  absl::StatusOr<PolicyWriteResult> relabelled = store->ApplyPolicy(labelled, kNow);
  ASSERT_TRUE(relabelled.ok()) << relabelled.status();
  EXPECT_EQ(relabelled->policy.metadata().generation(), 2);
  EXPECT_EQ(relabelled->policy.metadata().resource_version(), "3");

  // Resource versions are store-wide: another policy continues the sequence.
  absl::StatusOr<PolicyWriteResult> other = store->ApplyPolicy(MakePolicy("b", 32), kNow);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->policy.metadata().resource_version(), "4");
}

TEST(StoreTest, StaleResourceVersionIsAborted) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenStore(dir.File("server.db"));
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());       // rv 1
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 64, "1"), kNow).ok());  // rv 2

  absl::StatusOr<PolicyWriteResult> stale = store->ApplyPolicy(MakePolicy("a", 96, "1"), kNow);
  ASSERT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(stale.status().message(),
            "policy a was modified (resource version 2, you have 1); get it again and retry");

  absl::StatusOr<PolicyWriteResult> missing = store->ApplyPolicy(MakePolicy("gone", 96, "1"), kNow);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(missing.status().message(), HasSubstr("policy gone does not exist"));

  // Nothing of the failed writes was stored.
  absl::StatusOr<StoredState> state = store->Load(10);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->policies.size(), 1u);
  EXPECT_EQ(state->policies[0].spec().settings().hold_us(), 64u);
  EXPECT_EQ(state->bundle_version, 3u);
}

TEST(StoreTest, DeleteChecksExistenceAndPrecondition) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenStore(dir.File("server.db"));
  EXPECT_EQ(store->DeletePolicy("a", "").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  EXPECT_EQ(store->DeletePolicy("a", "7").status().code(), absl::StatusCode::kAborted);
  absl::StatusOr<PolicyDeleteResult> deleted = store->DeletePolicy("a", "1");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->policy.spec().settings().hold_us(), 32u);
  EXPECT_EQ(deleted->bundle_version, 3u);
  EXPECT_TRUE(store->Load(10)->policies.empty());

  // Created again under the same name: a new uid, and resource versions keep growing.
  absl::StatusOr<PolicyWriteResult> again = store->ApplyPolicy(MakePolicy("a", 32), kNow);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->policy.metadata().uid(), deleted->policy.metadata().uid());
  EXPECT_EQ(again->policy.metadata().resource_version(), "3");
  EXPECT_EQ(again->policy.metadata().generation(), 1);
}

TEST(StoreTest, EverythingSurvivesReopen) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  {
    std::unique_ptr<Store> store = OpenStore(path);
    ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
    ASSERT_TRUE(store->ApplyPolicy(MakePolicy("b", 1024), kNow).ok());
    ASSERT_TRUE(store->DeletePolicy("a", "").ok());
    HostRecord host;
    host.host.mutable_metadata()->set_name("pi5-a");
    host.host.mutable_status()->set_last_acked_version(4);
    host.adapters.emplace_back().mutable_metadata()->set_name("port-2-2");
    host.adapters.back().set_host_id("pi5-a");
    ASSERT_TRUE(
        store->SaveRegistry({host}, {MakeEvent("e1", 1, kNow)}, 100, kNow - absl::Hours(1)).ok());
  }
  std::unique_ptr<Store> store = OpenStore(path);
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->bundle_version, 4u);
  ASSERT_EQ(state->policies.size(), 1u);
  EXPECT_EQ(state->policies[0].metadata().name(), "b");
  ASSERT_EQ(state->hosts.size(), 1u);
  EXPECT_EQ(state->hosts[0].host.status().last_acked_version(), 4u);
  ASSERT_EQ(state->hosts[0].adapters.size(), 1u);
  EXPECT_EQ(state->hosts[0].adapters[0].metadata().name(), "port-2-2");
  ASSERT_EQ(state->events.size(), 1u);
  EXPECT_EQ(state->last_event_version, 1u);
  // Versions continue where they stopped.
  absl::StatusOr<PolicyWriteResult> next = store->ApplyPolicy(MakePolicy("c", 32), kNow);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->policy.metadata().resource_version(), "4");
  EXPECT_EQ(next->bundle_version, 5u);
}

TEST(StoreTest, SaveRegistryReplacesAHostsAdapters) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenStore(dir.File("server.db"));
  HostRecord host;
  host.host.mutable_metadata()->set_name("h1");
  for (const char* id : {"port-1-1", "port-1-2"}) {
    host.adapters.emplace_back().mutable_metadata()->set_name(id);
  }
  ASSERT_TRUE(store->SaveRegistry({host}, {}, 100, kNow).ok());
  // A host-only change leaves the stored adapters alone.
  HostRecord host_only;
  host_only.host = host.host;
  host_only.host.mutable_status()->set_last_acked_version(7);
  host_only.adapters_changed = false;
  ASSERT_TRUE(store->SaveRegistry({host_only}, {}, 100, kNow).ok());
  absl::StatusOr<StoredState> kept = store->Load(100);
  ASSERT_EQ(kept->hosts.size(), 1u);
  EXPECT_EQ(kept->hosts[0].host.status().last_acked_version(), 7u);
  EXPECT_EQ(kept->hosts[0].adapters.size(), 2u);

  host.adapters.erase(host.adapters.begin());
  ASSERT_TRUE(store->SaveRegistry({host}, {}, 100, kNow).ok());
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_EQ(state->hosts.size(), 1u);
  ASSERT_EQ(state->hosts[0].adapters.size(), 1u);
  EXPECT_EQ(state->hosts[0].adapters[0].metadata().name(), "port-1-2");
}

TEST(StoreTest, EventsAreUpsertedByNameAndPruned) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenStore(dir.File("server.db"));
  std::vector<v1::Event> events;
  for (int i = 1; i <= 5; ++i) {
    events.push_back(MakeEvent(absl::StrCat("e", i), i, kNow + absl::Seconds(i)));
  }
  ASSERT_TRUE(store->SaveRegistry({}, events, 100, kNow - absl::Hours(1)).ok());
  // e2 folded again: same name, newer version.
  v1::Event folded = MakeEvent("e2", 6, kNow + absl::Seconds(6));
  folded.set_count(2);
  ASSERT_TRUE(store->SaveRegistry({}, {folded}, 100, kNow - absl::Hours(1)).ok());
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_EQ(state->events.size(), 5u);
  EXPECT_EQ(state->events.back().metadata().name(), "e2");
  EXPECT_EQ(state->events.back().count(), 2u);
  EXPECT_EQ(state->last_event_version, 6u);

  // Keep at most 3 events, and none older than kNow + 3.5 s.
  ASSERT_TRUE(store->SaveRegistry({}, {}, 3, kNow + absl::Milliseconds(3500)).ok());
  state = store->Load(100);
  std::vector<std::string> names;
  for (const v1::Event& e : state->events) names.push_back(e.metadata().name());
  EXPECT_THAT(names, ::testing::ElementsAre("e4", "e5", "e2"));
  ASSERT_TRUE(store->SaveRegistry({}, {}, 100, kNow + absl::Milliseconds(4500)).ok());
  EXPECT_EQ(store->Load(100)->events.size(), 2u);
  // Load returns the newest max_events.
  EXPECT_EQ(store->Load(1)->events.at(0).metadata().name(), "e2");
  EXPECT_EQ(store->Load(100)->last_event_version, 6u);
}

TEST(StoreTest, LockedDatabaseFailsTheWriteAndKeepsTheStoreUsable) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  std::unique_ptr<Store> store = OpenStore(path, absl::Milliseconds(100));
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  {
    // Another process holds the write lock.
    SQLite::Database other(path, SQLite::OPEN_READWRITE);
    other.exec("BEGIN EXCLUSIVE");
    absl::StatusOr<PolicyWriteResult> blocked = store->ApplyPolicy(MakePolicy("b", 32), kNow);
    ASSERT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(blocked.status().message(), HasSubstr("cannot store policy b"));
    EXPECT_THAT(blocked.status().message(), HasSubstr(path));
    EXPECT_THAT(blocked.status().message(), HasSubstr("locked"));
    other.exec("ROLLBACK");
  }
  absl::StatusOr<StoredState> state = store->Load(10);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->policies.size(), 1u);
  EXPECT_EQ(state->bundle_version, 2u);
  absl::StatusOr<PolicyWriteResult> retried = store->ApplyPolicy(MakePolicy("b", 32), kNow);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->bundle_version, 3u);
}

TEST(StoreTest, FullDatabaseFailsTheWriteWithoutHalfWrites) {
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
  const absl::Status full = (*store)->SaveRegistry({small, big}, {}, 100, kNow);
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr("cannot save the registry"));
  EXPECT_THAT(full.message(), HasSubstr("full"));

  // Nothing of the batch was stored, not even the small host; the store keeps working.
  absl::StatusOr<StoredState> state = (*store)->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->hosts.empty());
  ASSERT_TRUE((*store)->SaveRegistry({small}, {}, 100, kNow).ok());
  absl::StatusOr<PolicyWriteResult> next = (*store)->ApplyPolicy(MakePolicy("b", 32), kNow);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->bundle_version, 3u);
}

TEST(StoreTest, RefusesNewerSchemaAndForeignFiles) {
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

TEST(StoreTest, MigrationsAreRecordedOnce) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  { ASSERT_NE(OpenStore(path), nullptr); }
  { ASSERT_NE(OpenStore(path), nullptr); }
  SQLite::Database raw(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM schema_migrations").getInt(),
            Store::LatestSchemaVersion());
}

// Files from before the token table was a migration: the token store had created `tokens`
// itself on a schema-2 file. Migration 3 keeps the table and its tokens.
TEST(StoreTest, TokenTableIsAMigrationAndKeepsTokensOfOlderFiles) {
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
  EXPECT_EQ(*store->SchemaVersion(), Store::LatestSchemaVersion());
  SQLite::Database raw(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(raw.execAndGet("SELECT created_by FROM tokens WHERE name = 'ops'").getString(),
            "local administrator");
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM schema_migrations WHERE version = 3 AND "
                           "description = 'operator tokens'")
                .getInt(),
            1);
}

// A file of schema 4 (the release before audit events had their own table) kept audit events
// among the fleet events. Migration 5 moves them, so the fleet events' count cannot evict them.
TEST(StoreTest, UpgradeFromSchemaFourMovesAuditEventsOutOfTheFleetEvents) {
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
  EXPECT_EQ(*store->SchemaVersion(), Store::LatestSchemaVersion());
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
  ASSERT_TRUE(store->SaveRegistry({}, newer, 10, kNow - absl::Hours(1)).ok());
  absl::StatusOr<StoredState> state = store->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->events.size(), 11u);
  EXPECT_EQ(state->events.front().metadata().name(), "audit-1");
  EXPECT_EQ(state->events.front().audit().action(), "ApplyPolicy");
}

// `rxfleet-server tokens` queues audit events in the file; a save that persists them takes
// them off the queue in the same transaction.
TEST(StoreTest, LocalAuditEventsWaitUntilASaveTakesThem) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  std::unique_ptr<Store> command = OpenStore(path);
  std::unique_ptr<Store> server = OpenStore(path);
  ASSERT_NE(command, nullptr);
  ASSERT_NE(server, nullptr);
  v1::Event event;
  event.set_reason("CreateToken");
  event.mutable_audit()->set_actor("local administrator (OS user root)");
  ASSERT_TRUE(command->AddLocalAudit(event, kNow).ok());
  absl::StatusOr<std::vector<LocalAuditEvent>> pending = server->PendingLocalAudit();
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].event.audit().actor(), "local administrator (OS user root)");
  EXPECT_EQ((*pending)[0].time, kNow);

  // A save without the id leaves it queued; a save with it removes it.
  ASSERT_TRUE(server->SaveRegistry({}, {}, 100, kNow - absl::Hours(1)).ok());
  EXPECT_EQ(server->PendingLocalAudit()->size(), 1u);
  v1::Event recorded = MakeEvent("audit-1", 1, kNow);
  *recorded.mutable_audit() = event.audit();
  const int64_t id = (*pending)[0].id;
  ASSERT_TRUE(server->SaveRegistry({}, {recorded}, 100, kNow - absl::Hours(1), {id}).ok());
  EXPECT_TRUE(server->PendingLocalAudit()->empty());
  absl::StatusOr<StoredState> state = server->Load(100);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->events.size(), 1u);
  EXPECT_EQ(state->events[0].audit().actor(), "local administrator (OS user root)");
}

StoredWindow MakeWindow(const std::string& experiment, const std::string& host,
                        std::vector<std::string> segment, bool valid) {
  StoredWindow w;
  w.experiment = experiment;
  w.host_id = host;
  w.segment = std::move(segment);
  w.window.set_adapter_id("port-1");
  w.window.set_experiment(experiment);
  w.window.set_arm("short");
  w.window.set_rx_bytes(12345);
  w.window.set_valid(valid);
  return w;
}

TEST(StoreTest, ExperimentsAndWindowsSurviveReopen) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  {
    std::unique_ptr<Store> store = OpenStore(path);
    v1::Experiment e;
    e.mutable_metadata()->set_name("hold-ab");
    e.mutable_status()->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
    absl::StatusOr<v1::Experiment> created = store->CreateExperiment(e, kNow);
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->metadata().generation(), 1);
    EXPECT_FALSE(created->metadata().uid().empty());
    EXPECT_EQ(store->CreateExperiment(e, kNow).status().code(), absl::StatusCode::kAlreadyExists);
    ASSERT_TRUE(store
                    ->AddWindows({MakeWindow("hold-ab", "h1", {"super", ""}, true),
                                  MakeWindow("hold-ab", "h2", {"high", "pi1"}, false),
                                  MakeWindow("other", "h1", {}, true)})
                    .ok());
    v1::ExperimentStatus stopped = created->status();
    stopped.set_phase(v1::EXPERIMENT_PHASE_STOPPED);
    *stopped.mutable_end_time() = common::TimeToProto(kNow + absl::Hours(1));
    absl::StatusOr<v1::Experiment> updated =
        store->UpdateExperimentStatus("hold-ab", stopped, kNow + absl::Hours(1));
    ASSERT_TRUE(updated.ok()) << updated.status();
    EXPECT_NE(updated->metadata().resource_version(), created->metadata().resource_version());
    EXPECT_EQ(store->UpdateExperimentStatus("nope", stopped, kNow).status().code(),
              absl::StatusCode::kNotFound);
    const uint64_t before = store->Load(1)->bundle_version;
    EXPECT_EQ(*store->BumpBundleVersion(), before + 1);
  }
  std::unique_ptr<Store> store = OpenStore(path);
  absl::StatusOr<std::vector<v1::Experiment>> experiments = store->LoadExperiments();
  ASSERT_TRUE(experiments.ok()) << experiments.status();
  ASSERT_EQ(experiments->size(), 1u);
  EXPECT_EQ((*experiments)[0].status().phase(), v1::EXPERIMENT_PHASE_STOPPED);
  std::vector<std::pair<std::string, std::vector<std::string>>> read;
  ASSERT_TRUE(store
                  ->ForEachWindow("hold-ab",
                                  [&](const std::string& host, std::vector<std::string> segment,
                                      const v1::MetricWindow& window) {
                                    EXPECT_EQ(window.rx_bytes(), 12345u);
                                    read.emplace_back(host, std::move(segment));
                                  })
                  .ok());
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].first, "h1");
  EXPECT_EQ(read[0].second, (std::vector<std::string>{"super", ""}));
  EXPECT_EQ(read[1].second, (std::vector<std::string>{"high", "pi1"}));
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = store->CountWindows();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)["hold-ab"].total, 2u);
  EXPECT_EQ((*counts)["hold-ab"].valid, 1u);
  // Retention: only the windows of experiments that ended before the cut-off go.
  EXPECT_EQ(*store->DeleteWindowsOfExperimentsEndedBefore(kNow + absl::Minutes(30)), 0u);
  EXPECT_EQ(*store->DeleteWindowsOfExperimentsEndedBefore(kNow + absl::Hours(2)), 2u);
  EXPECT_EQ((*store->CountWindows())["other"].total, 1u);
}

TEST(StoreTest, LockedDatabaseFailsAWindowWriteAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.File("server.db");
  std::unique_ptr<Store> store = OpenStore(path, absl::Milliseconds(100));
  {
    SQLite::Database other(path, SQLite::OPEN_READWRITE);
    other.exec("BEGIN EXCLUSIVE");
    const absl::Status blocked = store->AddWindows(
        {MakeWindow("hold-ab", "h1", {}, true), MakeWindow("hold-ab", "h1", {}, true)});
    EXPECT_EQ(blocked.code(), absl::StatusCode::kUnavailable);
    other.exec("ROLLBACK");
  }
  EXPECT_TRUE(store->CountWindows()->empty());
  EXPECT_TRUE(store->AddWindows({MakeWindow("hold-ab", "h1", {}, true)}).ok());
  EXPECT_EQ((*store->CountWindows())["hold-ab"].total, 1u);
}

}  // namespace
}  // namespace rxfleet::server
