// server/store: the behaviour both stores promise (server/store/store.h), run against each: a
// real SQLite file in a temporary directory and a real PostgreSQL database on the test server
// (ctest fixture "postgres"). What only one backend has is in store_sqlite_test.cc and
// store_postgres_test.cc.
#include "server/store/store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "absl/strings/str_join.h"
#include "common/proto/time.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/store/migrate.h"
#include "server/store/pq.h"
#include "server/store/token_store.h"
#include "tests/server/store_test_util.h"
#include "tests/support/paths.h"
#include "tests/support/postgres.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::TestDatabase;
using ::testing::HasSubstr;
using namespace store_test;  // NOLINT(google-build-using-namespace): the records of every test

enum class Backend { kSqlite, kPostgres };

// Another connection holding every lock a store write needs, until destroyed.
class WriteLock {
 public:
  WriteLock(Backend backend, const std::string& where) {
    if (backend == Backend::kSqlite) {
      sqlite_.emplace(where, SQLite::OPEN_READWRITE);
      sqlite_->exec("BEGIN EXCLUSIVE");
    } else {
      pg_ = pq::Connection::Open(where, absl::Seconds(5));
      pg_->Exec("BEGIN");
      pg_->Exec("LOCK TABLE meta, policies, metric_windows IN ACCESS EXCLUSIVE MODE");
    }
  }
  ~WriteLock() {
    if (sqlite_.has_value()) sqlite_->exec("ROLLBACK");
    if (pg_ != nullptr) pg_->Exec("ROLLBACK");
  }

 private:
  std::optional<SQLite::Database> sqlite_;
  std::unique_ptr<pq::Connection> pg_;
};

class StoreContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kSqlite) {
      location_ = dir_.File("var/lib/rxfleet/server.db");  // Open creates the directories
      return;
    }
    if (!rxfleet::testing::PostgresAvailable()) {
      GTEST_SKIP() << "no test PostgreSQL server: RXFLEET_TEST_PG_DIR is unset (ctest sets it)";
    }
    database_.emplace();
    location_ = database_->uri();
  }

  const std::string& location() const { return location_; }

  // Marks the database as written by a newer program (schema version 99).
  void AddFutureSchemaRow() {
    if (GetParam() == Backend::kSqlite) {
      SQLite::Database raw(location_, SQLite::OPEN_READWRITE);
      raw.exec("INSERT INTO schema_migrations VALUES (99, 'from the future', 0)");
    } else {
      pq::Connection::Open(location_, absl::Seconds(5))
          ->Exec("INSERT INTO schema_migrations VALUES (99, 'from the future', 0)");
    }
  }

  TempDir dir_;
  std::optional<TestDatabase> database_;
  std::string location_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const ::testing::TestParamInfo<Backend>& param) {
                           return param.param == Backend::kSqlite ? "Sqlite" : "Postgres";
                         });

TEST_P(StoreContractTest, FreshDatabaseHasLatestSchemaAndBundleVersionOne) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), store->LatestSchemaVersion());
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->bundle_version, 1u);
  EXPECT_TRUE(state->policies.empty());
  EXPECT_TRUE(state->hosts.empty());
  EXPECT_EQ(state->last_event_version, 0u);
}

TEST_P(StoreContractTest, MigrationsAreAppliedOnceAndNewerSchemasRefused) {
  { ASSERT_NE(OpenStore(location()), nullptr); }
  std::unique_ptr<Store> again = OpenStore(location());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(*again->SchemaVersion(), again->LatestSchemaVersion());
  again.reset();
  AddFutureSchemaRow();
  absl::StatusOr<std::unique_ptr<Store>> newer = Store::Open({location()});
  ASSERT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition) << newer.status();
  EXPECT_THAT(newer.status().message(), HasSubstr("schema version 99"));
}

TEST_P(StoreContractTest, ApplyAssignsVersionsAndGenerations) {
  std::unique_ptr<Store> store = OpenStore(location());
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

TEST_P(StoreContractTest, StaleResourceVersionIsAborted) {
  std::unique_ptr<Store> store = OpenStore(location());
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

TEST_P(StoreContractTest, DeleteChecksExistenceAndPrecondition) {
  std::unique_ptr<Store> store = OpenStore(location());
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

TEST_P(StoreContractTest, EverythingSurvivesReopen) {
  const std::string& path = location();
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
    ASSERT_TRUE(store
                    ->SaveRegistry({host}, {MakeEvent("e1", 1, kNow)}, 100, kNow - absl::Hours(1),
                                   {}, absl::InfinitePast())
                    .ok());
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

TEST_P(StoreContractTest, SaveRegistryReplacesAHostsAdapters) {
  std::unique_ptr<Store> store = OpenStore(location());
  HostRecord host;
  host.host.mutable_metadata()->set_name("h1");
  for (const char* id : {"port-1-1", "port-1-2"}) {
    host.adapters.emplace_back().mutable_metadata()->set_name(id);
  }
  ASSERT_TRUE(store->SaveRegistry({host}, {}, 100, kNow, {}, absl::InfinitePast()).ok());
  // A host-only change leaves the stored adapters alone.
  HostRecord host_only;
  host_only.host = host.host;
  host_only.host.mutable_status()->set_last_acked_version(7);
  host_only.adapters_changed = false;
  ASSERT_TRUE(store->SaveRegistry({host_only}, {}, 100, kNow, {}, absl::InfinitePast()).ok());
  absl::StatusOr<StoredState> kept = store->Load(100);
  ASSERT_EQ(kept->hosts.size(), 1u);
  EXPECT_EQ(kept->hosts[0].host.status().last_acked_version(), 7u);
  EXPECT_EQ(kept->hosts[0].adapters.size(), 2u);

  host.adapters.erase(host.adapters.begin());
  ASSERT_TRUE(store->SaveRegistry({host}, {}, 100, kNow, {}, absl::InfinitePast()).ok());
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_EQ(state->hosts.size(), 1u);
  ASSERT_EQ(state->hosts[0].adapters.size(), 1u);
  EXPECT_EQ(state->hosts[0].adapters[0].metadata().name(), "port-1-2");
}

TEST_P(StoreContractTest, EventsAreUpsertedByNameAndPruned) {
  std::unique_ptr<Store> store = OpenStore(location());
  std::vector<v1::Event> events;
  for (int i = 1; i <= 5; ++i) {
    events.push_back(MakeEvent(absl::StrCat("e", i), i, kNow + absl::Seconds(i)));
  }
  ASSERT_TRUE(
      store->SaveRegistry({}, events, 100, kNow - absl::Hours(1), {}, absl::InfinitePast()).ok());
  // e2 folded again: same name, newer version.
  v1::Event folded = MakeEvent("e2", 6, kNow + absl::Seconds(6));
  folded.set_count(2);
  ASSERT_TRUE(
      store->SaveRegistry({}, {folded}, 100, kNow - absl::Hours(1), {}, absl::InfinitePast()).ok());
  absl::StatusOr<StoredState> state = store->Load(100);
  ASSERT_EQ(state->events.size(), 5u);
  EXPECT_EQ(state->events.back().metadata().name(), "e2");
  EXPECT_EQ(state->events.back().count(), 2u);
  EXPECT_EQ(state->last_event_version, 6u);

  // Keep at most 3 events, and none older than kNow + 3.5 s.
  ASSERT_TRUE(
      store->SaveRegistry({}, {}, 3, kNow + absl::Milliseconds(3500), {}, absl::InfinitePast())
          .ok());
  state = store->Load(100);
  std::vector<std::string> names;
  for (const v1::Event& e : state->events) names.push_back(e.metadata().name());
  EXPECT_THAT(names, ::testing::ElementsAre("e4", "e5", "e2"));
  ASSERT_TRUE(
      store->SaveRegistry({}, {}, 100, kNow + absl::Milliseconds(4500), {}, absl::InfinitePast())
          .ok());
  EXPECT_EQ(store->Load(100)->events.size(), 2u);
  // Load returns the newest max_events.
  EXPECT_EQ(store->Load(1)->events.at(0).metadata().name(), "e2");
  EXPECT_EQ(store->Load(100)->last_event_version, 6u);
}

// Servers sharing a database number their events there: an event saved without a version
// gets the next one (and a new event the name ev-VERSION), in commit order across
// connections, and LoadEventsAfter follows them, fleet and audit alike.
TEST_P(StoreContractTest, TheStoreNumbersEventsSavedWithoutAVersion) {
  std::unique_ptr<Store> a = OpenStore(location());
  std::unique_ptr<Store> b = OpenStore(location());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const auto unnumbered = [](const std::string& reason, bool audit) {
    v1::Event e = MakeEvent("", 0, kNow);
    e.mutable_metadata()->clear_name();
    e.mutable_metadata()->clear_resource_version();
    e.set_reason(reason);
    if (audit) e.mutable_audit()->set_action("ApplyPolicy");
    return e;
  };
  const auto save = [](Store& store, std::vector<v1::Event> events) {
    absl::StatusOr<RegistrySaveResult> saved =
        store.SaveRegistry({}, events, 100, absl::InfinitePast(), {}, absl::InfinitePast());
    ASSERT_TRUE(saved.ok()) << saved.status();
  };
  save(*a, {unnumbered("Connected", false), unnumbered("Applied", true)});
  save(*b, {unnumbered("Disconnected", false)});
  absl::StatusOr<std::vector<v1::Event>> all = a->LoadEventsAfter(0, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> seen;
  for (const v1::Event& e : *all) {
    seen.push_back(
        absl::StrCat(e.metadata().resource_version(), " ", e.metadata().name(), " ", e.reason()));
  }
  EXPECT_THAT(seen,
              ::testing::ElementsAre("1 ev-1 Connected", "2 ev-2 Applied", "3 ev-3 Disconnected"));
  EXPECT_EQ(b->Load(10)->last_event_version, 3u);
  // A fold keeps its name and gets the next version; the page bound holds.
  v1::Event folded = (*all)[0];
  folded.mutable_metadata()->clear_resource_version();
  folded.set_count(2);
  save(*b, {folded});
  absl::StatusOr<std::vector<v1::Event>> after = a->LoadEventsAfter(2, 1);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].metadata().resource_version(), "3");
  after = a->LoadEventsAfter(3, 100);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].metadata().name(), "ev-1");
  EXPECT_EQ((*after)[0].metadata().resource_version(), "4");
  EXPECT_EQ((*after)[0].count(), 2u);
  EXPECT_EQ(a->LoadEventsAfter(0, 100)->size(), 3u) << "the fold replaced the event";

  // Concurrent savers never share a version.
  std::vector<std::thread> savers;
  for (Store* store : {a.get(), b.get()}) {
    savers.emplace_back([store, &unnumbered] {
      for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(store
                        ->SaveRegistry({}, {unnumbered("Touched", false)}, 1000,
                                       absl::InfinitePast(), {}, absl::InfinitePast())
                        .ok());
      }
    });
  }
  for (std::thread& t : savers) t.join();
  absl::StatusOr<std::vector<v1::Event>> everything = a->LoadEventsAfter(0, 1000);
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(everything->size(), 23u);
  EXPECT_EQ(b->Load(10)->last_event_version, 24u);
}

