#include "tools/emulator/traffic_model.h"

#include <optional>
#include <vector>

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
  TrafficRates r = ModelRates(HostClass::kX86, 5000, 1024, {1200, 50, {}});
  EXPECT_DOUBLE_EQ(r.rx_mbps, 613);
  EXPECT_DOUBLE_EQ(r.tx_mbps, 50);
  r = ModelRates(HostClass::kX86, 5000, 32, {300, 0, {}});
  EXPECT_DOUBLE_EQ(r.rx_mbps, 300);
  r = ModelRates(HostClass::kPi1, 480, 32, {50, 0, {}});
  EXPECT_NEAR(r.rx_mbps, 50 * (1 - 0.857), 1e-9);
  EXPECT_NEAR(r.rx_drop_mbps, 50 * 0.857, 1e-9);
}

// The tuning-x86-usb3 lab's curve: an optimum at 128 µs.
const std::vector<SyntheticCurvePoint> kPeak = {{32, 800, 0},  {64, 900, 0},  {128, 1000, 0},
                                                {256, 850, 0}, {512, 700, 0}, {1024, 600, 0}};
// The tuning-pi1-usb2 lab's curve: lossy up to 256 µs, lossless from 512 µs.
const std::vector<SyntheticCurvePoint> kLoss = {
    {32, 50, 0.5}, {256, 50, 0.5}, {512, 48, 0}, {1024, 40, 0}};

TEST(TrafficModelTest, SyntheticCurveAtPointsBetweenAndOutside) {
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 32).rx_mbps, 800);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 128).rx_mbps, 1000);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 1024).rx_mbps, 600);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 96).rx_mbps, 950);    // 64..128
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 192).rx_mbps, 925);   // 128..256
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 768).rx_mbps, 650);   // 512..1024
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 8160).rx_mbps, 600);  // above: the last point
  // Aggregation disabled (hold 0) and no register count as 32 µs.
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 0).rx_mbps, 800);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, std::nullopt).rx_mbps, 800);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kPeak, 1024).loss, 0);
  // Below the first point: the first point.
  const std::vector<SyntheticCurvePoint> late = {{256, 100, 0.2}, {512, 200, 0}};
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(late, 32).rx_mbps, 100);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(late, 32).loss, 0.2);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(late, 384).rx_mbps, 150);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(late, 384).loss, 0.1);
  // A point at hold 0 only shapes the segment up to the next point.
  const std::vector<SyntheticCurvePoint> from_zero = {{0, 100, 0}, {64, 200, 0}};
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(from_zero, 0).rx_mbps, 150);
}

TEST(TrafficModelTest, SyntheticCurveLossIsInterpolated) {
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kLoss, 32).loss, 0.5);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kLoss, 256).loss, 0.5);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kLoss, 384).loss, 0.25);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kLoss, 384).rx_mbps, 49);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kLoss, 512).loss, 0);
  EXPECT_DOUBLE_EQ(SyntheticCurveAt(kLoss, 2048).rx_mbps, 40);
}

TEST(TrafficModelTest, SyntheticCurveReplacesCalibratedRxOnly) {
  TrafficSpec offered{1200, 50, kPeak};
  TrafficRates r = ModelRates(HostClass::kX86, 5000, 128, offered);
  EXPECT_DOUBLE_EQ(r.rx_mbps, 1000);
  EXPECT_DOUBLE_EQ(r.rx_drop_mbps, 0);
  EXPECT_DOUBLE_EQ(r.tx_mbps, 50);
  EXPECT_DOUBLE_EQ(ModelRates(HostClass::kX86, 5000, 32, offered).rx_mbps, 800);
  EXPECT_DOUBLE_EQ(ModelRates(HostClass::kX86, 5000, 1024, offered).rx_mbps, 600);
  // Offered load still caps; the curve applies at any speed and host class.
  offered.offered_rx_mbps = 300;
  EXPECT_DOUBLE_EQ(ModelRates(HostClass::kX86, 5000, 128, offered).rx_mbps, 300);
  EXPECT_DOUBLE_EQ(ModelRates(HostClass::kPi1, 480, 128, {1200, 0, kPeak}).rx_mbps, 1000);
  // TX keeps the calibrated capacity (x86 SuperSpeed: 1002 Mbit/s).
  EXPECT_DOUBLE_EQ(ModelRates(HostClass::kX86, 5000, 128, {0, 2000, kPeak}).tx_mbps, 1002);

  // rx = min(offered, capacity) x (1 - loss), rx_drop = min(offered, capacity) x loss.
  const TrafficSpec pi1{60, 5, kLoss};
  r = ModelRates(HostClass::kPi1, 480, 32, pi1);
  EXPECT_DOUBLE_EQ(r.rx_mbps, 25);
  EXPECT_DOUBLE_EQ(r.rx_drop_mbps, 25);
  EXPECT_DOUBLE_EQ(r.tx_mbps, 5);
  r = ModelRates(HostClass::kPi1, 480, 384, pi1);
  EXPECT_DOUBLE_EQ(r.rx_mbps, 49 * 0.75);
  EXPECT_DOUBLE_EQ(r.rx_drop_mbps, 49 * 0.25);
  r = ModelRates(HostClass::kPi1, 480, 512, pi1);
  EXPECT_DOUBLE_EQ(r.rx_mbps, 48);
  EXPECT_DOUBLE_EQ(r.rx_drop_mbps, 0);
  EXPECT_DOUBLE_EQ(ModelRates(HostClass::kPi1, 480, 1024, pi1).rx_mbps, 40);
}

TEST(TrafficModelTest, ShapedRateFollowsTheSyntheticCurve) {
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 128, 0.1, kPeak), 100'000'000u);
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 1024, 0.1, kPeak), 60'000'000u);
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 0, 1, kPeak), 800'000'000u);
  // Only the capacity is shaped, not the loss.
  EXPECT_EQ(ShapedRateBps(HostClass::kPi1, 480, 32, 1, kLoss), 50'000'000u);
  // Without a curve: the calibrated capacity.
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 1024, 0.1, {}), 61'300'000u);
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
