// server/registry/outbound_queue: one write in flight, newest item per slot.
#include "server/registry/outbound_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace rxfleet::server {
namespace {

constexpr size_t kConfig = 0;
constexpr size_t kBundle = 1;

TEST(OutboundQueueTest, IdleQueueWritesImmediately) {
  OutboundQueue<std::string, 2> queue;
  EXPECT_EQ(queue.Push(kBundle, "b1"), "b1");
  EXPECT_TRUE(queue.in_flight());
  EXPECT_EQ(queue.pending(), 0u);
  EXPECT_EQ(queue.WriteDone(), std::nullopt);
  EXPECT_FALSE(queue.in_flight());
}

TEST(OutboundQueueTest, BundlesCoalesceToTheNewestWhileAWriteIsInFlight) {
  OutboundQueue<std::string, 2> queue;
  ASSERT_EQ(queue.Push(kBundle, "b1"), "b1");
  for (int i = 2; i <= 100; ++i) {
    EXPECT_EQ(queue.Push(kBundle, "b" + std::to_string(i)), std::nullopt);
  }
  EXPECT_EQ(queue.pending(), 1u);
  EXPECT_EQ(queue.coalesced(), 98u);
  EXPECT_EQ(queue.WriteDone(), "b100");
  EXPECT_EQ(queue.WriteDone(), std::nullopt);
}

TEST(OutboundQueueTest, LowerSlotsGoFirst) {
  OutboundQueue<std::string, 2> queue;
  ASSERT_EQ(queue.Push(kBundle, "b1"), "b1");
  queue.Push(kBundle, "b2");
  queue.Push(kConfig, "c1");
  EXPECT_EQ(queue.pending(), 2u);
  EXPECT_EQ(queue.WriteDone(), "c1");
  EXPECT_EQ(queue.WriteDone(), "b2");
  EXPECT_EQ(queue.WriteDone(), std::nullopt);
  EXPECT_EQ(queue.coalesced(), 0u);
}

TEST(OutboundQueueTest, PendingNeverExceedsTheSlotCount) {
  OutboundQueue<int, 2> queue;
  ASSERT_TRUE(queue.Push(kBundle, 0).has_value());
  for (int i = 1; i < 10000; ++i) {
    queue.Push(i % 2, i);
    ASSERT_LE(queue.pending(), 2u);
  }
}

}  // namespace
}  // namespace rxfleet::server