TEST_P(StoreContractTest, LocalAuditEventsWaitUntilASaveTakesThem) {
  const std::string& path = location();
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
  ASSERT_TRUE(
      server->SaveRegistry({}, {}, 100, kNow - absl::Hours(1), {}, absl::InfinitePast()).ok());
  EXPECT_EQ(server->PendingLocalAudit()->size(), 1u);
  v1::Event recorded = MakeEvent("audit-1", 1, kNow);
  *recorded.mutable_audit() = event.audit();
  const int64_t id = (*pending)[0].id;
  ASSERT_TRUE(
      server->SaveRegistry({}, {recorded}, 100, kNow - absl::Hours(1), {id}, absl::InfinitePast())
          .ok());
  EXPECT_TRUE(server->PendingLocalAudit()->empty());
  absl::StatusOr<StoredState> state = server->Load(100);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->events.size(), 1u);
  EXPECT_EQ(state->events[0].audit().actor(), "local administrator (OS user root)");
}

TEST_P(StoreContractTest, ExperimentsAndWindowsSurviveReopen) {
  const std::string& path = location();
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
        store->UpdateExperimentStatus("hold-ab", stopped, kNow + absl::Hours(1), nullptr);
    ASSERT_TRUE(updated.ok()) << updated.status();
    EXPECT_NE(updated->metadata().resource_version(), created->metadata().resource_version());
    EXPECT_EQ(store->UpdateExperimentStatus("nope", stopped, kNow, nullptr).status().code(),
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
  EXPECT_EQ(*store->DeleteWindowsOfExperimentsEndedBefore(kNow + absl::Minutes(30), nullptr), 0u);
  EXPECT_EQ(*store->DeleteWindowsOfExperimentsEndedBefore(kNow + absl::Hours(2), nullptr), 2u);
  EXPECT_EQ((*store->CountWindows())["other"].total, 1u);
}

// Hold tunings are stored like experiments: the store stamps uid, generation, resource version
// and times; LoadTunings returns them as stored, oldest first, after a reopen too; a tuning's
// name is taken until it is deleted.
TEST_P(StoreContractTest, TuningsAreStoredWithTheirStatusAndSurviveReopen) {
  const std::string& path = location();
  v1::HoldTuning created_a;
  v1::HoldTuning created_b;
  {
    std::unique_ptr<Store> store = OpenStore(path);
    ASSERT_NE(store, nullptr);
    const uint64_t before = store->LoadConfig()->revision;
    absl::StatusOr<v1::HoldTuning> a = store->CreateTuning(MakeTuning("tune-a"), kNow);
    ASSERT_TRUE(a.ok()) << a.status();
    created_a = *a;
    EXPECT_EQ(a->metadata().name(), "tune-a");
    EXPECT_FALSE(a->metadata().uid().empty());
    EXPECT_EQ(a->metadata().generation(), 1);
    EXPECT_EQ(a->metadata().resource_version(), absl::StrCat(before + 1));
    EXPECT_EQ(common::TimeFromProto(a->metadata().create_time()), kNow);
    EXPECT_EQ(common::TimeFromProto(a->metadata().update_time()), kNow);
    EXPECT_EQ(a->metadata().labels().at("team"), "edge");
    EXPECT_EQ(a->spec().candidate_hold_us_size(), 3);
    EXPECT_EQ(a->status().phase(), v1::HOLD_TUNING_PHASE_RUNNING);
    ASSERT_EQ(a->status().segments_size(), 1);
    EXPECT_EQ(a->status().segments(0).planner_state().rounds(0).number(), 1u);
    EXPECT_EQ(store->LoadConfig()->revision, before + 1);

    const absl::Status taken = store->CreateTuning(MakeTuning("tune-a"), kNow).status();
    EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists) << taken;
    EXPECT_THAT(taken.message(), HasSubstr("tune-a"));
    EXPECT_EQ(store->LoadConfig()->revision, before + 1) << "a refused create moved the revision";
    v1::HoldTuning unnamed = MakeTuning("");
    EXPECT_EQ(store->CreateTuning(unnamed, kNow).status().code(),
              absl::StatusCode::kInvalidArgument);

    // Created earlier by the clock, later by the revision: ordered by create time.
    absl::StatusOr<v1::HoldTuning> b =
        store->CreateTuning(MakeTuning("tune-b"), kNow - absl::Minutes(5));
    ASSERT_TRUE(b.ok()) << b.status();
    created_b = *b;
    EXPECT_NE(b->metadata().uid(), a->metadata().uid());
  }
  std::unique_ptr<Store> store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<v1::HoldTuning>> tunings = store->LoadTunings();
  ASSERT_TRUE(tunings.ok()) << tunings.status();
  ASSERT_EQ(tunings->size(), 2u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*tunings)[0], created_b))
      << (*tunings)[0].DebugString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*tunings)[1], created_a))
      << (*tunings)[1].DebugString();
  EXPECT_TRUE(store->LoadExperiments()->empty()) << "tunings are not experiments";
}

