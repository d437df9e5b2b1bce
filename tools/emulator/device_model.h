#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/emulator/lab.h"
#include "tools/emulator/traffic_model.h"

namespace rxfleet::emulator {

// The behaviour of one emulated adapter behind its USB control endpoint, independent of
// umockdev: rtw89 vendor register requests, standard descriptor requests, failure modes,
// plug state, the transfer log and the traffic model counters. Not thread-safe: the emulator
// serialises access with one mutex.
//
// rtw89 register protocol (rtw89 usb.c/usb.h; data/rtw89-rx-agg.md "Register access
// protocol"): bRequest 0x05 (RTW89_USB_VENQT), bmRequestType 0xC0 read / 0x40 write,
// address = wIndex << 16 | wValue, wLength 1, 2 or 4, little-endian data. Registers form a
// byte-addressed map, so sub-word accesses read and write the addressed bytes; unknown bytes
// read 0. Anything else with a vendor or class type STALLs.
//
// rtw88 and mt76 adapters (IDs of common/chips/rtw88-usb-devices.tsv, mt76-usb-devices.tsv)
// answer their family's protocol instead (common::DriverLayout::protocol): rtw88 the same
// request with address = wValue and wIndex 0 (other wIndex values STALL); mt76x0u 0x07/0x06,
// mt76x2u 0x47/0x46, mt7921u/mt7925u 0x63/0x66 with bmRequestType 0xDF/0x5F, all with
// address = wValue << 16 | wIndex. The transfer log records the decoded address.

/// How a control transfer ended, as recorded in the state file.
enum class TransferResult { kOk, kStall, kTimeout, kNoDevice, kAsleep, kProtocolError };

/// "ok", "stall", "timeout", "no_device", "asleep", "protocol_error".
std::string TransferResultName(TransferResult result);

/// The 8-byte SETUP packet of a control transfer.
struct ControlSetup {
  uint8_t request_type = 0;
  uint8_t request = 0;
  uint16_t value = 0;
  uint16_t index = 0;
  uint16_t length = 0;
};

/// What the usbfs layer must do with a submitted control URB.
struct ControlOutcome {
  /// Non-zero: fail USBDEVFS_SUBMITURB itself with this errno (ENODEV when unplugged).
  int submit_errno = 0;
  /// True: the URB never completes on its own (timeout mode); it ends when discarded
  /// (-ENOENT) or when the device is unplugged (-ESHUTDOWN).
  bool pending = false;
  /// URB status when it completes: 0, -EPIPE (stall), -EPROTO (protocol error).
  int status = 0;
  /// IN data (at most wLength bytes) when status is 0.
  std::vector<uint8_t> in_data;
};

/// One control transfer in the log.
struct TransferRecord {
  uint64_t seq = 0;
  double t = 0;  ///< seconds since the child started
  bool in = false;
  uint8_t request_type = 0;
  uint8_t request = 0;
  uint32_t address = 0;  ///< wIndex << 16 | wValue
  uint16_t length = 0;
  std::vector<uint8_t> data;  ///< bytes read (IN, when data came back) or written (OUT)
  TransferResult result = TransferResult::kOk;
};

/// One rate the emulator applied to a shaped netdev (ShapeSpec), for the state file.
struct ShapeRecord {
  double t = 0;                     ///< seconds since the child started (0: before it started)
  std::optional<uint32_t> hold_us;  ///< the hold the rate was computed from
  uint64_t rate_bps = 0;
};

/// A byte-addressed register map initialised from 32-bit little-endian words.
class RegisterMap {
 public:
  RegisterMap() = default;
  explicit RegisterMap(const std::map<uint32_t, uint32_t>& words);

  std::vector<uint8_t> Read(uint32_t address, size_t length) const;
  void Write(uint32_t address, const std::vector<uint8_t>& bytes);
  uint32_t Read32(uint32_t address) const;
  void Write32(uint32_t address, uint32_t value);
  /// Every 32-bit aligned word any byte of which was ever set, by address.
  std::map<uint32_t, uint32_t> Words() const;

