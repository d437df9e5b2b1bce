#include "tools/emulator/traffic_model.h"

#include <algorithm>
#include <cmath>

namespace rxfleet::emulator {
namespace {

constexpr double kShortHoldUs = 32;
constexpr double kLongHoldUs = 1024;

// Calibration points: value at the 32 µs hold and at the 1024 µs hold.
struct Point {
  double at_short;
  double at_long;
};

constexpr Point kX86SuperRx = {1002, 613};
constexpr Point kPi5SuperRx = {1010, 587};
constexpr Point kX86HighRx = {327, 328};
constexpr Point kPi5HighRx = {296, 297};
constexpr Point kPi1HighLink = {87.7, 102.3};
constexpr Point kPi1HighLoss = {0.857, 0.038};

double Fraction(std::optional<uint32_t> hold_us) {
  if (!hold_us.has_value()) return 0;
  const double h = std::clamp(static_cast<double>(*hold_us), kShortHoldUs, kLongHoldUs);
  return (h - kShortHoldUs) / (kLongHoldUs - kShortHoldUs);
}

double Interpolate(const Point& p, std::optional<uint32_t> hold_us) {
  const double f = Fraction(hold_us);
  return (1 - f) * p.at_short + f * p.at_long;
}

bool Slow(double speed_mbps) { return speed_mbps < 480; }

double SlowCap(double speed_mbps) { return 0.8 * speed_mbps; }

}  // namespace

uint32_t HoldFromRegister(uint32_t word) {
  if ((word & 0x80000000u) == 0) return 0;
  return ((word >> 8) & 0xffu) * 32;
}

double RxCapacityMbps(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us) {
  if (Slow(speed_mbps)) return SlowCap(speed_mbps);
  if (host == HostClass::kPi1) return Interpolate(kPi1HighLink, hold_us);
  const bool super = speed_mbps >= 5000;
  if (host == HostClass::kPi5) return Interpolate(super ? kPi5SuperRx : kPi5HighRx, hold_us);
  return Interpolate(super ? kX86SuperRx : kX86HighRx, hold_us);
}

double RxLossFraction(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us) {
  if (host != HostClass::kPi1 || Slow(speed_mbps)) return 0;
  return Interpolate(kPi1HighLoss, hold_us);
}

SyntheticCurveValue SyntheticCurveAt(const std::vector<SyntheticCurvePoint>& curve,
                                     std::optional<uint32_t> hold_us) {
  if (curve.empty()) return {};
  const double h = hold_us.value_or(0) == 0 ? kShortHoldUs : static_cast<double>(*hold_us);
  const SyntheticCurvePoint& first = curve.front();
  const SyntheticCurvePoint& last = curve.back();
  if (h <= first.hold_us) return {first.rx_mbps, first.loss};
  if (h >= last.hold_us) return {last.rx_mbps, last.loss};
  // The first point above h; curve[i - 1] is at or below it.
  const auto above =
      std::upper_bound(curve.begin(), curve.end(), h,
                       [](double hold, const SyntheticCurvePoint& p) { return hold < p.hold_us; });
  const SyntheticCurvePoint& a = *(above - 1);
  const SyntheticCurvePoint& b = *above;
  const double f = (h - a.hold_us) / (static_cast<double>(b.hold_us) - a.hold_us);
  return {(1 - f) * a.rx_mbps + f * b.rx_mbps, (1 - f) * a.loss + f * b.loss};
}

double TxCapacityMbps(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us) {
  if (Slow(speed_mbps)) return SlowCap(speed_mbps);
  if (host == HostClass::kPi1) return Interpolate(kPi1HighLink, hold_us);
  return RxCapacityMbps(host, speed_mbps, kShortHoldUs);
}

uint64_t ShapedRateBps(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us,
                       double scale, const std::vector<SyntheticCurvePoint>& synthetic_curve) {
  constexpr double kMinRateBps = 8000;
  const double capacity = synthetic_curve.empty()
                              ? RxCapacityMbps(host, speed_mbps, hold_us)
                              : SyntheticCurveAt(synthetic_curve, hold_us).rx_mbps;
  const double bps = capacity * 1e6 * scale;
  return static_cast<uint64_t>(std::llround(std::max(bps, kMinRateBps)));
}

TrafficRates ModelRates(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us,
                        const TrafficSpec& offered) {
  TrafficRates rates;
  double capacity = 0;
  double loss = 0;
  if (offered.synthetic_curve.empty()) {
    capacity = RxCapacityMbps(host, speed_mbps, hold_us);
    loss = RxLossFraction(host, speed_mbps, hold_us);
  } else {
    const SyntheticCurveValue v = SyntheticCurveAt(offered.synthetic_curve, hold_us);
    capacity = v.rx_mbps;
    loss = v.loss;
  }
  const double rx_in = std::min(offered.offered_rx_mbps, capacity);
  rates.rx_mbps = rx_in * (1 - loss);
  rates.rx_drop_mbps = rx_in * loss;
  rates.tx_mbps = std::min(offered.offered_tx_mbps, TxCapacityMbps(host, speed_mbps, hold_us));
  return rates;
}

NetdevCounters::NetdevCounters(const NetdevSpec& initial) : initial_(initial) {}

void NetdevCounters::Advance(const TrafficRates& rates, double seconds) {
  if (seconds <= 0) return;
  constexpr double kBytesPerMbit = 1e6 / 8;
  rx_bytes_added_ += rates.rx_mbps * kBytesPerMbit * seconds;
  tx_bytes_added_ += rates.tx_mbps * kBytesPerMbit * seconds;
  rx_drop_bytes_added_ += rates.rx_drop_mbps * kBytesPerMbit * seconds;
}

uint64_t NetdevCounters::rx_bytes() const {
  return initial_.rx_bytes + static_cast<uint64_t>(std::floor(rx_bytes_added_));
}
uint64_t NetdevCounters::tx_bytes() const {
  return initial_.tx_bytes + static_cast<uint64_t>(std::floor(tx_bytes_added_));
}
uint64_t NetdevCounters::rx_packets() const {
  return initial_.rx_packets +
         static_cast<uint64_t>(std::floor(rx_bytes_added_ / kModelPacketBytes));
}
uint64_t NetdevCounters::tx_packets() const {
  return initial_.tx_packets +
         static_cast<uint64_t>(std::floor(tx_bytes_added_ / kModelPacketBytes));
}
uint64_t NetdevCounters::rx_dropped() const {
  return initial_.rx_dropped +
         static_cast<uint64_t>(std::floor(rx_drop_bytes_added_ / kModelPacketBytes));
}

}  // namespace rxfleet::emulator