// UpdateTuningStatus replaces the status (planner state included) and keeps spec and metadata
// except resource_version and update_time; every update moves the revision.
TEST_P(StoreContractTest, UpdateTuningStatusReplacesTheStatusUnderANewVersion) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  absl::StatusOr<v1::HoldTuning> created = store->CreateTuning(MakeTuning("tune-a"), kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  const uint64_t revision = store->LoadConfig()->revision;

  v1::HoldTuningStatus stopped;
  stopped.set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
  *stopped.mutable_start_time() = common::TimeToProto(kNow);
  *stopped.mutable_end_time() = common::TimeToProto(kNow + absl::Hours(2));
  v1::HoldTuningSegment* segment = stopped.add_segments();
  segment->set_phase("stopped");
  segment->set_reason("StoppedByUser");
  segment->mutable_planner_state()->set_incumbent_hold_us(128);
  segment->mutable_planner_state()->set_previous_hold_us(64);
  stopped.set_valid_windows(42);
  const absl::Time later = kNow + absl::Hours(2);
  absl::StatusOr<v1::HoldTuning> updated =
      store->UpdateTuningStatus("tune-a", stopped, later, nullptr);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->metadata().resource_version(), absl::StrCat(revision + 1));
  EXPECT_EQ(store->LoadConfig()->revision, revision + 1);
  EXPECT_EQ(common::TimeFromProto(updated->metadata().update_time()), later);
  EXPECT_EQ(updated->metadata().uid(), created->metadata().uid());
  EXPECT_EQ(updated->metadata().generation(), 1);
  EXPECT_EQ(common::TimeFromProto(updated->metadata().create_time()), kNow);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(updated->spec(), created->spec()));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(updated->status(), stopped));

  absl::StatusOr<std::vector<v1::HoldTuning>> tunings = store->LoadTunings();
  ASSERT_TRUE(tunings.ok()) << tunings.status();
  ASSERT_EQ(tunings->size(), 1u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*tunings)[0], *updated));
  EXPECT_EQ((*tunings)[0].status().segments(0).planner_state().previous_hold_us(), 64u);

  // A second update moves the version again.
  stopped.set_valid_windows(43);
  absl::StatusOr<v1::HoldTuning> again =
      store->UpdateTuningStatus("tune-a", stopped, later, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->metadata().resource_version(), absl::StrCat(revision + 2));

  const absl::Status missing = store->UpdateTuningStatus("nope", stopped, later, nullptr).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), HasSubstr("nope"));
  EXPECT_EQ(store->LoadConfig()->revision, revision + 2) << "a failed update moved the revision";
}

// The tuning controller writes status under its lease: a write with a fence that no longer
// holds is Aborted and changes nothing; the current fence passes.
TEST_P(StoreContractTest, AStaleFenceCannotUpdateATuning) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  absl::StatusOr<Lease> first = store->AcquireLease("tunings", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  const LeaseFence stale{"tunings", "a:7443", first->epoch};
  ASSERT_TRUE(store->CreateTuning(MakeTuning("tune-a"), kNow).ok());
  v1::HoldTuningStatus status = MakeTuning("tune-a").status();
  status.set_valid_windows(7);
  ASSERT_TRUE(store->UpdateTuningStatus("tune-a", status, kNow, &stale).ok());

  ASSERT_TRUE(store->ReleaseLease(stale).ok());
  absl::StatusOr<Lease> again = store->AcquireLease("tunings", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->epoch, first->epoch + 1);
  const uint64_t revision = store->LoadConfig()->revision;
  const std::vector<v1::HoldTuning> before = *store->LoadTunings();

  v1::HoldTuningStatus stopped;
  stopped.set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
  absl::StatusOr<v1::HoldTuning> fenced =
      store->UpdateTuningStatus("tune-a", stopped, kNow + absl::Minutes(1), &stale);
  ASSERT_EQ(fenced.status().code(), absl::StatusCode::kAborted) << fenced.status();
  EXPECT_THAT(
      fenced.status().message(),
      HasSubstr(absl::StrCat("lease tunings is no longer held by a:7443 at epoch ", first->epoch)));
  EXPECT_EQ(store->LoadConfig()->revision, revision) << "a fenced-out write moved the revision";
  const std::vector<v1::HoldTuning> after = *store->LoadTunings();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(after[0], before.at(0)))
      << "a fenced-out write changed the tuning";
  EXPECT_EQ(after[0].status().valid_windows(), 7u);
  // The fence is checked first: an unknown tuning under a stale fence is Aborted too.
  EXPECT_EQ(store->UpdateTuningStatus("nope", stopped, kNow, &stale).status().code(),
            absl::StatusCode::kAborted);

  const LeaseFence current{"tunings", "a:7443", again->epoch};
  absl::StatusOr<v1::HoldTuning> passed =
      store->UpdateTuningStatus("tune-a", stopped, kNow + absl::Minutes(1), &current);
  ASSERT_TRUE(passed.ok()) << passed.status();
  EXPECT_EQ(passed->status().phase(), v1::HOLD_TUNING_PHASE_STOPPED);
}

// DeleteTuning removes the tuning and the windows stored under its name, in one transaction,
// and leaves every other name's windows alone.
TEST_P(StoreContractTest, DeleteTuningRemovesItsWindows) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateTuning(MakeTuning("tune-a"), kNow).ok());
  ASSERT_TRUE(store->CreateTuning(MakeTuning("tune-b"), kNow + absl::Seconds(1)).ok());
  v1::Experiment experiment;
  experiment.mutable_metadata()->set_name("hold-ab");
  ASSERT_TRUE(store->CreateExperiment(experiment, kNow).ok());
  ASSERT_TRUE(store
                  ->AddWindows({MakeWindow("tune-a", "h1", {"super"}, true),
                                MakeWindow("tune-b", "h1", {"super"}, true),
                                MakeWindow("tune-a", "h2", {"high"}, false),
                                MakeWindow("hold-ab", "h1", {}, true)})
                  .ok());
  ASSERT_EQ((*store->CountWindows())["tune-a"].total, 2u);
  const uint64_t revision = store->LoadConfig()->revision;

  ASSERT_TRUE(store->DeleteTuning("tune-a").ok());
  EXPECT_GT(store->LoadConfig()->revision, revision) << "a delete did not move the revision";
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = store->CountWindows();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_FALSE(counts->contains("tune-a"));
  EXPECT_EQ(counts->at("tune-b").total, 1u);
  EXPECT_EQ(counts->at("hold-ab").total, 1u);
  size_t left = 0;
  ASSERT_TRUE(store
                  ->ForEachWindow("tune-a", [&](const std::string&, std::vector<std::string>,
                                                const v1::MetricWindow&) { ++left; })
                  .ok());
  EXPECT_EQ(left, 0u);
  absl::StatusOr<std::vector<v1::HoldTuning>> tunings = store->LoadTunings();
  ASSERT_TRUE(tunings.ok()) << tunings.status();
  ASSERT_EQ(tunings->size(), 1u);
  EXPECT_EQ((*tunings)[0].metadata().name(), "tune-b");
  EXPECT_EQ(store->LoadExperiments()->size(), 1u);

  const uint64_t after = store->LoadConfig()->revision;
  const absl::Status missing = store->DeleteTuning("tune-a");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), HasSubstr("tune-a"));
  EXPECT_EQ(store->DeleteTuning("hold-ab").code(), absl::StatusCode::kNotFound)
      << "an experiment is not a tuning";
  EXPECT_EQ(store->LoadConfig()->revision, after) << "a failed delete moved the revision";
  EXPECT_EQ((*store->CountWindows())["hold-ab"].total, 1u);

  // The name is free again.
  absl::StatusOr<v1::HoldTuning> recreated = store->CreateTuning(MakeTuning("tune-a"), kNow);
  ASSERT_TRUE(recreated.ok()) << recreated.status();
  EXPECT_EQ(recreated->metadata().generation(), 1);
}

