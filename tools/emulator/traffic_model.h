#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tools/emulator/lab.h"

namespace rxfleet::emulator {

// The traffic *model* of rxfleet-emulate: how fast an emulated adapter's netdev counters
// advance, as a function of the RX aggregation hold currently in its register, the USB speed
// and the lab's host class. It is a calibrated interpolation, not a simulation. Calibration
// (data/seed-measurements.md, RTL8922AU, TCP download 1 flow, 160 MHz):
//   SuperSpeed, x86:  613 Mbit/s at a 1024 µs hold, 1002 Mbit/s at 32 µs
//   SuperSpeed, Pi 5: 587 Mbit/s at 1024 µs,        1010 Mbit/s at 32 µs
//   high-speed, x86:  328 / 327 Mbit/s (1024 / 32 µs); Pi 5: 297 / 296
//   high-speed, Pi 1: loss at 50 Mbit/s UDP offered 3.8 % (1024 µs) / 85.7 % (32 µs);
//                     TCP upload 102.3 / 87.7 Mbit/s (used as the Pi 1 link limit)
// Between 32 and 1024 µs every figure is interpolated linearly in the hold:
//   f = (clamp(hold_us, 32, 1024) - 32) / 992,   X(hold) = X(32) + f * (X(1024) - X(32)).
// Aggregation disabled (bit 31 clear) or a zero hold counts as 32 µs; holds above 1024 µs count
// as 1024 µs; a device without an RX aggregation register (non-rtw89) as 32 µs.
// Speeds: SuperSpeed+ (10000, 20000) uses the SuperSpeed figures; full/low speed cap at 80 % of
// the signalling rate (9.6 / 1.2 Mbit/s) with no hold effect. The Pi 1 class has only USB 2
// ports: it always uses its high-speed figures.
// Rates: rx = min(offered_rx, capacity) * (1 - loss), rx_drop = min(offered_rx, capacity) *
// loss (loss is 0 except on the Pi 1 class), tx = min(offered_tx, tx_capacity) where
// tx_capacity is the 32 µs RX capacity (the link limit; the RX hold does not slow TX) except
// on the Pi 1 class (its measured upload figures). Packets: bytes / 1500 (kModelPacketBytes).
//
// Synthetic curve (TrafficSpec::synthetic_curve, lab `traffic.synthetic_curve`): made-up
// figures for tests of hold tuning, not a measurement. When a device has one, its RX capacity
// and RX loss come from the curve instead of the calibration, at every speed and host class:
// with the hold h taken from the register as above (disabled, zero or no register: 32 µs; no
// upper limit but the register's 8160 µs), capacity(h) and loss(h) are interpolated linearly
// between the two points around h and clamped to the first / last point outside the curve's
// range. The rate formulas above are unchanged; TX keeps the calibrated tx_capacity.

/// Bytes per packet the model uses to derive packet counters from byte counters.
inline constexpr double kModelPacketBytes = 1500;

struct TrafficRates {
  double rx_mbps = 0;       ///< delivered to the host
  double tx_mbps = 0;       ///< sent by the host
  double rx_drop_mbps = 0;  ///< received by the adapter but dropped by the host
};

/// Hold in µs encoded in an RX aggregation reg 0 word: bits 15:8 x 32 µs, or 0 when the enable
/// bit 31 is clear (aggregation off).
uint32_t HoldFromRegister(uint32_t word);

/// Model capacity of the RX path in Mbit/s. `hold_us` nullopt = no RX aggregation register.
double RxCapacityMbps(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us);

/// Model fraction of received traffic the host drops, 0..1.
double RxLossFraction(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us);

/// RX capacity (Mbit/s) and loss fraction (0..1) of a synthetic curve at a hold.
struct SyntheticCurveValue {
  double rx_mbps = 0;
  double loss = 0;
};

/// The synthetic curve's value at `hold_us` (nullopt = no RX aggregation register; it and a
/// zero hold count as 32 µs): linear between neighbouring points, clamped to the first / last
/// point outside them. `curve` as the lab loader validates it (non-empty, hold_us strictly
/// increasing).
SyntheticCurveValue SyntheticCurveAt(const std::vector<SyntheticCurvePoint>& curve,
                                     std::optional<uint32_t> hold_us);

/// Model capacity of the TX path in Mbit/s.
double TxCapacityMbps(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us);

/// Rate in bit/s of the tbf qdisc on a shaped netdev's peer (ShapeSpec): the model RX capacity
/// (the synthetic curve's when `synthetic_curve` is non-empty) x `scale`, rounded to whole
/// bit/s, at least 8000 (tbf needs a positive byte rate). Only the capacity is shaped, not the
/// model's loss (tbf drops only what overflows its queue).
uint64_t ShapedRateBps(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us,
                       double scale, const std::vector<SyntheticCurvePoint>& synthetic_curve = {});

/// The rates of an adapter with the given offered load (and RX capacity and loss from
/// `offered.synthetic_curve` when it is non-empty).
TrafficRates ModelRates(HostClass host, double speed_mbps, std::optional<uint32_t> hold_us,
                        const TrafficSpec& offered);

/// Netdev statistics advanced by the model. Deterministic: the values depend only on the
/// initial counters and the sequence of (rates, seconds) given to Advance.
class NetdevCounters {
 public:
  explicit NetdevCounters(const NetdevSpec& initial);

  /// Adds `seconds` of traffic at `rates` (seconds >= 0).
  void Advance(const TrafficRates& rates, double seconds);

  uint64_t rx_bytes() const;
  uint64_t tx_bytes() const;
  uint64_t rx_packets() const;
  uint64_t tx_packets() const;
  uint64_t rx_dropped() const;
  uint64_t rx_errors() const { return initial_.rx_errors; }
  uint64_t tx_errors() const { return initial_.tx_errors; }
  uint64_t tx_dropped() const { return initial_.tx_dropped; }

 private:
  NetdevSpec initial_;
  double rx_bytes_added_ = 0;
  double tx_bytes_added_ = 0;
  double rx_drop_bytes_added_ = 0;
};

}  // namespace rxfleet::emulator