 private:
  std::map<uint32_t, uint8_t> bytes_;
};

class EmulatedDevice {
 public:
  EmulatedDevice(const DeviceSpec& spec, HostClass host_class);

  const DeviceSpec& spec() const { return spec_; }
  const DeviceConfig& config() const { return config_; }
  bool plugged() const { return plugged_; }
  bool asleep() const { return asleep_; }
  /// Incremented by every Plug; a usbfs client keeps the incarnation it opened.
  uint64_t incarnation() const { return incarnation_; }

  /// Enumerates with `config`. Registers reset to the lab's values unless keep_registers; the
  /// netdev counters restart from the lab's values (the driver registers a new netdev).
  void Plug(const DeviceConfig& config, bool keep_registers);
  void Unplug();
  void SetAsleep(bool asleep) { asleep_ = asleep; }
  void FailNext(int count, FailMode mode);
  /// A register write not made over USB (the driver re-initialising the chip).
  void SetRegister(uint32_t address, uint32_t value) { registers_.Write32(address, value); }
  uint32_t Register32(uint32_t address) const { return registers_.Read32(address); }

  /// Serves a control transfer submitted at `t` by a client of `incarnation`.
  ControlOutcome HandleControl(uint64_t incarnation, const ControlSetup& setup,
                               const std::vector<uint8_t>& out_data, double t);

  /// Current model rates (zero when unplugged, asleep or without a netdev/traffic model).
  TrafficRates CurrentRates() const;
  /// The RX aggregation hold the traffic model sees now (nullopt: no such register).
  std::optional<uint32_t> CurrentHoldUs() const;
  /// Advances the netdev counters by `seconds` at the current rates.
  void AdvanceTraffic(double seconds);
  /// Runs the driver's periodic work due by child time `t` (the rtw88 watchdog every 2 s when
  /// the lab enables it; not recorded as USB transfers: the driver is not a usbfs client).
  void TickDriver(double t);
  /// Register writes the emulated driver made (rtw88 watchdog rewrites).
  uint64_t driver_writes() const { return driver_writes_; }
  /// Shaped netdev (NetdevSpec::shape): true when the tbf rate the model asks for now,
  /// ShapedRateBps(host class, speed, hold, scale, the lab's synthetic curve if any), differs
  /// from the last one applied to the same namespace and device (or none was); then sets
  /// `shape` and `rate_bps`.
  bool ShapeNeedsApply(ShapeSpec* shape, uint64_t* rate_bps) const;
  /// Records that `rate_bps` is now applied to `shape`'s device (child time `t`).
  void RecordShapeApplied(const ShapeSpec& shape, double t, uint64_t rate_bps);
  const std::vector<ShapeRecord>& shape_records() const { return shape_records_; }

  /// Netdev counters (only meaningful with a netdev).
  const NetdevCounters& counters() const { return counters_; }

  const std::vector<TransferRecord>& transfers() const { return transfers_; }

  /// {"name", "vid", "pid", "bus", "port", "speed", "plugged", "asleep", "registers",
  ///  "transfers", ...} as documented in docs/EMULATOR.md.
  nlohmann::json StateJson() const;

 private:
  void Record(const ControlSetup& setup, std::vector<uint8_t> data, TransferResult result, double t,
              std::optional<uint32_t> address = std::nullopt);
  ControlOutcome Standard(const ControlSetup& setup) const;
  void Rtw88Watchdog();

  DeviceSpec spec_;
  HostClass host_class_;
  DeviceConfig config_;
  RegisterMap registers_;
  bool plugged_ = true;
  bool asleep_ = false;
  uint64_t incarnation_ = 1;
  int fail_count_ = 0;
  FailMode fail_mode_ = FailMode::kTimeout;
  NetdevCounters counters_;
  std::vector<TransferRecord> transfers_;
  uint64_t next_seq_ = 1;
  double next_watchdog_ = 2.0;
  uint64_t driver_writes_ = 0;
  std::optional<std::pair<std::string, std::string>> shaped_target_;  ///< (netns, device)
  std::optional<uint64_t> shaped_rate_bps_;
  std::vector<ShapeRecord> shape_records_;
};

}  // namespace rxfleet::emulator