// A server follows an experiment's windows that every server stores: each read returns the
// windows written since its cursor, in row order; a caller that keeps the ids at or above the
// cursor sees each window exactly once (PostgreSQL may repeat some).
TEST_P(StoreContractTest, WindowsAreFollowedFromACursor) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  std::map<int64_t, uint64_t> recent;
  std::vector<std::string> hosts;
  uint64_t cursor = 0;
  const auto follow = [&] {
    absl::StatusOr<uint64_t> next = store->ForEachWindowSince(
        "hold-ab", cursor,
        [&](const WindowRow& row, const std::string& host, std::vector<std::string> segment,
            const v1::MetricWindow& window) {
          EXPECT_EQ(window.experiment(), "hold-ab");
          EXPECT_EQ(segment.size(), 1u);
          if (recent.emplace(row.id, row.write_seq).second) hosts.push_back(host);
        });
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_GE(*next, cursor);
    cursor = *next;
    std::erase_if(recent, [&](const auto& r) { return r.second < cursor; });
  };
  follow();
  EXPECT_TRUE(hosts.empty());
  ASSERT_TRUE(store
                  ->AddWindows({MakeWindow("hold-ab", "h1", {"super"}, true),
                                MakeWindow("other", "h9", {"x"}, true),
                                MakeWindow("hold-ab", "h2", {"high"}, false)})
                  .ok());
  follow();
  EXPECT_THAT(hosts, ::testing::ElementsAre("h1", "h2"));
  follow();
  EXPECT_THAT(hosts, ::testing::ElementsAre("h1", "h2")) << "nothing new, nothing twice";
  // Another server's connection stores more.
  std::unique_ptr<Store> other = OpenStore(location());
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->AddWindows({MakeWindow("hold-ab", "h3", {"high"}, true)}).ok());
  follow();
  EXPECT_THAT(hosts, ::testing::ElementsAre("h1", "h2", "h3"));
}

// A running tuning drops the windows its segments no longer read: those of its own below a
// row id, never another's, and a follower's cursor carries on with the rest.
TEST_P(StoreContractTest, WindowsBelowARowIdAreDeletedForOneExperimentOnly) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->AddWindows({MakeWindow("hold-ab", "h1", {"super"}, true),
                                MakeWindow("other", "h9", {"x"}, true),
                                MakeWindow("hold-ab", "h2", {"high"}, true),
                                MakeWindow("hold-ab", "h3", {"high"}, true)})
                  .ok());
  std::vector<std::pair<int64_t, std::string>> rows;
  absl::StatusOr<uint64_t> cursor = store->ForEachWindowSince(
      "hold-ab", 0,
      [&](const WindowRow& row, const std::string& host, const std::vector<std::string>&,
          const v1::MetricWindow&) { rows.emplace_back(row.id, host); });
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  ASSERT_EQ(rows.size(), 3u);
  // Below h3's row: h1 and h2 go, "other" stays although its id is lower.
  absl::StatusOr<uint64_t> deleted = store->DeleteWindowsBelow("hold-ab", rows[2].first, nullptr);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2u);
  EXPECT_EQ((*store->CountWindows())["hold-ab"].total, 1u);
  EXPECT_EQ((*store->CountWindows())["other"].total, 1u);
  EXPECT_EQ(*store->DeleteWindowsBelow("hold-ab", rows[2].first, nullptr), 0u);
  ASSERT_TRUE(store->AddWindows({MakeWindow("hold-ab", "h4", {"high"}, true)}).ok());
  std::vector<std::string> later;
  ASSERT_TRUE(store
                  ->ForEachWindowSince("hold-ab", *cursor,
                                       [&](const WindowRow&, const std::string& host,
                                           const std::vector<std::string>&,
                                           const v1::MetricWindow&) { later.push_back(host); })
                  .ok());
  EXPECT_THAT(later, ::testing::Contains("h4"));
  EXPECT_THAT(later, ::testing::Not(::testing::Contains("h1")));
}

// The revision is what replicas watch: every configuration change moves it, in the same
// transaction; registry, events and windows never do, and neither does a write that changed
// nothing. LoadConfig reads it with the policies and the bundle version in one snapshot.
TEST_P(StoreContractTest, EveryConfigurationChangeMovesTheRevisionAndNothingElseDoes) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  uint64_t last = store->LoadConfig()->revision;
  EXPECT_EQ(store->Load(10)->revision, last);
  const auto moved = [&](const char* what) {
    absl::StatusOr<ConfigState> config = store->LoadConfig();
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return;
    EXPECT_GT(config->revision, last) << what << " did not move the revision";
    last = config->revision;
  };
  const auto unmoved = [&](const char* what) {
    EXPECT_EQ(store->LoadConfig()->revision, last) << what << " moved the revision";
  };

  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  moved("creating a policy");
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  unmoved("applying an unchanged policy");
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 64), kNow).ok());
  moved("changing a policy");
  ASSERT_TRUE(store->BumpBundleVersion().ok());
  moved("bumping the bundle version");
  v1::Experiment e;
  e.mutable_metadata()->set_name("hold-ab");
  e.mutable_status()->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  ASSERT_TRUE(store->CreateExperiment(e, kNow).ok());
  moved("creating an experiment");
  v1::ExperimentStatus stopped;
  stopped.set_phase(v1::EXPERIMENT_PHASE_STOPPED);
  ASSERT_TRUE(store->UpdateExperimentStatus("hold-ab", stopped, kNow, nullptr).ok());
  moved("updating an experiment's status");
  ASSERT_TRUE(store->CreateTuning(MakeTuning("tune-a"), kNow).ok());
  moved("creating a hold tuning");
  v1::HoldTuningStatus tuning_stopped;
  tuning_stopped.set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
  ASSERT_TRUE(store->UpdateTuningStatus("tune-a", tuning_stopped, kNow, nullptr).ok());
  moved("updating a hold tuning's status");
  EXPECT_EQ(store->CreateTuning(MakeTuning("tune-a"), kNow).status().code(),
            absl::StatusCode::kAlreadyExists);
  unmoved("a refused tuning create");

  HostRecord host;
  host.host.mutable_metadata()->set_name("h1");
  ASSERT_TRUE(store
                  ->SaveRegistry({host}, {MakeEvent("e1", 1, kNow)}, 100, absl::InfinitePast(), {},
                                 absl::InfinitePast())
                  .ok());
  ASSERT_TRUE(store->AddWindows({MakeWindow("hold-ab", "h1", {}, true)}).ok());
  ASSERT_TRUE(store->AddWindows({MakeWindow("tune-a", "h1", {}, true)}).ok());
  unmoved("saving the registry, events and windows");

  ASSERT_TRUE(store->DeleteExperiment("hold-ab").ok());
  moved("deleting an experiment");
  ASSERT_TRUE(store->DeleteTuning("tune-a").ok());
  moved("deleting a hold tuning");
  EXPECT_EQ(store->DeleteTuning("tune-a").code(), absl::StatusCode::kNotFound);
  unmoved("a failed tuning delete");
  ASSERT_TRUE(store->DeletePolicy("a", "").ok());
  moved("deleting a policy");
  EXPECT_EQ(store->DeletePolicy("a", "").status().code(), absl::StatusCode::kNotFound);
  unmoved("a failed delete");

  absl::StatusOr<ConfigState> config = store->LoadConfig();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->policies.empty());
  EXPECT_EQ(config->bundle_version, store->Load(1)->bundle_version);
}

