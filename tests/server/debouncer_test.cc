// server/registry/debouncer: bursts fold into one run; runs never overlap.
#include "server/registry/debouncer.h"

#include <gtest/gtest.h>

#include <atomic>

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

TEST(DebouncerTest, BurstBecomesOneRunAfterTheDelay) {
  std::atomic<int> runs = 0;
  const absl::Time start = absl::Now();
  std::atomic<int64_t> first_run_ms = -1;
  Debouncer debouncer(absl::Milliseconds(100), [&] {
    if (runs.fetch_add(1) == 0) first_run_ms = absl::ToInt64Milliseconds(absl::Now() - start);
  });
  for (int i = 0; i < 1000; ++i) debouncer.Trigger();
  ASSERT_TRUE(WaitFor([&] { return debouncer.runs() == 1; }, absl::Seconds(5)));
  EXPECT_GE(first_run_ms.load(), 100);
  // Nothing was left scheduled by the burst.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(runs.load(), 1);
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
    debouncer.Trigger();
  }
  EXPECT_EQ(runs.load(), 0);
}

}  // namespace
}  // namespace rxfleet::server
