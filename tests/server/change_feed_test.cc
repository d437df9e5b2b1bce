// server/store/change_feed.h against real PostgreSQL 15 servers (the ctest fixture's, and one
// of the test's own for an outage): a write on another connection wakes the feed through
// NOTIFY long before its poll would; a change that sent no wake-up is found by the poll; a
// lost listening connection is re-opened and reported as a resync; a failed callback is
// retried; stopping never waits for a database that is away.
#include "server/store/change_feed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/store/store.h"
#include "tests/server/store_test_util.h"
#include "tests/support/postgres.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::PrivatePostgres;
using ::rxfleet::testing::RunSql;
using ::rxfleet::testing::TestDatabase;
using namespace store_test;  // NOLINT(google-build-using-namespace): the records of every test

struct Call {
  uint64_t revision;
  bool resync;
};

// Records the feed's calls; can be told to fail them.
class Recorder {
 public:
  ChangeFeed::Callback callback() {
    return [this](uint64_t revision, bool resync) {
      absl::MutexLock lock(&mu_);
      calls_.push_back({revision, resync});
      if (failures_ > 0) {
        --failures_;
        return absl::UnavailableError("told to fail");
      }
      return absl::OkStatus();
    };
  }
  void FailNext(int n) {
    absl::MutexLock lock(&mu_);
    failures_ = n;
  }
  // Waits until `done(calls)` holds; false after `timeout`.
  bool WaitFor(const std::function<bool(const std::vector<Call>&)>& done,
               absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (done(calls())) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return done(calls());
  }
  std::vector<Call> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Call> calls_;
  int failures_ = 0;
};

bool SawRevision(const std::vector<Call>& calls, uint64_t revision) {
  for (const Call& c : calls) {
    if (c.revision >= revision) return true;
  }
  return false;
}

class ChangeFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rxfleet::testing::PostgresAvailable()) {
      GTEST_SKIP() << "no test PostgreSQL server: RXFLEET_TEST_PG_DIR is unset (ctest sets it)";
    }
    database_.emplace();
    store_ = OpenStore(database_->uri());  // creates the schema
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<ChangeFeed> StartFeed(Recorder& recorder, absl::Duration poll_interval,
                                        std::string conninfo = "") {
    ChangeFeedOptions options;
    options.conninfo = conninfo.empty() ? database_->uri() : conninfo;
    options.poll_interval = poll_interval;
    options.max_reconnect_delay = absl::Milliseconds(200);
    options.connect_timeout = absl::Seconds(1);
    absl::StatusOr<std::unique_ptr<ChangeFeed>> feed =
        ChangeFeed::Start(options, recorder.callback());
    EXPECT_TRUE(feed.ok()) << feed.status();
    return feed.ok() ? *std::move(feed) : nullptr;
  }

  std::optional<TestDatabase> database_;
  std::unique_ptr<Store> store_;
};

TEST(ChangeFeedOptionsTest, OutOfRangeOptionsAreRefused) {
  const auto ok = [](uint64_t, bool) { return absl::OkStatus(); };
  ChangeFeedOptions options;
  options.poll_interval = absl::ZeroDuration();
  EXPECT_EQ(ChangeFeed::Start(options, ok).status().code(), absl::StatusCode::kInvalidArgument);
  options.poll_interval = absl::Minutes(2);
  EXPECT_EQ(ChangeFeed::Start(options, ok).status().code(), absl::StatusCode::kInvalidArgument);
  options.poll_interval = absl::Seconds(1);
  options.max_reconnect_delay = absl::Milliseconds(10);
  EXPECT_EQ(ChangeFeed::Start(options, ok).status().code(), absl::StatusCode::kInvalidArgument);
  options.max_reconnect_delay = absl::Seconds(1);
  EXPECT_EQ(ChangeFeed::Start(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The poll is a minute away: only the NOTIFY of the other connection's commit can wake the
// feed within the test's wait.
TEST_F(ChangeFeedTest, ACommitOnAnotherConnectionWakesTheFeed) {
  Recorder recorder;
  std::unique_ptr<ChangeFeed> feed = StartFeed(recorder, absl::Minutes(1));
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<Call>& c) { return !c.empty(); }));
  EXPECT_TRUE(recorder.calls()[0].resync) << "the first read after connecting is a resync";

  std::unique_ptr<Store> writer = OpenStore(database_->uri());
  absl::StatusOr<PolicyWriteResult> written = writer->ApplyPolicy(MakePolicy("a", 32), kNow);
  ASSERT_TRUE(written.ok()) << written.status();
  const uint64_t revision = writer->LoadConfig()->revision;
  ASSERT_TRUE(recorder.WaitFor([revision](const std::vector<Call>& c) {
    return SawRevision(c, revision);
  })) << "no wake-up for revision "
      << revision;
  EXPECT_FALSE(recorder.calls().back().resync);
  EXPECT_GE(feed->notifications(), 1u);
  EXPECT_TRUE(feed->connected());

  // A write that changed nothing sends nothing and reports nothing.
  const size_t calls = recorder.calls().size();
  ASSERT_TRUE(writer->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  ASSERT_TRUE(writer->ApplyPolicy(MakePolicy("b", 64), kNow).ok());
  const uint64_t next = writer->LoadConfig()->revision;
  ASSERT_TRUE(
      recorder.WaitFor([next](const std::vector<Call>& c) { return SawRevision(c, next); }));
  EXPECT_EQ(recorder.calls().size(), calls + 1);
}

// A revision moved without a NOTIFY (as if the wake-up were lost) is found by the poll.
TEST_F(ChangeFeedTest, ThePollFindsAChangeThatSentNoWakeUp) {
  Recorder recorder;
  std::unique_ptr<ChangeFeed> feed = StartFeed(recorder, absl::Milliseconds(200));
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<Call>& c) { return !c.empty(); }));
  const uint64_t before = recorder.calls().back().revision;
  ASSERT_TRUE(
      RunSql(database_->name(), "UPDATE meta SET value = value + 5 WHERE key = 'revision'").ok());
  ASSERT_TRUE(recorder.WaitFor(
      [before](const std::vector<Call>& c) { return SawRevision(c, before + 5); }));
  EXPECT_EQ(feed->notifications(), 0u);
}