// Leases of singleton jobs: a renewal keeps the epoch, a re-take after a release moves it, and
// a fenced write passes only with the current epoch. (Who else may take a held lease differs:
// store_sqlite_test.cc and store_postgres_test.cc.)
TEST_P(StoreContractTest, LeasesRenewKeepTheirEpochAndFenceStaleHolders) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  absl::StatusOr<Lease> first = store->AcquireLease("experiments", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->holder, "a:7443");
  EXPECT_EQ(first->epoch, 1u);
  EXPECT_GT(first->expire_time, absl::Now() + absl::Seconds(20));
  absl::StatusOr<Lease> renewed = store->AcquireLease("experiments", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->epoch, 1u);
  EXPECT_GE(renewed->expire_time, first->expire_time);

  v1::Experiment e;
  e.mutable_metadata()->set_name("hold-ab");
  ASSERT_TRUE(store->CreateExperiment(e, kNow).ok());
  v1::ExperimentStatus completed;
  completed.set_phase(v1::EXPERIMENT_PHASE_COMPLETED);
  const LeaseFence current{"experiments", "a:7443", 1};
  ASSERT_TRUE(store->UpdateExperimentStatus("hold-ab", completed, kNow, &current).ok());

  ASSERT_TRUE(store->ReleaseLease(current).ok());
  absl::StatusOr<Lease> again = store->AcquireLease("experiments", "a:7443", absl::Seconds(30));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->epoch, 2u) << "a re-take after a release is a new epoch";
  const uint64_t revision = store->LoadConfig()->revision;
  v1::ExperimentStatus stopped;
  stopped.set_phase(v1::EXPERIMENT_PHASE_STOPPED);
  absl::StatusOr<v1::Experiment> fenced =
      store->UpdateExperimentStatus("hold-ab", stopped, kNow, &current);
  ASSERT_EQ(fenced.status().code(), absl::StatusCode::kAborted) << fenced.status();
  EXPECT_THAT(fenced.status().message(),
              HasSubstr("lease experiments is no longer held by a:7443 at epoch 1"));
  EXPECT_EQ(store->DeleteWindowsOfExperimentsEndedBefore(kNow, &current).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store->DeleteWindowsBelow("hold-ab", INT64_MAX, &current).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store->LoadConfig()->revision, revision) << "a fenced-out write changed nothing";
  EXPECT_EQ((*store->LoadExperiments())[0].status().phase(), v1::EXPERIMENT_PHASE_COMPLETED);

  EXPECT_EQ(store->AcquireLease("", "a", absl::Seconds(30)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store->AcquireLease("experiments", std::string(257, 'a'), absl::Seconds(30)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->AcquireLease("experiments", "a", absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An agent moves from server A to server B on one database: B opens a newer session, and A's
// late save of the host (its stream ended after B's took over) changes nothing.
TEST_P(StoreContractTest, AgentSessionsFenceTheWritesOfAServerTheAgentLeft) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  const auto save = [&](HostRecord record) {
    absl::StatusOr<RegistrySaveResult> saved =
        store->SaveRegistry({record}, {}, 100, absl::InfinitePast(), {}, absl::InfinitePast());
    EXPECT_TRUE(saved.ok()) << saved.status();
    return saved.ok() ? *saved : RegistrySaveResult{};
  };
  const auto record = [](const std::string& replica, bool connected, bool open, uint64_t epoch) {
    HostRecord r;
    r.host.mutable_metadata()->set_name("pi5-a");
    r.host.mutable_status()->set_connected(connected);
    r.host.mutable_status()->set_replica(replica);
    r.adapters.emplace_back().mutable_metadata()->set_name(replica);
    r.session_replica = replica;
    r.open_session = open;
    r.session_epoch = epoch;
    return r;
  };
  RegistrySaveResult a = save(record("a:7443", true, true, 0));
  ASSERT_EQ(a.opened_sessions.at("pi5-a"), 1u);
  EXPECT_TRUE(save(record("a:7443", true, false, 1)).superseded.empty());
  RegistrySaveResult b = save(record("b:7443", true, true, 0));
  ASSERT_EQ(b.opened_sessions.at("pi5-a"), 2u);

  RegistrySaveResult late = save(record("a:7443", false, false, 1));
  EXPECT_THAT(late.superseded, ::testing::ElementsAre("pi5-a"));
  absl::StatusOr<StoredState> state = store->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->hosts.size(), 1u);
  EXPECT_EQ(state->hosts[0].host.status().replica(), "b:7443");
  EXPECT_TRUE(state->hosts[0].host.status().connected()) << "A's late disconnect was written";
  ASSERT_EQ(state->hosts[0].adapters.size(), 1u);
  EXPECT_EQ(state->hosts[0].adapters[0].metadata().name(), "b:7443");

  // B's own later writes pass; a record without a session is written as it is.
  EXPECT_TRUE(save(record("b:7443", false, false, 2)).superseded.empty());
  HostRecord plain = record("", false, false, 0);
  plain.host.mutable_status()->set_replica("");
  EXPECT_TRUE(save(plain).superseded.empty());
  EXPECT_EQ(store->Load(10)->hosts[0].host.status().replica(), "");
}

// A replica follows the hosts the others write: each call returns what was written at or
// after its cursor, with the stored session, and adapters only when they were replaced. On
// PostgreSQL a call may also return hosts written just before its cursor (transactions of
// other databases on the server hold the snapshot's xmin back), so "nothing else" is checked
// on SQLite only.
TEST_P(StoreContractTest, HostChangesFollowTheWritesSinceTheCursor) {
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  const bool exact = GetParam() == Backend::kSqlite;
  const auto save = [&](const std::string& id, const std::string& replica, bool open,
                        uint64_t epoch, const std::vector<std::string>& adapters,
                        bool adapters_changed) {
    HostRecord r;
    r.host.mutable_metadata()->set_name(id);
    r.host.mutable_status()->set_replica(replica);
    for (const std::string& adapter : adapters) {
      r.adapters.emplace_back().mutable_metadata()->set_name(adapter);
    }
    r.adapters_changed = adapters_changed;
    r.session_replica = replica;
    r.open_session = open;
    r.session_epoch = epoch;
    absl::StatusOr<RegistrySaveResult> saved =
        store->SaveRegistry({r}, {}, 100, absl::InfinitePast(), {}, absl::InfinitePast());
    ASSERT_TRUE(saved.ok()) << saved.status();
  };
  const auto changes = [&](uint64_t cursor) {
    absl::StatusOr<HostChanges> loaded = store->LoadHostChanges(cursor);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) {
      EXPECT_GE(loaded->cursor, cursor);
    }
    return loaded.ok() ? *loaded : HostChanges{};
  };
  const auto find = [](const HostChanges& c, const std::string& id) -> const HostRecord* {
    for (const HostRecord& r : c.hosts) {
      if (r.host.metadata().name() == id) return &r;
    }
    return nullptr;
  };

  HostChanges empty = changes(0);
  EXPECT_TRUE(empty.hosts.empty());
  save("pi5-b", "b:7443", true, 0, {"port-1", "port-2"}, true);
  save("pi5-a", "a:7443", true, 0, {"port-1"}, true);
  HostChanges all = changes(empty.cursor);
  ASSERT_EQ(all.hosts.size(), 2u);
  EXPECT_EQ(all.hosts[0].host.metadata().name(), "pi5-a");  // ordered by host id
  const HostRecord& b = all.hosts[1];
  EXPECT_TRUE(b.adapters_changed);
  ASSERT_EQ(b.adapters.size(), 2u);
  EXPECT_EQ(b.adapters[1].metadata().name(), "port-2");
  EXPECT_EQ(b.session_replica, "b:7443");
  EXPECT_EQ(b.session_epoch, 1u);
  EXPECT_FALSE(b.open_session);

  // Nothing written since: nothing returned.
  HostChanges none = changes(all.cursor);
  if (exact) {
    EXPECT_TRUE(none.hosts.empty());
  }

  // A host-only write returns the host without adapters; an inventory returns them all.
  save("pi5-b", "b:7443", false, 1, {}, false);
  HostChanges touched = changes(none.cursor);
  const HostRecord* touched_b = find(touched, "pi5-b");
  ASSERT_NE(touched_b, nullptr);
  if (exact) {
    EXPECT_FALSE(touched_b->adapters_changed);
    EXPECT_TRUE(touched_b->adapters.empty());
    EXPECT_EQ(touched.hosts.size(), 1u);
  } else if (touched_b->adapters_changed) {
    // The cursor may not have passed the inventory written just before (see above): then
    // the record carries every stored adapter, never a part of them.
    ASSERT_EQ(touched_b->adapters.size(), 2u);
    EXPECT_EQ(touched_b->adapters[0].metadata().name(), "port-1");
  } else {
    EXPECT_TRUE(touched_b->adapters.empty());
  }
  save("pi5-a", "a:7443", false, 1, {"port-3"}, true);
  HostChanges inventory = changes(touched.cursor);
  ASSERT_NE(find(inventory, "pi5-a"), nullptr);
  EXPECT_TRUE(find(inventory, "pi5-a")->adapters_changed);
  ASSERT_EQ(find(inventory, "pi5-a")->adapters.size(), 1u);
  EXPECT_EQ(find(inventory, "pi5-a")->adapters[0].metadata().name(), "port-3");
  if (exact) {
    EXPECT_EQ(inventory.hosts.size(), 1u);
  }

  // The host moves to another replica: its new session shows. A superseded write is not a
  // change.
  save("pi5-a", "b:7443", true, 0, {"port-3"}, true);
  HostChanges moved = changes(inventory.cursor);
  ASSERT_NE(find(moved, "pi5-a"), nullptr);
  EXPECT_EQ(find(moved, "pi5-a")->session_replica, "b:7443");
  EXPECT_EQ(find(moved, "pi5-a")->session_epoch, 2u);
  EXPECT_EQ(find(moved, "pi5-a")->host.status().replica(), "b:7443");
  save("pi5-a", "a:7443", false, 1, {}, false);
  HostChanges after_late = changes(moved.cursor);
  if (exact) {
    EXPECT_TRUE(after_late.hosts.empty());
  }
  if (const HostRecord* a = find(after_late, "pi5-a"); a != nullptr) {
    EXPECT_EQ(a->host.status().replica(), "b:7443");
  }

  // Reopened (a restarted replica), the cursor still holds.
  store.reset();
  store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  if (exact) {
    EXPECT_TRUE(changes(after_late.cursor).hosts.empty());
  }
  HostChanges again = changes(0);
  ASSERT_EQ(again.hosts.size(), 2u);
  EXPECT_TRUE(again.hosts[0].adapters_changed) << "a full read carries every host's adapters";
}

// PostgreSQL: a transaction left open elsewhere on the server holds every snapshot's xmin
// back, so the cursor stays behind the writes and a host-only write comes back with the
// adapters replaced before it. A caller replaces its adapters with the record's, so the
// record must carry the whole stored set (found by CI as a failure of the test above).
TEST_P(StoreContractTest, HostChangesBehindAHeldSnapshotCarryEveryAdapter) {
  if (GetParam() != Backend::kPostgres) GTEST_SKIP() << "a SQLite cursor is exact";
  std::unique_ptr<Store> store = OpenStore(location());
  ASSERT_NE(store, nullptr);
  std::unique_ptr<pq::Connection> held = pq::Connection::Open(location(), absl::Seconds(5));
  held->Exec("BEGIN");
  held->Exec("SELECT pg_current_xact_id()");  // an id of its own: the xmin of every snapshot
  const auto save = [&](const std::vector<std::string>& adapters, bool adapters_changed) {
    HostRecord r;
    r.host.mutable_metadata()->set_name("pi5-b");
    for (const std::string& adapter : adapters) {
      r.adapters.emplace_back().mutable_metadata()->set_name(adapter);
    }
    r.adapters_changed = adapters_changed;
    r.session_replica = "b:7443";
    r.open_session = true;
    ASSERT_TRUE(
        store->SaveRegistry({r}, {}, 100, absl::InfinitePast(), {}, absl::InfinitePast()).ok());
  };
  save({"port-1", "port-2"}, true);
  absl::StatusOr<HostChanges> first = store->LoadHostChanges(0);
  ASSERT_TRUE(first.ok()) << first.status();
  save({}, false);
  absl::StatusOr<HostChanges> second = store->LoadHostChanges(first->cursor);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->hosts.size(), 1u);
  EXPECT_TRUE(second->hosts[0].adapters_changed);
  ASSERT_EQ(second->hosts[0].adapters.size(), 2u);
  EXPECT_EQ(second->hosts[0].adapters[1].metadata().name(), "port-2");
  held->Exec("ROLLBACK");
}

