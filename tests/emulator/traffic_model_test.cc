#include "tools/emulator/traffic_model.h"

#include "gtest/gtest.h"

namespace rxfleet::emulator {
namespace {

TEST(TrafficModelTest, HoldFromRegister) {
  EXPECT_EQ(HoldFromRegister(0x80FF2014), 1024u);
  EXPECT_EQ(HoldFromRegister(0x80FF0114), 32u);
  EXPECT_EQ(HoldFromRegister(0x00FF2014), 0u);  // aggregation disabled
}

TEST(TrafficModelTest, CalibrationPoints) {
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 5000, 1024), 613);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 5000, 32), 1002);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kPi5, 5000, 1024), 587);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kPi5, 5000, 32), 1010);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 480, 1024), 328);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kPi5, 480, 32), 296);
  EXPECT_DOUBLE_EQ(RxLossFraction(HostClass::kPi1, 480, 32), 0.857);
  EXPECT_DOUBLE_EQ(RxLossFraction(HostClass::kPi1, 480, 1024), 0.038);
  EXPECT_DOUBLE_EQ(RxLossFraction(HostClass::kX86, 480, 32), 0);
}

TEST(TrafficModelTest, LinearBetweenAndClampedOutside) {
  // Midpoint of 32..1024 µs is 528 µs.
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 5000, 528), (1002 + 613) / 2.0);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 5000, 8160), 613);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 5000, 0), 1002);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 5000, std::nullopt), 1002);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kX86, 10000, 1024), 613);
  EXPECT_DOUBLE_EQ(RxCapacityMbps(HostClass::kPi1, 5000, 1024), 102.3);
  EXPECT_NEAR(RxCapacityMbps(HostClass::kX86, 12, 32), 9.6, 1e-9);
}

TEST(TrafficModelTest, RatesCapByOfferedLoadAndDropOnPi1) {
  TrafficRates r = ModelRates(HostClass::kX86, 5000, 1024, {1200, 50});
  EXPECT_DOUBLE_EQ(r.rx_mbps, 613);
  EXPECT_DOUBLE_EQ(r.tx_mbps, 50);
  r = ModelRates(HostClass::kX86, 5000, 32, {300, 0});
  EXPECT_DOUBLE_EQ(r.rx_mbps, 300);
  r = ModelRates(HostClass::kPi1, 480, 32, {50, 0});
  EXPECT_NEAR(r.rx_mbps, 50 * (1 - 0.857), 1e-9);
  EXPECT_NEAR(r.rx_drop_mbps, 50 * 0.857, 1e-9);
}

TEST(TrafficModelTest, CountersAreDeterministic) {
  NetdevSpec initial;
  initial.rx_bytes = 1000;
  NetdevCounters c(initial);
  c.Advance({8, 0.8, 0.08}, 10);  // 10 MB rx, 1 MB tx, 0.1 MB dropped
  EXPECT_EQ(c.rx_bytes(), 1000u + 10'000'000u);
  EXPECT_EQ(c.tx_bytes(), 1'000'000u);
  EXPECT_EQ(c.rx_packets(), 10'000'000u / 1500);
  EXPECT_EQ(c.rx_dropped(), 100'000u / 1500);
}

}  // namespace
}  // namespace rxfleet::emulator
