// The real-kernel lane: rxfleet-agent inside Debian's own kernel (QEMU, TCG, qemu-xhci) against
// an RTL8922AU served by rxfleet-usbredir-device from the same lab files as rxfleet-emulate.
// Every assertion is on the device process's transfer log and the agent's own JSON output;
// the kernel's enumeration, sysfs, usbfs and hotplug are real. See docs/KERNEL-LANE.md.

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::kernel_lane {
namespace {

using ::rxfleet::testing::BinaryDir;
using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::LabPath;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WaitFor;
using ::testing::HasSubstr;

// Generous: a guest boot under TCG takes ~10 s on an idle 2-core machine and over 60 s while
// parallel builds load it.
constexpr absl::Duration kGuestDeadline = absl::Seconds(300);

// Vendor register transfers (rtw89 bRequest 0x05) in a device state, optionally only writes.
std::vector<nlohmann::json> RegisterTransfers(const nlohmann::json& device, bool writes_only) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& t : device.at("transfers")) {
    if (t.at("request") != 5) continue;
    if (writes_only && t.at("direction") != "out") continue;
    out.push_back(t);
  }
  return out;
}

class KernelLaneTest : public ::testing::Test {
 protected:
  // Starts the device process for `lab` and the guest running `guest_args`.
  void Start(const std::string& lab, const std::vector<std::string>& guest_args) {
    std::filesystem::create_directories(share());
    auto device =
        ChildProcess::Start({BinaryPath("tools/usbredir/rxfleet-usbredir-device"), "--lab", lab,
                             "--listen", dir_.File("redir.sock"), "--control", dir_.File("control"),
                             "--state-out", dir_.File("device.json")});
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    ASSERT_TRUE(
        device_->WaitForLineContaining(Stream::kStderr, "listening on", absl::Seconds(20)).ok())
        << device_->Text(Stream::kStderr);
    std::vector<std::string> argv = {SourcePath("tests/kernel/kernel-lane"),
                                     "--work",
                                     BinaryDir() + "/kernel-lane",
                                     "--share",
                                     share(),
                                     "--redir",
                                     dir_.File("redir.sock"),
                                     "--timeout",
                                     "400",
                                     "--"};
    argv.insert(argv.end(), guest_args.begin(), guest_args.end());
    auto lane = ChildProcess::Start(argv);
    ASSERT_TRUE(lane.ok()) << lane.status();
    lane_ = std::move(*lane);
  }

  // Waits for the guest to power off; returns the guest command's exit code.
  int WaitForGuest() {
    absl::StatusOr<int> code = lane_->Wait(kGuestDeadline);
    if (!code.ok()) {
      ADD_FAILURE() << code.status() << "\n" << lane_->Text(Stream::kStderr);
      return -1;
    }
    // QEMU closed the usbredir socket: the device process writes its final state and exits.
    EXPECT_EQ(device_->Wait(absl::Seconds(20)).value_or(-1), 0) << device_->Text(Stream::kStderr);
    return *code;
  }

  std::string Diagnostics() {
    return "lane stderr:\n" + lane_->Text(Stream::kStderr) + "\nguest stderr:\n" +
           ReadTextFile(share() + "/stderr").value_or("") + "\nagent log:\n" +
           ReadTextFile(share() + "/agent.log").value_or("") + "\ndevice stderr:\n" +
           device_->Text(Stream::kStderr);
  }

  // The device process's state (the emulator's state file format), device 0.
  nlohmann::json Device() {
    auto state = ReadJsonFile(dir_.File("device.json"));
    if (!state.ok()) return nlohmann::json();
    return state->at("devices").at(0);
  }

  // The adapter entries of the last status the guest published (rxfleetctl -o json).
  nlohmann::json StatusAdapters() {
    auto status = ReadJsonFile(share() + "/status.json");
    if (!status.ok() || !status->contains("adapters")) return nlohmann::json::array();
    return status->at("adapters");
  }

  // Waits until the published status has one adapter satisfying `predicate`; returns it.
  nlohmann::json WaitForAdapter(const std::function<bool(const nlohmann::json&)>& predicate) {
    nlohmann::json found;
    const bool ok = WaitFor(
        [&] {
          for (const nlohmann::json& a : StatusAdapters()) {
            if (predicate(a)) {
              found = a;
              return true;
            }
          }
          return false;
        },
        kGuestDeadline);
    EXPECT_TRUE(ok) << "last status: " << StatusAdapters().dump(2) << "\n" << Diagnostics();
    return found;
  }

  void Control(const std::string& line) {
    std::ofstream fifo(dir_.File("control"));
    fifo << line << "\n";
  }

  void StopGuest() { std::ofstream(share() + "/stop") << "stop\n"; }

  std::string share() const { return dir_.File("share"); }

