// server/registry/debouncer: a change after a quiet spell runs at once, bursts fold into one
// more run at least the delay later, runs never overlap.
#include "server/registry/debouncer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"

namespace rxfleet::server {
namespace {

// Waits until `condition` holds or `timeout` passes; returns whether it held.
template <typename F>
bool WaitFor(F condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(DebouncerTest, AChangeAfterAQuietSpellRunsAtOnce) {
  // The delay is far longer than any scheduling hiccup: a run that waited for it would show.
  const absl::Time start = absl::Now();
  std::atomic<int64_t> first_run_ms = -1;
  Debouncer debouncer(absl::Seconds(20),
                      [&] { first_run_ms = absl::ToInt64Milliseconds(absl::Now() - start); });
  debouncer.Trigger();
  ASSERT_TRUE(WaitFor([&] { return debouncer.runs() == 1; }, absl::Seconds(10)));
  EXPECT_LT(first_run_ms.load(), 10000);
}

TEST(DebouncerTest, ABurstCostsTwoRunsAtLeastTheDelayApart) {
  std::atomic<int> runs = 0;
  std::vector<absl::Time> starts;  // written by the debouncer's thread only
  Debouncer debouncer(absl::Milliseconds(300), [&] {
    starts.push_back(absl::Now());
    ++runs;
  });
  debouncer.Trigger();
  ASSERT_TRUE(WaitFor([&] { return debouncer.runs() == 1; }, absl::Seconds(5)));
  // A burst right after a run: folded into one more run, a delay after the first started.
  for (int i = 0; i < 1000; ++i) debouncer.Trigger();
  ASSERT_TRUE(WaitFor([&] { return debouncer.runs() == 2; }, absl::Seconds(5)));
  // Nothing else was left scheduled by the burst.
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_EQ(runs.load(), 2);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_GE(starts[1] - starts[0], absl::Milliseconds(300));
}

TEST(DebouncerTest, TriggerDuringARunSchedulesExactlyOneMoreRun) {
  absl::Notification entered, release;
  std::atomic<int> runs = 0;
  Debouncer debouncer(absl::Milliseconds(10), [&] {
    if (runs.fetch_add(1) == 0) {
      entered.Notify();
      release.WaitForNotification();
    }
  });
  debouncer.Trigger();
  entered.WaitForNotification();
  for (int i = 0; i < 10; ++i) debouncer.Trigger();  // while the first run is in progress
  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return debouncer.runs() == 2; }, absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(runs.load(), 2);
}

TEST(DebouncerTest, ContinuousTriggersStillRunWithinTheDelay) {
  // A change every 5 ms for 300 ms must not starve the action (no trailing-edge reset).
  std::atomic<int> runs = 0;
  Debouncer debouncer(absl::Milliseconds(50), [&] { ++runs; });
  const absl::Time end = absl::Now() + absl::Milliseconds(300);
  while (absl::Now() < end) {
    debouncer.Trigger();
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_GE(runs.load(), 2);
  EXPECT_LE(runs.load(), 7);
}

TEST(DebouncerTest, DestructorDropsAScheduledRun) {
  std::atomic<int> runs = 0;
  {
    Debouncer debouncer(absl::Seconds(30), [&] { ++runs; });
    debouncer.Trigger();  // runs at once
    ASSERT_TRUE(WaitFor([&] { return debouncer.runs() == 1; }, absl::Seconds(5)));
    debouncer.Trigger();  // due 30 s after the first run started
  }
  EXPECT_EQ(runs.load(), 1);
}

}  // namespace
}  // namespace rxfleet::server