TEST_P(StoreContractTest, LockedDatabaseFailsTheWriteAndKeepsTheStoreUsable) {
  std::unique_ptr<Store> store = OpenStore(location(), absl::Milliseconds(100));
  ASSERT_TRUE(store->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  {
    WriteLock other(GetParam(), location());
    absl::StatusOr<PolicyWriteResult> blocked = store->ApplyPolicy(MakePolicy("b", 32), kNow);
    ASSERT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable) << blocked.status();
    EXPECT_THAT(blocked.status().message(), HasSubstr("cannot store policy b"));
    EXPECT_THAT(blocked.status().message(), HasSubstr(store->path()));
    EXPECT_THAT(blocked.status().message(), HasSubstr("lock"));
    const absl::Status windows = store->AddWindows(
        {MakeWindow("hold-ab", "h1", {}, true), MakeWindow("hold-ab", "h1", {}, true)});
    EXPECT_EQ(windows.code(), absl::StatusCode::kUnavailable) << windows;
  }
  absl::StatusOr<StoredState> state = store->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->policies.size(), 1u);
  EXPECT_EQ(state->bundle_version, 2u);
  EXPECT_TRUE(store->CountWindows()->empty());
  absl::StatusOr<PolicyWriteResult> retried = store->ApplyPolicy(MakePolicy("b", 32), kNow);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->bundle_version, 3u);
  EXPECT_TRUE(store->AddWindows({MakeWindow("hold-ab", "h1", {}, true)}).ok());
  EXPECT_EQ((*store->CountWindows())["hold-ab"].total, 1u);
}

// Two servers' stores on one database (two connections) writing the same policy with the same
// precondition: exactly one write wins, and every version is used once.
TEST_P(StoreContractTest, ConcurrentPreconditionedWritesHaveOneWinner) {
  std::unique_ptr<Store> first = OpenStore(location());
  std::unique_ptr<Store> second = OpenStore(location());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(first->ApplyPolicy(MakePolicy("a", 32), kNow).ok());  // resource version 1
  constexpr int kRounds = 20;
  int wins = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string expected = (*first->Load(1)).policies.at(0).metadata().resource_version();
    std::atomic<int> ok{0};
    std::atomic<int> aborted{0};
    auto write = [&](Store* store, uint32_t hold) {
      absl::StatusOr<PolicyWriteResult> r =
          store->ApplyPolicy(MakePolicy("a", hold, expected), kNow);
      if (r.ok()) ++ok;
      if (r.status().code() == absl::StatusCode::kAborted) ++aborted;
    };
    std::thread a(write, first.get(), 64 + 32 * round);
    std::thread b(write, second.get(), 1024 - 32 * round);
    a.join();
    b.join();
    EXPECT_EQ(ok.load(), 1) << "round " << round;
    EXPECT_EQ(aborted.load(), 1) << "round " << round;
    wins += ok.load();
  }
  absl::StatusOr<StoredState> state = first->Load(1);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->bundle_version, 2u + static_cast<uint64_t>(wins));
  EXPECT_EQ(state->policies.at(0).metadata().resource_version(), absl::StrCat(1 + wins));
  EXPECT_EQ(state->policies.at(0).metadata().generation(), 1 + wins);
}

TEST_P(StoreContractTest, TokensAreCreatedFoundListedAndRevoked) {
  // The token table lives beside the store's tables (the server opens the store first).
  ASSERT_NE(OpenStore(location()), nullptr);
  absl::StatusOr<std::unique_ptr<TokenStore>> tokens = TokenStore::Open(location());
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  absl::StatusOr<CreatedToken> created =
      (*tokens)->Create("ops", Role::kOperator, "local administrator", kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*tokens)->Create("ops", Role::kAdmin, "x", kNow).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*tokens)->Create("bad name", Role::kAdmin, "x", kNow).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Another connection (the server's, while the command runs) sees it at once.
  absl::StatusOr<std::unique_ptr<TokenStore>> server = TokenStore::Open(location());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::optional<TokenRecord>> found = (*server)->Find(created->token);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->name, "ops");
  EXPECT_EQ((*found)->role, Role::kOperator);
  EXPECT_EQ((*found)->create_time, kNow);
  EXPECT_FALSE((*(*server)->Find(created->token + "x")).has_value());
  absl::StatusOr<std::vector<TokenRecord>> listed = (*server)->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].created_by, "local administrator");

  absl::StatusOr<TokenRecord> revoked = (*tokens)->Revoke("ops");
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->role, Role::kOperator);
  EXPECT_FALSE((*(*server)->Find(created->token)).has_value());
  EXPECT_EQ((*tokens)->Revoke("ops").status().code(), absl::StatusCode::kNotFound);
}

