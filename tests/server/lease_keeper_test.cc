// server/store/lease_keeper.h on real stores: one holder among keepers on one PostgreSQL
// database, a take-over after the holder stops (released), the job stopped
// at once when the database is away, and the SQLite store's lease that is always held.
#include "server/store/lease_keeper.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>

#include "absl/time/clock.h"
#include "tests/server/store_test_util.h"
#include "tests/support/paths.h"
#include "tests/support/postgres.h"

namespace rxfleet::server {
namespace {

using ::rxfleet::testing::PrivatePostgres;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::TestDatabase;
using store_test::OpenStore;

bool Eventually(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

std::unique_ptr<LeaseKeeper> Keep(Store* store, const std::string& holder,
                                  absl::Duration ttl = absl::Seconds(3)) {
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> keeper =
      LeaseKeeper::Start(store, {"experiments", holder, ttl});
  EXPECT_TRUE(keeper.ok()) << keeper.status();
  return keeper.ok() ? *std::move(keeper) : nullptr;
}

TEST(LeaseKeeperTest, OnSqliteTheLeaseIsHeldFromTheStart) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenStore(dir.File("server.db"));
  std::unique_ptr<LeaseKeeper> keeper = Keep(store.get(), "a:7443");
  std::optional<LeaseFence> fence = keeper->Fence();
  ASSERT_TRUE(fence.has_value());
  EXPECT_EQ(fence->holder, "a:7443");
  EXPECT_TRUE(store->DeleteWindowsOfExperimentsEndedBefore(absl::Now(), &*fence).ok());
  keeper->Stop();
  EXPECT_FALSE(keeper->Fence().has_value());
  EXPECT_EQ(store->DeleteWindowsOfExperimentsEndedBefore(absl::Now(), &*fence).status().code(),
            absl::StatusCode::kAborted)
      << "the released lease still fenced writes in";
  EXPECT_EQ(LeaseKeeper::Start(store.get(), {"experiments", "", absl::Seconds(3)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class PostgresLeaseKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rxfleet::testing::PostgresAvailable()) {
      GTEST_SKIP() << "no test PostgreSQL server: RXFLEET_TEST_PG_DIR is unset (ctest sets it)";
    }
  }
};

TEST_F(PostgresLeaseKeeperTest, OneHolderAndATakeOverWhenItStops) {
  TestDatabase db;
  std::unique_ptr<Store> store_a = OpenStore(db.uri());
  std::unique_ptr<Store> store_b = OpenStore(db.uri());
  std::unique_ptr<LeaseKeeper> a = Keep(store_a.get(), "a:7443");
  std::unique_ptr<LeaseKeeper> b = Keep(store_b.get(), "b:7443");
  ASSERT_TRUE(a->Fence().has_value()) << "the first keeper holds it from its start";
  absl::SleepFor(absl::Seconds(2));  // renewals on both sides
  EXPECT_TRUE(a->Fence().has_value());
  EXPECT_FALSE(b->Fence().has_value());
  ASSERT_TRUE(b->last_seen().has_value());
  EXPECT_EQ(b->last_seen()->holder, "a:7443");

  // A clean stop releases: b takes over at its next attempt (ttl/3), with a new epoch.
  const uint64_t epoch = a->Fence()->epoch;
  a->Stop();
  ASSERT_TRUE(Eventually([&] { return b->Fence().has_value(); }, absl::Seconds(5)));
  EXPECT_EQ(b->Fence()->epoch, epoch + 1);

  // A restarted a takes the released lease at its first attempt. (Expiry without a release:
  // store_postgres_test.cc, AHeldLeaseIsRefusedUntilItExpiresAndThenTakenOver.)
  const uint64_t b_epoch = b->Fence()->epoch;
  b.reset();
  a = Keep(store_a.get(), "a:7443");
  ASSERT_TRUE(a->Fence().has_value());
  EXPECT_EQ(a->Fence()->epoch, b_epoch + 1);
}

// The database goes away: the holder's job stops no later than ttl (less the margin) after the
// last renewal, before any other replica could take the lease over; it holds again after.
TEST_F(PostgresLeaseKeeperTest, TheJobStopsWhileTheDatabaseIsAway) {
  PrivatePostgres pg;
  std::unique_ptr<Store> store = OpenStore(pg.Uri("postgres"));
  ASSERT_NE(store, nullptr);
  std::unique_ptr<LeaseKeeper> keeper = Keep(store.get(), "a:7443", absl::Seconds(3));
  ASSERT_TRUE(keeper->Fence().has_value());
  ASSERT_TRUE(pg.Halt());
  const absl::Time halted = absl::Now();
  ASSERT_TRUE(Eventually([&] { return !keeper->Fence().has_value(); }, absl::Seconds(10)));
  EXPECT_LT(absl::Now() - halted, absl::Seconds(3)) << "held past the lease's expiry";
  ASSERT_TRUE(pg.Resume());
  ASSERT_TRUE(Eventually([&] { return keeper->Fence().has_value(); }, absl::Seconds(20)));
}

}  // namespace
}  // namespace rxfleet::server
