#include "tools/emulator/device_model.h"

#include <cerrno>

#include "absl/strings/str_format.h"
#include "common/chips/family.h"
#include "tools/emulator/descriptors.h"

namespace rxfleet::emulator {
namespace {

constexpr uint32_t kAsleepReadValue = 0xDEADBEEF;
constexpr uint32_t kAllOnes = 0xFFFFFFFF;
// rtw88 main.h:118: the watchdog runs every round_jiffies_relative(HZ * 2).
constexpr double kRtw88WatchdogSeconds = 2.0;

// The register protocol the device answers: its observe-only family's (by id, or for an id in
// no table by the bound driver of its netdev), else rtw89's.
const common::RegisterProtocol& ProtocolFor(const DeviceConfig& config) {
  const common::ObservedChip* chip = common::LookupObservedChip(config.vid, config.pid);
  if (chip == nullptr && config.netdev)
    chip = common::LookupObservedChipByDriver(config.netdev->driver);
  return chip != nullptr ? chip->layout->protocol : common::Rtw89Protocol();
}

std::string HexValue(const std::vector<uint8_t>& data) {
  uint32_t v = 0;
  for (size_t i = 0; i < data.size(); ++i) v |= static_cast<uint32_t>(data[i]) << (8 * i);
  return absl::StrFormat("0x%0*x", static_cast<int>(2 * data.size()), v);
}

std::string HexBytes(const std::vector<uint8_t>& data) {
  std::string out;
  for (uint8_t b : data) absl::StrAppendFormat(&out, "%02x", b);
  return out;
}

std::vector<uint8_t> Truncate(std::vector<uint8_t> data, size_t length) {
  if (data.size() > length) data.resize(length);
  return data;
}

}  // namespace

std::string TransferResultName(TransferResult result) {
  switch (result) {
    case TransferResult::kOk:
      return "ok";
    case TransferResult::kStall:
      return "stall";
    case TransferResult::kTimeout:
      return "timeout";
    case TransferResult::kNoDevice:
      return "no_device";
    case TransferResult::kAsleep:
      return "asleep";
    case TransferResult::kProtocolError:
      return "protocol_error";
  }
  return "ok";
}

RegisterMap::RegisterMap(const std::map<uint32_t, uint32_t>& words) {
  for (const auto& [address, value] : words) Write32(address, value);
}

std::vector<uint8_t> RegisterMap::Read(uint32_t address, size_t length) const {
  std::vector<uint8_t> out(length, 0);
  for (size_t i = 0; i < length; ++i) {
    auto it = bytes_.find(address + static_cast<uint32_t>(i));
    if (it != bytes_.end()) out[i] = it->second;
  }
  return out;
}

void RegisterMap::Write(uint32_t address, const std::vector<uint8_t>& bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) bytes_[address + static_cast<uint32_t>(i)] = bytes[i];
}