// Fills an SQLite store with one of everything ImportSnapshot copies, in the shapes a server
// leaves behind: a policy at generation 2, a deleted one, a host with and one without
// adapters, pruned and kept fleet events, an audit event, experiments (one stopped), hold
// tunings (one stopped), windows of two experiments and a tuning interleaved, a pending local
// audit event and a token (returned).
std::string FillSourceStore(Store& store, TokenStore& tokens) {
  EXPECT_TRUE(store.ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  EXPECT_TRUE(store.ApplyPolicy(MakePolicy("a", 64), kNow + absl::Seconds(1)).ok());
  EXPECT_TRUE(store.ApplyPolicy(MakePolicy("b", 1024), kNow).ok());
  EXPECT_TRUE(store.ApplyPolicy(MakePolicy("gone", 8), kNow).ok());
  EXPECT_TRUE(store.DeletePolicy("gone", "").ok());
  HostRecord with_adapters;
  with_adapters.host.mutable_metadata()->set_name("pi5-a");
  with_adapters.host.mutable_status()->set_last_acked_version(4);
  for (const char* port : {"port-1", "port-2-2"}) {
    with_adapters.adapters.emplace_back().mutable_metadata()->set_name(port);
    with_adapters.adapters.back().set_host_id("pi5-a");
  }
  HostRecord bare;
  bare.host.mutable_metadata()->set_name("pi5-b");
  // e1 is pruned by the count: the last event version stays above what is stored.
  EXPECT_TRUE(store
                  .SaveRegistry({with_adapters, bare},
                                {MakeEvent("e1", 1, kNow), MakeEvent("e2", 2, kNow),
                                 MakeEvent("e3", 3, kNow + absl::Seconds(1))},
                                2, kNow - absl::Hours(1), {}, absl::InfinitePast())
                  .ok());
  v1::Event audit = MakeEvent("audit-1", 4, kNow);
  audit.mutable_audit()->set_actor("token:admin");
  EXPECT_TRUE(
      store.SaveRegistry({}, {audit}, 2, kNow - absl::Hours(1), {}, absl::InfinitePast()).ok());
  v1::Experiment experiment;
  experiment.mutable_metadata()->set_name("hold-ab");
  experiment.mutable_status()->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  absl::StatusOr<v1::Experiment> created = store.CreateExperiment(experiment, kNow);
  EXPECT_TRUE(created.ok()) << created.status();
  experiment.mutable_metadata()->set_name("agg-ab");
  EXPECT_TRUE(store.CreateExperiment(experiment, kNow + absl::Seconds(1)).ok());
  v1::ExperimentStatus stopped;
  stopped.set_phase(v1::EXPERIMENT_PHASE_STOPPED);
  *stopped.mutable_end_time() = common::TimeToProto(kNow + absl::Hours(1));
  EXPECT_TRUE(
      store.UpdateExperimentStatus("hold-ab", stopped, kNow + absl::Hours(1), nullptr).ok());
  EXPECT_TRUE(store.CreateTuning(MakeTuning("tune-a"), kNow + absl::Seconds(2)).ok());
  EXPECT_TRUE(store.CreateTuning(MakeTuning("tune-b"), kNow + absl::Seconds(3)).ok());
  v1::HoldTuningStatus tuning_stopped = MakeTuning("tune-a").status();
  tuning_stopped.set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
  *tuning_stopped.mutable_end_time() = common::TimeToProto(kNow + absl::Hours(1));
  EXPECT_TRUE(
      store.UpdateTuningStatus("tune-a", tuning_stopped, kNow + absl::Hours(1), nullptr).ok());
  EXPECT_TRUE(store
                  .AddWindows({MakeWindow("hold-ab", "pi5-a", {"super", ""}, true),
                               MakeWindow("tune-a", "pi5-a", {"super"}, true),
                               MakeWindow("agg-ab", "pi5-a", {}, true),
                               MakeWindow("hold-ab", "pi5-b", {"high", "pi1"}, false),
                               MakeWindow("tune-a", "pi5-b", {"high"}, false),
                               MakeWindow("hold-ab", "pi5-a", {"super", "x"}, true)})
                  .ok());
  EXPECT_TRUE(store.BumpBundleVersion().ok());
  v1::Event local;
  local.set_reason("CreateToken");
  local.mutable_audit()->set_actor("local administrator (OS user root)");
  EXPECT_TRUE(store.AddLocalAudit(local, kNow).ok());
  absl::StatusOr<CreatedToken> token =
      tokens.Create("ops", Role::kOperator, "local administrator", kNow);
  EXPECT_TRUE(token.ok()) << token.status();
  return token.ok() ? token->token : "";
}

template <typename Message>
void ExpectSameMessages(const std::vector<Message>& a, const std::vector<Message>& b,
                        const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a[i], b[i]))
        << what << " " << i << ":\n"
        << a[i].DebugString() << "vs\n"
        << b[i].DebugString();
  }
}

