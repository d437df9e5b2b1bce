#pragma once

// In-memory fakes of the device layer for reconcile tests: a chip with a register file and an
// allow-listed RegisterIo over it (the same contract as LibusbRegisterIo), and a DeviceSource
// serving such chips. Real behaviour, no expectations: tests inspect the transfer log.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "agent/usb/device_source.h"
#include "agent/usb/register_io.h"

namespace rxfleet::agent::testing {

/// One control transfer as the chip saw it.
struct Transfer {
  enum Kind { kRead, kWrite } kind;
  uint32_t address;
  uint32_t value;  // value written, or value returned by a read
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

/// A register file with failure injection. Shared between the test and the RegisterIo objects
/// opened on it. The register accessors (Read, Write, reg, Set) are thread-safe so a test
/// thread may watch or rewrite registers while an agent loop talks to the chip; configure the
/// other fields before the chip is in use.
class FakeChip {
 public:
  explicit FakeChip(std::map<uint32_t, uint32_t> registers) : registers_(std::move(registers)) {}

  /// What the driver does behind the agent's back (not logged as a transfer).
  void Set(uint32_t address, uint32_t value) {
    std::lock_guard<std::mutex> lock(mu_);
    registers_[address] = value;
  }

  std::vector<Transfer> log;
  /// Errors returned by the next transfers, in order (no register access happens for them).
  std::deque<absl::Status> fail_next;
  /// While asleep, reads return 0xDEADBEEF and writes are dropped.
  bool asleep = false;
  /// Sleep after this many more writes (simulates a chip dozing off right after the write).
  int asleep_after_writes = -1;
  /// Writes are acknowledged but not stored (a register the hardware refuses to change).
  bool ignore_writes = false;
  /// Accesses refused because the address was not in the allow-list (never reach the chip).
  int refused = 0;

  uint32_t reg(uint32_t address) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = registers_.find(address);
    return it == registers_.end() ? 0 : it->second;
  }

  absl::StatusOr<uint32_t> Read(uint32_t address) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_next.empty()) {
      absl::Status s = fail_next.front();
      fail_next.pop_front();
      return s;
    }
    auto it = registers_.find(address);
    const uint32_t value = asleep ? 0xDEADBEEFu : (it == registers_.end() ? 0 : it->second);
    log.push_back({Transfer::kRead, address, value});
    return value;
  }

  absl::Status Write(uint32_t address, uint32_t value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_next.empty()) {
      absl::Status s = fail_next.front();
      fail_next.pop_front();
      return s;
    }
    log.push_back({Transfer::kWrite, address, value});
    if (!asleep && !ignore_writes) registers_[address] = value;
    if (asleep_after_writes > 0 && --asleep_after_writes == 0) asleep = true;
    return absl::OkStatus();
  }

  int Reads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(
        absl::c_count_if(log, [](const Transfer& t) { return t.kind == Transfer::kRead; }));
  }
  int Writes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(
        absl::c_count_if(log, [](const Transfer& t) { return t.kind == Transfer::kWrite; }));
  }

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, uint32_t> registers_;
};

/// RegisterIo over a FakeChip with the allow-list contract of agent/usb/register_io.h:
/// addresses outside the list are PermissionDenied and never reach the chip.
class FakeRegisterIo : public RegisterIo {
 public:
  FakeRegisterIo(std::shared_ptr<FakeChip> chip, std::vector<uint32_t> allowed)
      : chip_(std::move(chip)), allowed_(std::move(allowed)) {}

  absl::StatusOr<uint32_t> Read32(uint32_t address) override {
    if (!Allowed(address)) return Refuse(address);
    return chip_->Read(address);
  }
  absl::Status Write32(uint32_t address, uint32_t value) override {
    if (!Allowed(address)) return Refuse(address);
    return chip_->Write(address, value);
  }

 private:
  bool Allowed(uint32_t address) const { return absl::c_linear_search(allowed_, address); }
  absl::Status Refuse(uint32_t address) {
    ++chip_->refused;
    return absl::PermissionDeniedError(
        absl::StrFormat("register 0x%x is not in the allow-list", address));
  }

  std::shared_ptr<FakeChip> chip_;
  std::vector<uint32_t> allowed_;
};

/// A DeviceSource over fake devices; the test edits `devices` and `chips` between passes.
class FakeDeviceSource : public DeviceSource {
 public:
  std::vector<UsbDeviceInfo> devices;
  /// Chips by port path.
  std::map<std::string, std::shared_ptr<FakeChip>> chips;
  /// Every OpenRegisterIo call: port path and the allow-list asked for.
  std::vector<std::pair<std::string, std::vector<uint32_t>>> opens;
  /// Open errors, consumed in order.
  std::deque<absl::Status> open_failures;

  absl::StatusOr<std::vector<UsbDeviceInfo>> Enumerate() override { return devices; }

  absl::StatusOr<std::unique_ptr<RegisterIo>> OpenRegisterIo(
      const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses) override {
    opens.emplace_back(device.port_path, allowed_addresses);
    if (!open_failures.empty()) {
      absl::Status s = open_failures.front();
      open_failures.pop_front();
      return s;
    }
    const bool attached = absl::c_any_of(devices, [&](const UsbDeviceInfo& d) {
      return d.bus == device.bus && d.devnum == device.devnum && d.vid == device.vid;
    });
    auto it = chips.find(device.port_path);
    if (!attached || it == chips.end()) return absl::UnavailableError("device gone");
    return std::unique_ptr<RegisterIo>(
        std::make_unique<FakeRegisterIo>(it->second, std::move(allowed_addresses)));
  }

  bool SupportsHotplug() const override { return false; }
  absl::Status StartHotplug(std::function<void(HotplugEvent, const UsbDeviceInfo&)>) override {
    return absl::UnimplementedError("no hotplug in the fake");
  }
  void Stop() override {}
};

/// A device as the libusb source would describe it.
inline UsbDeviceInfo MakeDevice(uint16_t vid, uint16_t pid, common::UsbSpeed speed, uint8_t bus,
                                uint8_t port, uint8_t devnum) {
  UsbDeviceInfo d;
  d.bus = bus;
  d.port_numbers = {port};
  d.port_path = absl::StrFormat("%d-%d", bus, port);
  d.devnum = devnum;
  d.vid = vid;
  d.pid = pid;
  d.speed = speed;
  d.bcd_usb = common::IsUsb3(speed) ? 0x0320 : 0x0210;
  return d;
}

}  // namespace rxfleet::agent::testing