uint32_t RegisterMap::Read32(uint32_t address) const {
  const std::vector<uint8_t> b = Read(address, 4);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

void RegisterMap::Write32(uint32_t address, uint32_t value) {
  Write(address, {static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                  static_cast<uint8_t>(value >> 16), static_cast<uint8_t>(value >> 24)});
}

std::map<uint32_t, uint32_t> RegisterMap::Words() const {
  std::map<uint32_t, uint32_t> words;
  for (const auto& [address, value] : bytes_) {
    (void)value;
    const uint32_t aligned = address & ~3u;
    if (!words.count(aligned)) words[aligned] = Read32(aligned);
  }
  return words;
}

EmulatedDevice::EmulatedDevice(const DeviceSpec& spec, HostClass host_class)
    : spec_(spec),
      host_class_(host_class),
      config_(spec.config),
      registers_(spec.registers),
      plugged_(spec.plugged),
      asleep_(spec.asleep),
      counters_(spec.config.netdev.value_or(NetdevSpec{})) {}

void EmulatedDevice::Plug(const DeviceConfig& config, bool keep_registers) {
  config_ = config;
  if (!keep_registers) registers_ = RegisterMap(spec_.registers);
  counters_ = NetdevCounters(config.netdev.value_or(NetdevSpec{}));
  plugged_ = true;
  ++incarnation_;
}

void EmulatedDevice::Unplug() { plugged_ = false; }

void EmulatedDevice::FailNext(int count, FailMode mode) {
  fail_count_ = count;
  fail_mode_ = mode;
}

void EmulatedDevice::Record(const ControlSetup& setup, std::vector<uint8_t> data,
                            TransferResult result, double t, std::optional<uint32_t> address) {
  TransferRecord r;
  r.seq = next_seq_++;
  r.t = t;
  r.in = (setup.request_type & 0x80) != 0;
  r.request_type = setup.request_type;
  r.request = setup.request;
  r.address = address.value_or(static_cast<uint32_t>(setup.index) << 16 | setup.value);
  r.length = setup.length;
  r.data = std::move(data);
  r.result = result;
  transfers_.push_back(std::move(r));
}

ControlOutcome EmulatedDevice::Standard(const ControlSetup& setup) const {
  ControlOutcome out;
  const bool standard_in = (setup.request_type & 0xE0) == 0x80;
  // SET_ISOCH_DELAY (0x31; Linux sends it to every SuperSpeed device while enumerating it) and
  // SET_SEL (0x30, 6 bytes; sent before U1/U2 are enabled): USB 3.2 spec 9.4.11 and 9.4.12, a
  // USB 3 device accepts both.
  const bool superspeed_setup = setup.request_type == 0x00 && config_.SuperSpeed() &&
                                ((setup.request == 0x30 && setup.length == 6) ||
                                 (setup.request == 0x31 && setup.length == 0));
  if (superspeed_setup) return out;
  if (!standard_in) {
    out.status = -EPIPE;
    return out;
  }
  std::vector<uint8_t> data;
  switch (setup.request) {
    case 0x00:  // GET_STATUS
      data = {static_cast<uint8_t>(config_.self_powered ? 1 : 0), 0};
      break;
    case 0x06: {  // GET_DESCRIPTOR
      const uint8_t type = static_cast<uint8_t>(setup.value >> 8);
      const uint8_t index = static_cast<uint8_t>(setup.value & 0xff);
      if (type == 0x01) {
        data = DeviceDescriptor(config_);
      } else if (type == 0x02 && index == 0) {
        data = ConfigurationDescriptor(config_);
      } else if (type == 0x03) {
        data = StringDescriptor(config_, index);
      } else if (type == 0x0f && index == 0) {
        data = BosDescriptor(config_);
      }
      break;
    }
    case 0x08:  // GET_CONFIGURATION
      data = {1};
      break;
    default:
      break;
  }
  if (data.empty()) {
    out.status = -EPIPE;
    return out;
  }
  out.in_data = Truncate(std::move(data), setup.length);
  return out;
}

ControlOutcome EmulatedDevice::HandleControl(uint64_t incarnation, const ControlSetup& setup,
                                             const std::vector<uint8_t>& out_data, double t) {
  ControlOutcome out;
  const bool in = (setup.request_type & 0x80) != 0;
  const std::vector<uint8_t> written = in ? std::vector<uint8_t>{} : out_data;
  if (!plugged_ || incarnation != incarnation_) {
    out.submit_errno = ENODEV;
    Record(setup, written, TransferResult::kNoDevice, t);
    return out;
  }
  if (fail_count_ > 0) {
    --fail_count_;
    switch (fail_mode_) {
      case FailMode::kTimeout:
        out.pending = true;
        Record(setup, written, TransferResult::kTimeout, t);
        return out;
      case FailMode::kStall:
        out.status = -EPIPE;
        Record(setup, written, TransferResult::kStall, t);
        return out;
      case FailMode::kProtocolError:
        out.status = -EPROTO;
        Record(setup, written, TransferResult::kProtocolError, t);
        return out;
    }
  }
  const common::RegisterProtocol& protocol = ProtocolFor(config_);
  const bool register_request = (in ? setup.request == protocol.read_request &&
                                          setup.request_type == protocol.read_request_type
                                    : setup.request == protocol.write_request &&
                                          setup.request_type == protocol.write_request_type) &&
                                (setup.length == 1 || setup.length == 2 || setup.length == 4) &&
                                (in || out_data.size() == setup.length);
  if (register_request) {
    const uint32_t address = common::DecodeAddress(protocol.encoding, setup.value, setup.index);
    if (protocol.encoding == common::AddressEncoding::kRtw88 && setup.index != 0) {
      out.status = -EPIPE;  // RTW_USB_VENQT_CMD_IDX is always 0
      Record(setup, written, TransferResult::kStall, t, address);
      return out;
    }
    if (in) {
      if (asleep_ || spec_.read_all_ones) {
        const uint32_t pattern = asleep_ ? kAsleepReadValue : kAllOnes;
        std::vector<uint8_t> bytes;
        for (int i = 0; i < setup.length; ++i) {
          bytes.push_back(static_cast<uint8_t>(pattern >> (8 * i)));
        }
        out.in_data = bytes;
        Record(setup, bytes, asleep_ ? TransferResult::kAsleep : TransferResult::kOk, t, address);
      } else {
        out.in_data = registers_.Read(address, setup.length);
        Record(setup, out.in_data, TransferResult::kOk, t, address);
      }
    } else if (asleep_) {
      Record(setup, written, TransferResult::kAsleep, t, address);
    } else {
      registers_.Write(address, out_data);
      Record(setup, written, TransferResult::kOk, t, address);
    }
    return out;
  }
  out = Standard(setup);
  Record(setup, in ? out.in_data : written,
         out.status == 0 ? TransferResult::kOk : TransferResult::kStall, t);
  return out;
}

std::optional<uint32_t> EmulatedDevice::CurrentHoldUs() const {
  const std::optional<uint32_t> reg = RxAggRegisterFor(spec_, config_);
  if (!reg) return std::nullopt;
  return HoldFromRegister(registers_.Read32(*reg));
}

TrafficRates EmulatedDevice::CurrentRates() const {
  if (!plugged_ || asleep_ || !config_.netdev || !spec_.traffic) return {};
  return ModelRates(host_class_, config_.speed_mbps, CurrentHoldUs(), *spec_.traffic);
}

bool EmulatedDevice::ShapeNeedsApply(ShapeSpec* shape, uint64_t* rate_bps) const {
  if (!config_.netdev || !config_.netdev->shape) return false;
  const ShapeSpec& s = *config_.netdev->shape;
  const std::vector<SyntheticCurvePoint> calibrated;
  const uint64_t rate = ShapedRateBps(host_class_, config_.speed_mbps, CurrentHoldUs(), s.scale,
                                      spec_.traffic ? spec_.traffic->synthetic_curve : calibrated);
  const std::pair<std::string, std::string> target(s.netns, s.device);
  if (shaped_target_ == target && shaped_rate_bps_ == rate) return false;
  *shape = s;
  *rate_bps = rate;
  return true;
}

void EmulatedDevice::RecordShapeApplied(const ShapeSpec& shape, double t, uint64_t rate_bps) {
  shaped_target_ = std::make_pair(shape.netns, shape.device);
  shaped_rate_bps_ = rate_bps;
  shape_records_.push_back({t, CurrentHoldUs(), rate_bps});
}

void EmulatedDevice::AdvanceTraffic(double seconds) { counters_.Advance(CurrentRates(), seconds); }

void EmulatedDevice::TickDriver(double t) {
  if (!spec_.rtw88_watchdog) return;
  while (t >= next_watchdog_) {
    next_watchdog_ += kRtw88WatchdogSeconds;
    // rtw_watch_dog_work returns early unless the device runs (main.c:243-244).
    if (plugged_ && !asleep_ && config_.netdev) Rtw88Watchdog();
  }
}

// rtw_usb_dynamic_rx_agg (rtw88 usb.c:902-967): enabled when unicast traffic is >= 1 Mbit/s
// either way (main.c:288-289), disabled (size 0, timeout 1) otherwise; written every tick.
void EmulatedDevice::Rtw88Watchdog() {
  const common::ObservedChip* chip = common::LookupObservedChip(config_.vid, config_.pid);
  if (chip == nullptr) return;
  const std::string_view driver = chip->layout->driver;
  if (driver == "rtw_8723du") return;  // "Doesn't like aggregation."
  const bool v2 = driver == "rtw_8821au" || driver == "rtw_8812au";
  const bool busy =
      spec_.traffic && (spec_.traffic->offered_rx_mbps >= 1 || spec_.traffic->offered_tx_mbps >= 1);
  uint16_t word0280 = 0x0100;
  if (busy) word0280 = v2 && config_.SuperSpeed() ? 0x1A06 : 0x2005;
  // v1: set BIT_RXDMA_AGG_EN, clear bit 7 of byte 0x283, then write16 0x0280; v2: write16,
  // then set BIT_RXDMA_AGG_EN. Neither touches bit 29 (BIT_EN_PRE_CALC).
  std::vector<uint8_t> pq_map = registers_.Read(0x010C, 1);
  registers_.Write(0x010C, {static_cast<uint8_t>(pq_map[0] | 0x04)});
  if (!v2) {
    std::vector<uint8_t> top = registers_.Read(0x0283, 1);
    registers_.Write(0x0283, {static_cast<uint8_t>(top[0] & 0x7F)});
  }
  registers_.Write(0x0280, {static_cast<uint8_t>(word0280), static_cast<uint8_t>(word0280 >> 8)});
  ++driver_writes_;
}

nlohmann::json EmulatedDevice::StateJson() const {
  nlohmann::json j;
  j["name"] = spec_.name;
  j["vid"] = absl::StrFormat("%04x", config_.vid);
  j["pid"] = absl::StrFormat("%04x", config_.pid);
  j["bus"] = config_.bus;
  j["port"] = config_.port;
  j["devnum"] = config_.devnum;
  j["sysfs_name"] = config_.SysfsName();
  j["peer"] = config_.peer.empty() ? nlohmann::json(nullptr) : nlohmann::json(config_.peer);
  if (config_.speed_mbps == 1.5) {
    j["speed"] = 1.5;
  } else {
    j["speed"] = static_cast<int64_t>(config_.speed_mbps);
  }
  j["plugged"] = plugged_;
  j["asleep"] = asleep_;
  j["incarnation"] = incarnation_;
  j["driver_writes"] = driver_writes_;
  const std::optional<uint32_t> reg = RxAggRegisterFor(spec_, config_);
  j["rx_agg_register"] = reg ? nlohmann::json(absl::StrFormat("0x%x", *reg)) : nullptr;
  const std::optional<uint32_t> hold = CurrentHoldUs();
  j["hold_us"] = hold ? nlohmann::json(*hold) : nullptr;
  j["traffic_model"] =
      spec_.traffic && !spec_.traffic->synthetic_curve.empty() ? "synthetic_curve" : "calibrated";
  if (config_.netdev) {
    j["netdev"] = {
        {"name", config_.netdev->name},         {"rx_bytes", counters_.rx_bytes()},
        {"tx_bytes", counters_.tx_bytes()},     {"rx_packets", counters_.rx_packets()},
        {"tx_packets", counters_.tx_packets()}, {"rx_dropped", counters_.rx_dropped()},
    };
    if (config_.netdev->shape) {
      const ShapeSpec& shape = *config_.netdev->shape;
      nlohmann::json rates = nlohmann::json::array();
      for (const ShapeRecord& r : shape_records_) {
        rates.push_back({{"t", r.t},
                         {"hold_us", r.hold_us ? nlohmann::json(*r.hold_us) : nullptr},
                         {"rate_bps", r.rate_bps}});
      }
      j["netdev"]["shape"] = {
          {"netns", shape.netns},
          {"device", shape.device},
          {"scale", shape.scale},
          {"rate_bps", shaped_rate_bps_ ? nlohmann::json(*shaped_rate_bps_) : nullptr},
          {"rates", rates}};
    }
  } else {
    j["netdev"] = nullptr;
  }
  nlohmann::json regs = nlohmann::json::object();
  for (const auto& [address, value] : registers_.Words()) {
    regs[absl::StrFormat("0x%x", address)] = absl::StrFormat("0x%08x", value);
  }
  j["registers"] = regs;
  nlohmann::json transfers = nlohmann::json::array();
  for (const TransferRecord& r : transfers_) {
    nlohmann::json t;
    t["seq"] = r.seq;
    t["t"] = r.t;
    t["direction"] = r.in ? "in" : "out";
    t["request"] = r.request;
    t["request_type"] = absl::StrFormat("0x%02x", r.request_type);
    t["address"] = absl::StrFormat("0x%x", r.address);
    t["length"] = r.length;
    if (!r.data.empty() && r.data.size() <= 4) {
      t["value"] = HexValue(r.data);
    } else {
      t["value"] = nullptr;
      if (!r.data.empty()) t["data"] = HexBytes(r.data);
    }
    t["result"] = TransferResultName(r.result);
    transfers.push_back(std::move(t));
  }
  j["transfers"] = transfers;
  return j;
}

}  // namespace rxfleet::emulator