// migrate-store's core: everything read from an SQLite store lands verbatim in an empty
// database of either backend, later writes continue above the imported versions, and a
// second import is refused without writing anything.
TEST_P(StoreContractTest, ImportCopiesASnapshotVerbatimIntoAnEmptyDatabase) {
  const std::string source_path = dir_.File("source/server.db");
  std::unique_ptr<Store> source = OpenStore(source_path);
  ASSERT_NE(source, nullptr);
  absl::StatusOr<std::unique_ptr<TokenStore>> source_tokens = TokenStore::Open(source_path);
  ASSERT_TRUE(source_tokens.ok()) << source_tokens.status();
  const std::string token = FillSourceStore(*source, **source_tokens);
  absl::StatusOr<StoreSnapshot> snapshot = ReadStoreSnapshot(*source, **source_tokens);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->windows.size(), 6u);
  ASSERT_EQ(snapshot->tunings.size(), 2u);
  EXPECT_EQ(snapshot->tunings[0].metadata().name(), "tune-a");
  EXPECT_EQ(snapshot->tunings[0].status().phase(), v1::HOLD_TUNING_PHASE_STOPPED);
  EXPECT_EQ(snapshot->state.events.size(), 3u);  // e2, e3 and the audit event
  EXPECT_EQ(snapshot->state.last_event_version, 4u);

  std::unique_ptr<Store> target = OpenStore(location());
  ASSERT_NE(target, nullptr);
  ASSERT_TRUE(target->ImportSnapshot(*snapshot).ok());

  absl::StatusOr<StoredState> want = source->Load(1000);
  absl::StatusOr<StoredState> got = target->Load(1000);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->revision, want->revision);
  EXPECT_EQ(got->bundle_version, want->bundle_version);
  EXPECT_EQ(got->last_event_version, want->last_event_version);
  ExpectSameMessages(got->policies, want->policies, "policy");
  ExpectSameMessages(got->events, want->events, "event");
  ASSERT_EQ(got->hosts.size(), want->hosts.size());
  for (size_t i = 0; i < got->hosts.size(); ++i) {
    ExpectSameMessages(std::vector<v1::Host>{got->hosts[i].host},
                       std::vector<v1::Host>{want->hosts[i].host}, "host");
    ExpectSameMessages(got->hosts[i].adapters, want->hosts[i].adapters, "adapter");
  }
  absl::StatusOr<ConfigState> config = target->LoadConfig();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->revision, want->revision);
  EXPECT_EQ(config->bundle_version, want->bundle_version);
  ExpectSameMessages(config->policies, want->policies, "policy");
  ExpectSameMessages(*target->LoadExperiments(), *source->LoadExperiments(), "experiment");
  ExpectSameMessages(*target->LoadTunings(), *source->LoadTunings(), "tuning");
  for (const char* experiment : {"hold-ab", "agg-ab", "tune-a"}) {
    std::vector<std::string> want_windows;
    std::vector<std::string> got_windows;
    const auto collect = [](std::vector<std::string>* out) {
      return [out](const std::string& host, std::vector<std::string> segment,
                   const v1::MetricWindow& window) {
        out->push_back(
            absl::StrCat(host, "|", absl::StrJoin(segment, ","), "|", window.SerializeAsString()));
      };
    };
    ASSERT_TRUE(source->ForEachWindow(experiment, collect(&want_windows)).ok());
    ASSERT_TRUE(target->ForEachWindow(experiment, collect(&got_windows)).ok());
    EXPECT_EQ(got_windows, want_windows) << experiment;
  }
  EXPECT_EQ((*target->CountWindows())["hold-ab"].valid, 2u);
  EXPECT_EQ((*target->CountWindows())["tune-a"].total, 2u);
  absl::StatusOr<std::vector<LocalAuditEvent>> pending = target->PendingLocalAudit();
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].id, snapshot->local_audit.at(0).id);
  EXPECT_EQ((*pending)[0].time, kNow);
  EXPECT_EQ((*pending)[0].event.audit().actor(), "local administrator (OS user root)");

  // Tokens keep working: their hashes were copied.
  absl::StatusOr<std::unique_ptr<TokenStore>> target_tokens = TokenStore::Open(location());
  ASSERT_TRUE(target_tokens.ok()) << target_tokens.status();
  absl::StatusOr<std::optional<TokenRecord>> found = (*target_tokens)->Find(token);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->name, "ops");
  EXPECT_EQ((*found)->role, Role::kOperator);
  EXPECT_EQ((*found)->create_time, kNow);
  EXPECT_EQ((*found)->created_by, "local administrator");

  // A second import is refused and changes nothing.
  absl::Status again = target->ImportSnapshot(*snapshot);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_THAT(again.message(), HasSubstr("is not empty"));
  EXPECT_THAT(again.message(), HasSubstr(target->path()));
  EXPECT_EQ(target->Load(1000)->policies.size(), want->policies.size());

  // New writes continue above the imported versions.
  absl::StatusOr<PolicyWriteResult> next = target->ApplyPolicy(MakePolicy("c", 32), kNow);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->policy.metadata().resource_version(), absl::StrCat(want->revision + 1));
  EXPECT_EQ(next->bundle_version, want->bundle_version + 1);
  absl::StatusOr<PolicyWriteResult> changed =
      target->ApplyPolicy(MakePolicy("a", 128), kNow + absl::Seconds(2));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->policy.metadata().generation(), 3);
  EXPECT_EQ(changed->policy.metadata().uid(), want->policies.at(0).metadata().uid());
  v1::Experiment experiment;
  experiment.mutable_metadata()->set_name("new-ab");
  absl::StatusOr<v1::Experiment> created = target->CreateExperiment(experiment, kNow);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->metadata().resource_version(), absl::StrCat(want->revision + 3));
  EXPECT_EQ(target->CreateTuning(MakeTuning("tune-a"), kNow).status().code(),
            absl::StatusCode::kAlreadyExists)
      << "an imported tuning's name is taken";
  absl::StatusOr<v1::HoldTuning> tuning = target->CreateTuning(MakeTuning("tune-new"), kNow);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  EXPECT_EQ(tuning->metadata().resource_version(), absl::StrCat(want->revision + 4));
  v1::Event local;
  local.set_reason("RevokeToken");
  ASSERT_TRUE(target->AddLocalAudit(local, kNow).ok());
  pending = target->PendingLocalAudit();
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_GT((*pending)[1].id, (*pending)[0].id);
  ASSERT_TRUE(target->AddWindows({MakeWindow("hold-ab", "pi5-b", {"new", ""}, true)}).ok());
  std::vector<std::string> hosts;
  ASSERT_TRUE(target
                  ->ForEachWindow("hold-ab",
                                  [&](const std::string& host, std::vector<std::string> segment,
                                      const v1::MetricWindow&) {
                                    hosts.push_back(absl::StrCat(host, ":", segment.at(0)));
                                  })
                  .ok());
  EXPECT_EQ(hosts,
            (std::vector<std::string>{"pi5-a:super", "pi5-b:high", "pi5-a:super", "pi5-b:new"}));
}

// Any row makes a database non-empty, also one the Store itself does not load (a token).
TEST_P(StoreContractTest, ImportIntoADatabaseWithATokenIsRefused) {
  std::unique_ptr<Store> target = OpenStore(location());
  ASSERT_NE(target, nullptr);
  absl::StatusOr<std::unique_ptr<TokenStore>> tokens = TokenStore::Open(location());
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_TRUE((*tokens)->Create("early", Role::kAdmin, "x", kNow).ok());
  StoreSnapshot snapshot;
  snapshot.state.bundle_version = 5;
  snapshot.state.revision = 3;
  snapshot.state.policies.push_back(MakePolicy("a", 32, "3"));
  absl::Status refused = target->ImportSnapshot(snapshot);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("1 in tokens"));
  absl::StatusOr<StoredState> state = target->Load(10);
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->policies.empty());
  EXPECT_EQ(state->bundle_version, 1u);

  // A record without a numeric resource version is refused before anything is read.
  snapshot.state.policies[0].mutable_metadata()->set_resource_version("x");
  EXPECT_EQ(target->ImportSnapshot(snapshot).code(), absl::StatusCode::kInvalidArgument);
}

// An imported tuning keeps its metadata and its resource version raises the revision (later
// writes continue above it); one without a numeric resource version is refused before anything
// is written; a tuning row makes a database non-empty.
TEST_P(StoreContractTest, ImportCountsAndChecksTunings) {
  std::unique_ptr<Store> target = OpenStore(location());
  ASSERT_NE(target, nullptr);
  StoreSnapshot snapshot;
  snapshot.state.bundle_version = 5;
  snapshot.state.revision = 3;
  snapshot.state.policies.push_back(MakePolicy("a", 32, "3"));
  v1::HoldTuning tuning = MakeTuning("tune-a");
  tuning.mutable_metadata()->set_uid("0123456789abcdef0123456789abcdef");
  tuning.mutable_metadata()->set_generation(1);
  tuning.mutable_metadata()->set_resource_version("x");
  *tuning.mutable_metadata()->mutable_create_time() = common::TimeToProto(kNow);
  *tuning.mutable_metadata()->mutable_update_time() = common::TimeToProto(kNow);
  snapshot.tunings.push_back(tuning);
  const absl::Status invalid = target->ImportSnapshot(snapshot);
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument) << invalid;
  EXPECT_THAT(invalid.message(), HasSubstr("hold tuning tune-a"));
  EXPECT_TRUE(target->LoadTunings()->empty());

  snapshot.tunings[0].mutable_metadata()->set_resource_version("9");
  ASSERT_TRUE(target->ImportSnapshot(snapshot).ok());
  absl::StatusOr<std::vector<v1::HoldTuning>> tunings = target->LoadTunings();
  ASSERT_TRUE(tunings.ok()) << tunings.status();
  ExpectSameMessages(*tunings, snapshot.tunings, "tuning");
  EXPECT_EQ(target->LoadConfig()->revision, 9u);

  const absl::Status refused = target->ImportSnapshot(snapshot);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("1 in tunings"));

  absl::StatusOr<v1::HoldTuning> next = target->CreateTuning(MakeTuning("tune-b"), kNow);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->metadata().resource_version(), "10");
}

// An import that fails part-way (here a duplicate host id, after the policies went in) rolls
// back completely and leaves the store usable for a correct import.
TEST_P(StoreContractTest, AFailedImportWritesNothing) {
  std::unique_ptr<Store> target = OpenStore(location());
  ASSERT_NE(target, nullptr);
  StoreSnapshot snapshot;
  snapshot.state.bundle_version = 5;
  snapshot.state.revision = 3;
  snapshot.state.policies.push_back(MakePolicy("a", 32, "3"));
  HostRecord host;
  host.host.mutable_metadata()->set_name("pi5-a");
  snapshot.state.hosts = {host, host};
  absl::Status failed = target->ImportSnapshot(snapshot);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("cannot import into the database"));
  absl::StatusOr<StoredState> state = target->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->policies.empty());
  EXPECT_EQ(state->revision, 0u);
  EXPECT_EQ(state->bundle_version, 1u);

  snapshot.state.hosts.pop_back();
  ASSERT_TRUE(target->ImportSnapshot(snapshot).ok());
  state = target->Load(10);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->policies.size(), 1u);
  EXPECT_EQ(state->hosts.size(), 1u);
  EXPECT_EQ(state->bundle_version, 5u);
}

}  // namespace
}  // namespace rxfleet::server