  std::vector<std::string> OnceArgs() const {
    return {"sh", SourcePath("tests/kernel/guest-once"), BinaryPath("agent/rxfleet-agent")};
  }
  std::vector<std::string> AgentArgs(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"sh", SourcePath("tests/kernel/guest-agent"),
                                     BinaryPath("agent/rxfleet-agent"),
                                     BinaryPath("cli/rxfleetctl")};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  TempDir dir_{"rxfleet-kernel-lane"};
  std::unique_ptr<ChildProcess> device_;
  std::unique_ptr<ChildProcess> lane_;
};

// Fields of one adapter in `rxfleetctl --local status -o json` (protobuf JSON mapping).
std::string Id(const nlohmann::json& adapter) {
  return adapter.value("/metadata/name"_json_pointer, "");
}
std::string PortPath(const nlohmann::json& adapter) {
  return adapter.value("/status/portPath"_json_pointer, "");
}
bool HoldIs(const nlohmann::json& adapter, int hold_us) {
  return adapter.value("/status/observed/decoded/holdUs"_json_pointer, -1) == hold_us;
}
bool HasDiagnosis(const nlohmann::json& adapter, std::string_view code) {
  const nlohmann::json* list = &adapter;
  if (adapter.contains("status")) list = &adapter.at("status");
  if (!list->contains("diagnoses")) return false;
  for (const nlohmann::json& d : list->at("diagnoses")) {
    if (d.value("code", "") == code) return true;
  }
  return false;
}

TEST_F(KernelLaneTest, SuperSpeedAdapterGetsTheShortHoldWrittenAndVerified) {
  Start(LabPath("rtl8922au-superspeed"), OnceArgs());
  ASSERT_EQ(WaitForGuest(), 0) << Diagnostics();
  const nlohmann::json device = Device();
  // The real kernel read the SuperSpeed descriptors: bMaxPacketSize0 9 and bcdUSB 3.20.
  const std::string sysfs = ReadTextFile(share() + "/sysfs.txt").value_or("");
  EXPECT_THAT(sysfs, HasSubstr("2-2/speed=[5000]")) << sysfs;
  EXPECT_THAT(sysfs, HasSubstr("2-2/version=[ 3.20]")) << sysfs;
  // Read, write 32 µs (bits 15:8 = 1), verify read; 0x6004 never touched.
  const std::vector<nlohmann::json> regs = RegisterTransfers(device, false);
  ASSERT_EQ(regs.size(), 3u) << device.dump(2);
  for (const nlohmann::json& t : regs) EXPECT_EQ(t.at("address"), "0x6000");
  EXPECT_EQ(regs[0].at("direction"), "in");
  EXPECT_EQ(regs[1].at("direction"), "out");
  EXPECT_EQ(regs[1].at("value"), "0x80ff0114");
  EXPECT_EQ(regs[2].at("direction"), "in");
  EXPECT_EQ(regs[2].at("value"), "0x80ff0114");
  EXPECT_EQ(device.at("registers").at("0x6000"), "0x80ff0114");

  const nlohmann::json report =
      nlohmann::json::parse(ReadTextFile(share() + "/once.json").value_or("[]"));
  ASSERT_EQ(report.size(), 1u) << report.dump(2);
  const nlohmann::json& a = report[0];
  // qemu-xhci pairs usb1-port2 with usb2-port2: the id is the smaller path of the connector.
  EXPECT_EQ(a.at("id"), "port-1-2");
  EXPECT_EQ(a.at("port_path"), "2-2");
  EXPECT_EQ(a.at("usb_speed"), "super");
  EXPECT_EQ(a.at("chip"), "rtl8922au");
  EXPECT_EQ(a.at("state"), "applied");
  EXPECT_EQ(a.at("observed").at("hold_us"), 32);
}

TEST_F(KernelLaneTest, HighSpeedAdapterWithBosIsOnlyRead) {
  Start(LabPath("rtl8922au-highspeed"), OnceArgs());
  ASSERT_EQ(WaitForGuest(), 0) << Diagnostics();
  const nlohmann::json device = Device();
  const std::string sysfs = ReadTextFile(share() + "/sysfs.txt").value_or("");
  EXPECT_THAT(sysfs, HasSubstr("1-2/speed=[480]")) << sysfs;
  EXPECT_THAT(sysfs, HasSubstr("1-2/version=[ 2.10]")) << sysfs;
  // The kernel asked for the BOS descriptor (bcdUSB 2.10) and got the SuperSpeed capability.
  bool bos_read = false;
  for (const nlohmann::json& t : device.at("transfers")) {
    bos_read |= t.at("request") == 6 && t.at("address") == "0xf00" && t.at("result") == "ok";
  }
  EXPECT_TRUE(bos_read) << device.dump(2);
  // The switch to USB 3 is pending: the agent does not even read the registers.
  EXPECT_TRUE(RegisterTransfers(device, false).empty()) << device.dump(2);
  EXPECT_EQ(device.at("registers").at("0x6000"), "0x80ff2014");

  const nlohmann::json report =
      nlohmann::json::parse(ReadTextFile(share() + "/once.json").value_or("[]"));
  ASSERT_EQ(report.size(), 1u) << report.dump(2);
  EXPECT_EQ(report[0].at("id"), "port-1-2");
  EXPECT_EQ(report[0].at("port_path"), "1-2");
  EXPECT_EQ(report[0].at("usb_speed"), "high");
  EXPECT_EQ(report[0].at("state"), "pending");
  EXPECT_TRUE(HasDiagnosis(report[0], "usb3_switch_pending")) << report.dump(2);
  EXPECT_EQ(report[0].at("topology").at("usb3_partner"), true) << report.dump(2);
}