// The database ends the listening session (restart, failover, an administrator): the feed
// connects again and reports a resync, since wake-ups sent meanwhile are gone.
TEST_F(ChangeFeedTest, ALostListenerReconnectsAndResyncs) {
  Recorder recorder;
  std::unique_ptr<ChangeFeed> feed = StartFeed(recorder, absl::Minutes(1));
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<Call>& c) { return !c.empty(); }));
  ASSERT_TRUE(RunSql("postgres", absl::StrCat("SELECT pg_terminate_backend(pid) FROM "
                                              "pg_stat_activity WHERE datname = '",
                                              database_->name(), "' AND pid <> pg_backend_pid()"))
                  .ok());
  // The feed notices the closed socket at once, even with its poll a minute away.
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<Call>& c) { return c.size() >= 2; }));
  EXPECT_TRUE(recorder.calls()[1].resync);
  EXPECT_EQ(feed->connects(), 2u);
  // And it listens again.
  std::unique_ptr<Store> writer = OpenStore(database_->uri());
  ASSERT_TRUE(writer->ApplyPolicy(MakePolicy("a", 32), kNow).ok());
  const uint64_t revision = writer->LoadConfig()->revision;
  ASSERT_TRUE(recorder.WaitFor(
      [revision](const std::vector<Call>& c) { return SawRevision(c, revision); }));
}

// A listener that could not act (its own reload failed) is asked again, resync and all.
TEST_F(ChangeFeedTest, AFailedCallbackIsRetried) {
  Recorder recorder;
  recorder.FailNext(2);
  std::unique_ptr<ChangeFeed> feed = StartFeed(recorder, absl::Milliseconds(100));
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<Call>& c) { return c.size() >= 3; }));
  const std::vector<Call> calls = recorder.calls();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(calls[i].resync) << i;
  // Once it succeeded, an unchanged revision is not reported again.
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(recorder.calls().size(), 3u);
}

// The database is away for a while: the feed keeps trying, stops promptly when asked, and
// resyncs when the database is back.
TEST_F(ChangeFeedTest, AnOutageEndsInAResyncAndStopDoesNotWait) {
  PrivatePostgres pg;
  const std::string uri = pg.Uri("postgres");
  ASSERT_NE(OpenStore(uri), nullptr);  // the schema
  Recorder recorder;
  std::unique_ptr<ChangeFeed> feed = StartFeed(recorder, absl::Milliseconds(200), uri);
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<Call>& c) { return !c.empty(); }));
  ASSERT_TRUE(pg.Halt());
  ASSERT_TRUE(recorder.WaitFor([&](const std::vector<Call>&) { return !feed->connected(); }));
  absl::SleepFor(absl::Seconds(1));  // several failed reconnects
  ASSERT_TRUE(pg.Resume());
  ASSERT_TRUE(recorder.WaitFor(
      [](const std::vector<Call>& c) { return c.size() >= 2 && c.back().resync; }));
  EXPECT_TRUE(feed->connected());
  ASSERT_TRUE(pg.Halt());
  const absl::Time start = absl::Now();
  feed->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "Stop waited for the database";
  ASSERT_TRUE(pg.Resume());
}

}  // namespace
}  // namespace rxfleet::server