TEST_F(KernelLaneTest, ReplugFromHighSpeedToSuperSpeedKeepsTheIdAndGetsTheHold) {
  // A settle period long enough to see the pending switch on a slow (TCG) guest.
  Start(LabPath("rtl8922au-highspeed"), AgentArgs({"--settle", "20s"}));
  const nlohmann::json before = WaitForAdapter([](const nlohmann::json& a) {
    return PortPath(a) == "1-2" && HasDiagnosis(a, "usb3_switch_pending");
  });
  const std::string id = Id(before);
  EXPECT_EQ(id, "port-1-2");
  EXPECT_TRUE(RegisterTransfers(Device(), false).empty()) << Device().dump(2);

  // The driver's USB 2 -> 3 switch: the adapter drops off and comes back on the SuperSpeed bus.
  Control("{event: unplug, device: be6500}");
  Control("{event: plug, device: be6500, speed: 5000, bus: 2, port: \"2\"}");
  const nlohmann::json after =
      WaitForAdapter([](const nlohmann::json& a) { return PortPath(a) == "2-2" && HoldIs(a, 32); });
  EXPECT_EQ(Id(after), id);
  StopGuest();
  ASSERT_EQ(WaitForGuest(), 0) << Diagnostics();

  const nlohmann::json device = Device();
  EXPECT_EQ(device.at("incarnation"), 2);
  EXPECT_EQ(device.at("speed"), 5000);
  const std::vector<nlohmann::json> writes = RegisterTransfers(device, true);
  ASSERT_EQ(writes.size(), 1u) << device.dump(2);
  EXPECT_EQ(writes[0].at("value"), "0x80ff0114");
  EXPECT_EQ(device.at("registers").at("0x6000"), "0x80ff0114");
  // One adapter, not two: the re-enumerated device kept its id.
  EXPECT_EQ(StatusAdapters().size(), 1u) << StatusAdapters().dump(2);
  // The SuperSpeed arrival waited out the settle period before the write.
  EXPECT_THAT(ReadTextFile(share() + "/agent.log").value_or(""),
              HasSubstr("port=2-2 state=pending reason=Settling"))
      << Diagnostics();
}

TEST_F(KernelLaneTest, RunningAgentRepairsARegisterOverwrittenByTheDriver) {
  Start(LabPath("rtl8922au-superspeed"), AgentArgs());
  WaitForAdapter([](const nlohmann::json& a) { return HoldIs(a, 32); });
  ASSERT_EQ(RegisterTransfers(Device(), true).size(), 1u) << Device().dump(2);

  // The driver re-initialises the chip: the 1024 µs default is back.
  Control("{event: set_register, device: be6500, address: 0x6000, value: 0x80FF2014}");
  ASSERT_TRUE(
      WaitFor([&] { return RegisterTransfers(Device(), true).size() >= 2; }, kGuestDeadline))
      << Device().dump(2) << Diagnostics();
  WaitForAdapter([](const nlohmann::json& a) { return HoldIs(a, 32); });
  StopGuest();
  ASSERT_EQ(WaitForGuest(), 0) << Diagnostics();

  const nlohmann::json device = Device();
  const std::vector<nlohmann::json> writes = RegisterTransfers(device, true);
  ASSERT_EQ(writes.size(), 2u) << device.dump(2);
  EXPECT_EQ(writes[1].at("value"), "0x80ff0114");
  EXPECT_EQ(device.at("registers").at("0x6000"), "0x80ff0114");
  // The agent counted the overwrite as drift and its repair.
  const nlohmann::json adapters = StatusAdapters();
  ASSERT_EQ(adapters.size(), 1u) << adapters.dump(2);
  EXPECT_EQ(adapters[0].value("/status/counters/driftRepairsTotal"_json_pointer, ""), "1")
      << adapters.dump(2);
}

}  // namespace
}  // namespace rxfleet::kernel_lane
