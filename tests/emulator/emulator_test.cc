// End-to-end tests of rxfleet-emulate: real processes, real libusb (tests/emulator/usb_probe),
// the shipped labs. Every run gets its own TMPDIR, which must be empty afterwards (the
// emulator never leaves testbed directories behind).

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tools/emulator/lab.h"

namespace rxfleet::emulator {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::LabPath;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Outcome {
  ProcessResult result;
  nlohmann::json state;
  std::vector<std::string> lines;  // the child's stdout

  // The state of device `name` (null json if absent).
  nlohmann::json Device(const std::string& name) const {
    if (!state.contains("devices")) return nullptr;
    for (const nlohmann::json& d : state["devices"]) {
      if (d["name"] == name) return d;
    }
    return nullptr;
  }
};

std::string Probe() { return BinaryPath("tests/emulator/usb_probe"); }

class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = dir_.File("tmp");
    std::filesystem::create_directories(tmp_);
  }

  // Runs `command` under the emulator with `lab` (and `timeline`), returning its outcome.
  Outcome Emulate(const std::string& lab, const std::vector<std::string>& command,
                  const std::string& timeline = "", const std::vector<std::string>& flags = {},
                  absl::Duration timeout = absl::Seconds(60)) {
    const std::string state_path = dir_.File(absl::StrCat("state", ++runs_, ".json"));
    std::vector<std::string> argv = {EmulatorPath(), "--lab", lab, "--state-out", state_path};
    if (!timeline.empty()) argv.insert(argv.end(), {"--timeline", timeline});
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    Outcome out;
    out.result = RunProcess(argv, timeout, {"TMPDIR=" + tmp_});
    EXPECT_FALSE(out.result.timed_out) << out.result.stderr_text;
    EXPECT_TRUE(std::filesystem::is_empty(tmp_))
        << "the emulator left files in TMPDIR: "
        << std::filesystem::directory_iterator(tmp_)->path();
    auto state = ReadJsonFile(state_path);
    if (state.ok()) out.state = *state;
    for (absl::string_view line : absl::StrSplit(out.result.stdout_text, '\n')) {
      if (!line.empty()) out.lines.emplace_back(line);
    }
    return out;
  }

  Outcome EmulateProbe(const std::string& lab, const std::vector<std::string>& steps,
                       const std::string& timeline = "") {
    std::vector<std::string> command = {Probe()};
    command.insert(command.end(), steps.begin(), steps.end());
    Outcome out = Emulate(lab, command, timeline);
    EXPECT_EQ(out.result.exit_code, 0) << out.result.stderr_text << out.result.stdout_text;
    return out;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    EXPECT_TRUE(WriteTextFile(path, text).ok());
    return path;
  }

  TempDir dir_;
  std::string tmp_;
  int runs_ = 0;
};

std::string SpeedName(double mbps) {
  if (mbps >= 10000) return "super_plus";
  if (mbps >= 5000) return "super";
  if (mbps >= 480) return "high";
  if (mbps >= 12) return "full";
  return "low";
}

TEST_F(EmulatorTest, EveryShippedLabIsVisibleToLibusbWithItsSpeed) {
  int labs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("tests/labs"))) {
    if (entry.path().extension() != ".yaml") continue;
    ++labs;
    SCOPED_TRACE(entry.path().string());
    absl::StatusOr<Lab> lab = LoadLab(entry.path().string());
    ASSERT_TRUE(lab.ok()) << lab.status();
    Outcome out = EmulateProbe(entry.path().string(), {"list"});
    for (const DeviceSpec& d : lab->devices) {
      if (!d.plugged) continue;
      const DeviceConfig& c = d.config;
      EXPECT_THAT(out.lines, Contains(absl::StrFormat(
                                 "device bus=%d port=%s devnum=%d vid=%04x pid=%04x "
                                 "speed=%s",
                                 c.bus, c.port, c.devnum, c.vid, c.pid, SpeedName(c.speed_mbps))))
          << d.name;
    }
  }
  EXPECT_GE(labs, 8);
}

// A relative TMPDIR (umockdev's testbed lives there), or one with "..", once left the child
// without devices and printed only "uevent_sender_send: No such device"; the emulator makes it
// absolute and normal.
TEST_F(EmulatorTest, ARelativeTmpdirStillGivesTheChildItsDevices) {
  const std::string relative =
      std::filesystem::relative(tmp_, std::filesystem::current_path()).string();
  ASSERT_FALSE(relative.empty());
  ASSERT_NE(relative.front(), '/');
  ProcessResult r =
      RunProcess({EmulatorPath(), "--lab", LabPath("rtl8922au-superspeed"), "--", Probe(), "list"},
                 absl::Seconds(60), {"TMPDIR=" + relative});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("No such device")));
  EXPECT_THAT(r.stdout_text, HasSubstr("vid=0bda pid=8912"));
  EXPECT_TRUE(std::filesystem::is_empty(tmp_));
}

TEST_F(EmulatorTest, WithoutThePreloadLibusbSeesNoLabDevices) {
  ProcessResult r = RunProcess({Probe(), "list"}, absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("vid=0bda pid=8912")));
}

TEST_F(EmulatorTest, RegistersAreReadAndWrittenAcrossTheProcessBoundary) {
  Outcome out =
      EmulateProbe(LabPath("rtl8922au-superspeed"),
                   {"read", "2-2", "0x6000", "4", "write", "2-2", "0x6000", "4", "0x80ff0114",
                    "read", "2-2", "0x6000", "4", "read", "0bda:8912", "0x6004", "4"});
  EXPECT_THAT(out.lines,
              ::testing::ElementsAre("read 0x6000 = 0x80ff2014", "write 0x6000 ok",
                                     "read 0x6000 = 0x80ff0114", "read 0x6004 = 0x0000001f"));
  const nlohmann::json d = out.Device("be6500");
  ASSERT_FALSE(d.is_null()) << out.state.dump(2);
  EXPECT_EQ(d["registers"]["0x6000"], "0x80ff0114");
  EXPECT_EQ(d["registers"]["0x6004"], "0x0000001f");
  ASSERT_EQ(d["transfers"].size(), 4u) << d["transfers"].dump(2);
  const nlohmann::json& w = d["transfers"][1];
  EXPECT_EQ(w["direction"], "out");
  EXPECT_EQ(w["request"], 5);
  EXPECT_EQ(w["request_type"], "0x40");
  EXPECT_EQ(w["address"], "0x6000");
  EXPECT_EQ(w["length"], 4);
  EXPECT_EQ(w["value"], "0x80ff0114");
  EXPECT_EQ(w["result"], "ok");
  const nlohmann::json& r0 = d["transfers"][0];
  EXPECT_EQ(r0["direction"], "in");
  EXPECT_EQ(r0["request_type"], "0xc0");
  EXPECT_EQ(r0["value"], "0x80ff2014");
  EXPECT_EQ(r0["seq"], 1);
  EXPECT_LT(r0["t"].get<double>(), w["t"].get<double>() + 1e-9);
}

TEST_F(EmulatorTest, SubWordAccessesActOnRegisterBytes) {
  Outcome out = EmulateProbe(LabPath("rtl8922au-superspeed"),
                             {"write", "2-2", "0x6001", "1", "0x01", "read", "2-2", "0x6000", "4",
                              "read", "2-2", "0x6002", "2", "read", "2-2", "0x7000", "4"});
  EXPECT_THAT(out.lines,
              ::testing::ElementsAre("write 0x6001 ok", "read 0x6000 = 0x80ff0114",
                                     "read 0x6002 = 0x80ff", "read 0x7000 = 0x00000000"));
  EXPECT_EQ(out.Device("be6500")["transfers"][0]["value"], "0x01");
}

TEST_F(EmulatorTest, NonRtw89RequestsStallAndDescriptorsAreServed) {
  Outcome out = EmulateProbe(
      LabPath("rtl8922au-superspeed"),
      {"control", "2-2", "0x40",   "0x06", "0x6000", "0", "4",   // vendor, other bRequest
       "control", "2-2", "0xc0",   "0x05", "0x6000", "0", "3",   // rtw89 request, wLength 3
       "control", "2-2", "0x41",   "0x05", "0x6000", "0", "4",   // recipient interface
       "control", "2-2", "0x80",   "0x06", "0x0100", "0", "18",  // GET_DESCRIPTOR(device)
       "read",    "2-2", "0x6000", "4"});
  ASSERT_EQ(out.lines.size(), 5u);
  EXPECT_EQ(out.lines[0], "control error LIBUSB_ERROR_PIPE");
  EXPECT_EQ(out.lines[1], "control error LIBUSB_ERROR_PIPE");
  EXPECT_EQ(out.lines[2], "control error LIBUSB_ERROR_PIPE");
  EXPECT_THAT(out.lines[3], StartsWith("control ok 12 01 20 03 00 00 00 09 da 0b 12 89"));
  EXPECT_EQ(out.lines[4], "read 0x6000 = 0x80ff2014");  // nothing was written
  const nlohmann::json t = out.Device("be6500")["transfers"];
  EXPECT_EQ(t[0]["result"], "stall");
  EXPECT_EQ(t[0]["request"], 6);
  EXPECT_EQ(t[1]["result"], "stall");
  EXPECT_EQ(t[3]["result"], "ok");
  EXPECT_EQ(out.Device("be6500")["registers"]["0x6000"], "0x80ff2014");
}

TEST_F(EmulatorTest, UnplugIsSeenAsNoDevice) {
  const std::string timeline = WriteFile("t.yaml", "- {at: 1.5, event: unplug, device: be6500}\n");
  Outcome out = EmulateProbe(
      LabPath("rtl8922au-superspeed"),
      {"wait-gone", "2-2", "0x6000", "10", "read", "2-2", "0x6000", "4", "list"}, timeline);
  ASSERT_GE(out.lines.size(), 3u);
  EXPECT_THAT(out.lines[0], StartsWith("gone LIBUSB_ERROR_NO_DEVICE after="));
  EXPECT_NE(out.lines[0], "gone LIBUSB_ERROR_NO_DEVICE after=0");
  EXPECT_EQ(out.lines[1], "read 0x6000 error LIBUSB_ERROR_NO_DEVICE");
  EXPECT_THAT(out.lines, Not(Contains(HasSubstr("pid=8912"))));
  const nlohmann::json d = out.Device("be6500");
  EXPECT_EQ(d["plugged"], false);
  EXPECT_EQ(d["transfers"].back()["result"], "no_device");
}

TEST_F(EmulatorTest, HotplugArrivalReachesTheChild) {
  const std::string lab = WriteFile("lab.yaml", R"(
devices:
  - {name: late, vid: 0x0bda, pid: 0x8912, speed: 5000, bus: 2, port: "2", devnum: 10,
     plugged: false, registers: {0x6000: 0x80FF2014}}
)");
  const std::string timeline = WriteFile("t.yaml", "- {at: 1.5, event: plug, device: late}\n");
  Outcome out = EmulateProbe(
      lab, {"list", "hotplug", "0bda", "8912", "10", "1", "read", "0bda:8912", "0x6000", "4"},
      timeline);
  EXPECT_THAT(out.lines, Contains(HasSubstr("list count=")));
  EXPECT_THAT(out.lines, Not(Contains(HasSubstr("pid=8912 speed"))));
  EXPECT_THAT(out.lines, Contains("arrived bus=2 port=2 speed=super pid=8912"));
  EXPECT_THAT(out.lines, Contains("hotplug events=1"));
  EXPECT_THAT(out.lines, Contains("read 0x6000 = 0x80ff2014"));
}

TEST_F(EmulatorTest, ReenumerationMovesTheAdapterToSuperSpeed) {
  Outcome out = EmulateProbe(
      LabPath("be6500-reenumerate"),
      {"list", "hotplug", "0bda", "8912", "8", "3", "list", "read", "0bda:8912", "0x6000", "4"},
      LabPath("timelines/be6500-reenumerate"));
  EXPECT_THAT(out.lines, Contains("device bus=3 port=3 devnum=14 vid=0bda pid=1a2b speed=high"));
  std::vector<std::string> events;
  for (const std::string& l : out.lines) {
    if (l.rfind("arrived", 0) == 0 || l.rfind("left", 0) == 0) events.push_back(l);
  }
  EXPECT_THAT(events, ::testing::ElementsAre("arrived bus=3 port=3 speed=high pid=8912",
                                             "left bus=3 port=3 speed=high pid=8912",
                                             "arrived bus=2 port=2 speed=super pid=8912"));
  EXPECT_THAT(out.lines, Contains("device bus=2 port=2 devnum=10 vid=0bda pid=8912 speed=super"));
  EXPECT_THAT(out.lines, Contains("read 0x6000 = 0x80ff2014"));
  const nlohmann::json d = out.Device("be6500");
  EXPECT_EQ(d["bus"], 2);
  EXPECT_EQ(d["port"], "2");
  EXPECT_EQ(d["speed"], 5000);
  EXPECT_EQ(d["peer"], "3-3");
  EXPECT_EQ(d["incarnation"], 3);
}

TEST_F(EmulatorTest, RegistersResetOnReplugUnlessKept) {
  const std::string timeline = WriteFile("t.yaml", R"(
- {at: 1.5, event: unplug, device: be6500}
- {at: 1.6, event: plug, device: be6500, devnum: 11}
- {at: 3.0, event: unplug, device: be6500}
- {at: 3.1, event: plug, device: be6500, devnum: 12, keep_registers: true}
)");
  // Each `hotplug ... 2` waits for the left + arrived pair of one replug.
  Outcome out = EmulateProbe(
      LabPath("rtl8922au-superspeed"),
      {"write",      "2-2",   "0x6000", "4",       "0x80ff0114", "hotplug", "0bda",   "8912",
       "10",         "2",     "read",   "2-2",     "0x6000",     "4",       "close",  "2-2",
       "read",       "2-2",   "0x6000", "4",       "write",      "2-2",     "0x6000", "4",
       "0x80ff0114", "close", "2-2",    "hotplug", "0bda",       "8912",    "10",     "2",
       "read",       "2-2",   "0x6000", "4"},
      timeline);
  EXPECT_THAT(out.lines,
              ::testing::ElementsAre("write 0x6000 ok", "left bus=2 port=2 speed=super pid=8912",
                                     "arrived bus=2 port=2 speed=super pid=8912",
                                     "hotplug events=2", "read 0x6000 error LIBUSB_ERROR_NO_DEVICE",
                                     "closed", "read 0x6000 = 0x80ff2014", "write 0x6000 ok",
                                     "closed", "left bus=2 port=2 speed=super pid=8912",
                                     "arrived bus=2 port=2 speed=super pid=8912",
                                     "hotplug events=2", "read 0x6000 = 0x80ff0114"));
}

TEST_F(EmulatorTest, TimelineRegisterOverwriteIsVisibleToTheChild) {
  const std::string timeline =
      WriteFile("t.yaml",
                "- {at: 1.5, event: set_register, device: be6500, address: 0x6000, "
                "value: 0x80FF2014}\n");
  Outcome out = EmulateProbe(LabPath("rtl8922au-superspeed"),
                             {"write", "2-2", "0x6000", "4", "0x80ff0114", "read", "2-2", "0x6000",
                              "4", "wait-value", "2-2", "0x6000", "0x80ff2014", "10"},
                             timeline);
  EXPECT_THAT(out.lines, ::testing::ElementsAre("write 0x6000 ok", "read 0x6000 = 0x80ff0114",
                                                "wait-value ok"));
  EXPECT_EQ(out.Device("be6500")["registers"]["0x6000"], "0x80ff2014");
}

TEST_F(EmulatorTest, AsleepDeviceReadsDeadbeefAndIgnoresWrites) {
  const std::string lab = WriteFile("lab.yaml", R"(
devices:
  - {name: sleepy, vid: 0x0bda, pid: 0x8912, speed: 5000, bus: 2, port: "2", devnum: 10,
     asleep: true, registers: {0x6000: 0x80FF2014}}
)");
  const std::string timeline = WriteFile("t.yaml", "- {at: 1.5, event: wake, device: sleepy}\n");
  Outcome out = EmulateProbe(lab,
                             {"read", "2-2", "0x6000", "4", "write", "2-2", "0x6000", "4",
                              "0x80ff0114", "wait-value", "2-2", "0x6000", "0x80ff2014", "10"},
                             timeline);
  EXPECT_THAT(out.lines, ::testing::ElementsAre("read 0x6000 = 0xdeadbeef", "write 0x6000 ok",
                                                "wait-value ok"));
  const nlohmann::json t = out.Device("sleepy")["transfers"];
  EXPECT_EQ(t[0]["result"], "asleep");
  EXPECT_EQ(t[1]["result"], "asleep");
  EXPECT_EQ(t[1]["value"], "0x80ff0114");
  EXPECT_EQ(out.Device("sleepy")["registers"]["0x6000"], "0x80ff2014");
}

TEST_F(EmulatorTest, FailNextStallsThenTimesOut) {
  const std::string timeline = WriteFile("t.yaml", R"(
- {at: 0, event: fail_next, device: be6500, count: 2, mode: stall}
- {at: 1.5, event: fail_next, device: be6500, count: 1, mode: timeout}
)");
  Outcome out =
      EmulateProbe(LabPath("rtl8922au-superspeed"),
                   {"sleep", "0",      "read", "2-2",  "0x6000", "4",      "write", "2-2", "0x6000",
                    "4",     "0x1",    "read", "2-2",  "0x6000", "4",      "sleep", "2",   "read",
                    "2-2",   "0x6000", "4",    "read", "2-2",    "0x6000", "4"},
                   timeline);
  EXPECT_THAT(out.lines, ::testing::ElementsAre(
                             "read 0x6000 error LIBUSB_ERROR_PIPE",
                             "write 0x6000 error LIBUSB_ERROR_PIPE", "read 0x6000 = 0x80ff2014",
                             "read 0x6000 error LIBUSB_ERROR_TIMEOUT", "read 0x6000 = 0x80ff2014"));
  const nlohmann::json t = out.Device("be6500")["transfers"];
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0]["result"], "stall");
  EXPECT_EQ(t[1]["result"], "stall");
  EXPECT_EQ(t[1]["direction"], "out");
  EXPECT_EQ(t[3]["result"], "timeout");
  EXPECT_EQ(out.Device("be6500")["registers"]["0x6000"], "0x80ff2014");
}

TEST_F(EmulatorTest, ClaimingAnInterfaceWithABoundDriverIsBusy) {
  Outcome out =
      EmulateProbe(LabPath("rtl8922au-superspeed"), {"driver", "2-2", "0", "claim", "2-2", "0"});
  EXPECT_THAT(out.lines,
              ::testing::ElementsAre("driver 0 active=1", "claim 0 error LIBUSB_ERROR_BUSY"));
}

TEST_F(EmulatorTest, SysfsLayoutIsReadableThroughThePreload) {
  const std::string script =
      "d=/sys/bus/usb/devices; "
      "echo port=$(readlink $d/2-2/port); "
      "echo peer=$(readlink $d/2-2/port/peer); "
      "echo back=$(readlink $d/2-2/port/peer/peer); "
      "echo portdev=$(basename $(readlink $d/2-2/port/device)); "
      "echo driver=$(basename $(readlink $d/2-2:1.0/driver)); "
      "echo speed=$(cat $d/2-2/speed) busnum=$(cat $d/2-2/busnum) devnum=$(cat $d/2-2/devnum); "
      "echo version=\"$(cat $d/2-2/version)\"; "
      "echo puevent=[$(cat $d/2-2/port/uevent)] ct=$(cat $d/2-2/port/connect_type) "
      "loc=$(cat $d/2-2/port/location) removable=$(cat $d/2-2/removable); "
      "echo ids=$(cat $d/2-2/idVendor):$(cat $d/2-2/idProduct) serial=$(cat $d/2-2/serial); "
      "echo product=\"$(cat $d/2-2/product)\" manufacturer=$(cat $d/2-2/manufacturer); "
      "echo cfg=$(cat $d/2-2/bConfigurationValue) bcd=$(cat $d/2-2/bcdDevice); "
      "n=$d/2-2:1.0/net/wlx00e04c000001; "
      "echo operstate=$(cat $n/operstate) address=$(cat $n/address) ifindex=$(cat $n/ifindex); "
      "echo stats=$(cat $n/statistics/rx_dropped $n/statistics/rx_errors "
      "$n/statistics/tx_errors $n/statistics/tx_dropped); "
      "for f in rx_bytes tx_bytes rx_packets tx_packets; do test -f $n/statistics/$f && echo "
      "has=$f; done; "
      "echo class=$(cat /sys/class/net/wlx00e04c000001/operstate); "
      "echo real=$(readlink -f $d/2-2); "
      "echo env=$RXFLEET_EMULATED; "
      "ls /sys/devices/pci0000:00/0000:00:14.0/usb3/3-0:1.0/ | grep usb3-port3; "
      "echo desc=$(od -An -tx1 -N4 $d/2-2/descriptors)";
  Outcome out = Emulate(LabPath("rtl8922au-superspeed"), {"sh", "-c", script});
  ASSERT_EQ(out.result.exit_code, 0) << out.result.stderr_text;
  EXPECT_THAT(out.lines, Contains("port=../2-0:1.0/usb2-port2"));
  EXPECT_THAT(out.lines, Contains("peer=../../../usb3/3-0:1.0/usb3-port3"));
  EXPECT_THAT(out.lines, Contains("back=../../../usb2/2-0:1.0/usb2-port2"));
  EXPECT_THAT(out.lines, Contains("portdev=2-2"));
  EXPECT_THAT(out.lines, Contains("driver=rtw89_8922au"));
  EXPECT_THAT(out.lines, Contains("speed=5000 busnum=2 devnum=10"));
  EXPECT_THAT(out.lines, Contains("version= 3.20"));
  // As Linux 6.1 shows them without ACPI _PLD (docs/KERNEL-LANE.md, measured on qemu-xhci).
  EXPECT_THAT(out.lines, Contains("puevent=[] ct=unknown loc=0x00000000 removable=unknown"));
  EXPECT_THAT(out.lines, Contains("ids=0bda:8912 serial=00e04c000001"));
  EXPECT_THAT(out.lines, Contains("product=802.11be WLAN Adapter manufacturer=Realtek"));
  EXPECT_THAT(out.lines, Contains("cfg=1 bcd=0000"));
  EXPECT_THAT(out.lines, Contains("operstate=up address=00:e0:4c:00:00:01 ifindex=3"));
  EXPECT_THAT(out.lines, Contains("stats=0 0 0 0"));
  for (const char* f : {"rx_bytes", "tx_bytes", "rx_packets", "tx_packets"}) {
    EXPECT_THAT(out.lines, Contains(absl::StrCat("has=", f)));
  }
  EXPECT_THAT(out.lines, Contains("class=up"));
  EXPECT_THAT(out.lines, Contains(AllOf(StartsWith("real="),
                                        HasSubstr("/devices/pci0000:00/0000:00:14.0/usb2/2-2"))));
  EXPECT_THAT(out.lines, Contains("env=1"));
  EXPECT_THAT(out.lines, Contains("usb3-port3"));
  EXPECT_THAT(out.lines, Contains("desc= 12 01 20 03"));
}

TEST_F(EmulatorTest, DeepPortPathsGetHubsAndPortDirectories) {
  const std::string script =
      "d=/sys/bus/usb/devices; echo port=$(readlink $d/3-1.2/port); "
      "echo hub=$(cat $d/3-1/idVendor):$(cat $d/3-1/idProduct); "
      "echo mt=$(basename $(readlink $d/2-2:1.3/driver)) bt=$(basename $(readlink "
      "$d/2-2:1.0/driver)); "
      "test -e $d/3-1.2:1.0/driver || echo disk-unbound; "
      "echo mtnet=$(ls $d/2-2:1.3/net)";
  Outcome out = Emulate(LabPath("mixed-host"), {"sh", "-c", script});
  ASSERT_EQ(out.result.exit_code, 0) << out.result.stderr_text;
  EXPECT_THAT(out.lines, Contains("port=../3-1:1.0/3-1-port2"));
  EXPECT_THAT(out.lines, Contains("hub=05e3:0610"));
  EXPECT_THAT(out.lines, Contains("mt=mt7921u bt=btusb"));
  EXPECT_THAT(out.lines, Contains("disk-unbound"));
  EXPECT_THAT(out.lines, Contains("mtnet=wlx00c0cab40001"));
}

TEST_F(EmulatorTest, TrafficModelFollowsTheHoldInTheRegister) {
  // 1000 s of model time at the lab's 1024 µs hold, and again after the child set 32 µs.
  const std::string timeline = WriteFile("t.yaml", R"(
- {at: 1.5, event: advance_traffic, device: be6500, seconds: 1000}
)");
  Outcome long_hold = EmulateProbe(LabPath("rtl8922au-superspeed"), {"sleep", "2"}, timeline);
  Outcome short_hold =
      EmulateProbe(LabPath("rtl8922au-superspeed"),
                   {"write", "2-2", "0x6000", "4", "0x80ff0114", "sleep", "2"}, timeline);
  const double long_mbps =
      long_hold.Device("be6500")["netdev"]["rx_bytes"].get<double>() * 8 / 1e6 / 1000;
  const double short_mbps =
      short_hold.Device("be6500")["netdev"]["rx_bytes"].get<double>() * 8 / 1e6 / 1000;
  // Wall-clock time adds a few seconds of traffic on top of the 1000 s jump.
  EXPECT_NEAR(long_mbps, 613, 613 * 0.01);
  EXPECT_NEAR(short_mbps, 1002, 1002 * 0.01);
  const nlohmann::json n = short_hold.Device("be6500")["netdev"];
  EXPECT_EQ(n["rx_packets"].get<uint64_t>(), n["rx_bytes"].get<uint64_t>() / 1500);
  EXPECT_NEAR(n["tx_bytes"].get<double>() * 8 / 1e6 / 1000, 50, 0.5);
  EXPECT_EQ(n["rx_dropped"], 0);
  EXPECT_EQ(short_hold.Device("be6500")["hold_us"], 32);
  EXPECT_EQ(short_hold.Device("be6500")["traffic_model"], "calibrated");
}

// The tuning labs' synthetic curves (made-up figures): an optimum between 32 and 1024 µs.
TEST_F(EmulatorTest, SyntheticCurveOfTheTuningLabsFollowsTheHold) {
  auto mbps = [](const nlohmann::json& device, const char* counter) {
    return device["netdev"][counter].get<double>() * 8 / 1e6 / 1000;
  };
  const std::string x86 = WriteFile("x86.yaml", R"(
- {at: 1.5, event: advance_traffic, device: tune-x86-be6500-1, seconds: 1000}
)");
  Outcome at_1024 = EmulateProbe(LabPath("tuning-x86-usb3"), {"sleep", "2"}, x86);
  Outcome at_128 = EmulateProbe(LabPath("tuning-x86-usb3"),
                                {"write", "2-1", "0x6000", "4", "0x80ff0414", "sleep", "2"}, x86);
  const nlohmann::json peak = at_128.Device("tune-x86-be6500-1");
  EXPECT_EQ(peak["hold_us"], 128);
  EXPECT_EQ(peak["traffic_model"], "synthetic_curve");
  EXPECT_NEAR(mbps(peak, "rx_bytes"), 1000, 1000 * 0.01);
  EXPECT_NEAR(mbps(at_1024.Device("tune-x86-be6500-1"), "rx_bytes"), 600, 600 * 0.01);
  EXPECT_NEAR(mbps(peak, "tx_bytes"), 50, 0.5);
  EXPECT_EQ(peak["netdev"]["rx_dropped"], 0);

  const std::string pi1 = WriteFile("pi1.yaml", R"(
- {at: 1.5, event: advance_traffic, device: tune-pi1-be6500-1, seconds: 1000}
)");
  Outcome at_32 =
      EmulateProbe(LabPath("tuning-pi1-usb2"),
                   {"write", "1-1.2.1", "0x6000", "4", "0x80ff0114", "sleep", "2"}, pi1);
  Outcome at_512 =
      EmulateProbe(LabPath("tuning-pi1-usb2"),
                   {"write", "1-1.2.1", "0x6000", "4", "0x80ff1014", "sleep", "2"}, pi1);
  // 32 µs: min(60, 50) x (1 - 0.5) received, as much dropped; 512 µs: 48 Mbit/s, no drops.
  const nlohmann::json lossy = at_32.Device("tune-pi1-be6500-1");
  EXPECT_NEAR(mbps(lossy, "rx_bytes"), 25, 25 * 0.01);
  EXPECT_NEAR(lossy["netdev"]["rx_dropped"].get<double>() * 1500 * 8 / 1e6 / 1000, 25, 25 * 0.01);
  const nlohmann::json best = at_512.Device("tune-pi1-be6500-1");
  EXPECT_EQ(best["hold_us"], 512);
  EXPECT_NEAR(mbps(best, "rx_bytes"), 48, 48 * 0.01);
  EXPECT_EQ(best["netdev"]["rx_dropped"], 0);
}

TEST_F(EmulatorTest, NetdevCountersAdvanceInSysfsWhileTheChildRuns) {
  const std::string script =
      "f=/sys/class/net/wlx00e04c000001/statistics/rx_bytes; a=$(cat $f); sleep 0.5; "
      "b=$(cat $f); echo a=$a; echo b=$b; test $b -gt $a && echo grew";
  Outcome out = Emulate(LabPath("rtl8922au-superspeed"), {"sh", "-c", script});
  EXPECT_THAT(out.lines, Contains("grew")) << out.result.stdout_text;
}

TEST_F(EmulatorTest, ExitCodeIsTheChilds) {
  EXPECT_EQ(Emulate(LabPath("rtl8922au-superspeed"), {"sh", "-c", "exit 7"}).result.exit_code, 7);
  EXPECT_EQ(Emulate(LabPath("rtl8922au-superspeed"), {"true"}).result.exit_code, 0);
  EXPECT_EQ(
      Emulate(LabPath("rtl8922au-superspeed"), {"sh", "-c", "kill -TERM $$"}).result.exit_code,
      128 + SIGTERM);
  Outcome missing = Emulate(LabPath("rtl8922au-superspeed"), {"/nonexistent/program"});
  EXPECT_EQ(missing.result.exit_code, 127);
  EXPECT_THAT(missing.result.stderr_text, HasSubstr("cannot run /nonexistent/program"));
}

TEST_F(EmulatorTest, HangingChildIsKilledAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  Outcome out = Emulate(LabPath("rtl8922au-superspeed"), {"sleep", "60"}, "", {"--timeout", "1"});
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.result.exit_code, 124);
  EXPECT_THAT(out.result.stderr_text, HasSubstr("timeout"));
  EXPECT_LT(elapsed, 10);
  EXPECT_EQ(out.state["child"]["timed_out"], true);
  EXPECT_EQ(out.state["child"]["exit_code"], 128 + SIGTERM);
}

TEST_F(EmulatorTest, ChildIgnoringSigtermIsKilledAfterTheGrace) {
  Outcome out =
      Emulate(LabPath("rtl8922au-superspeed"),
              {"sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"}, "", {"--timeout", "0.5"});
  EXPECT_EQ(out.result.exit_code, 124);
  EXPECT_EQ(out.state["child"]["exit_code"], 128 + SIGKILL);
}

TEST_F(EmulatorTest, SigtermToTheEmulatorIsForwardedAndCleansUp) {
  auto emu = ChildProcess::Start({EmulatorPath(), "--lab", LabPath("rtl8922au-superspeed"), "--",
                                  "sh", "-c", "echo started; exec sleep 60"},
                                 {"TMPDIR=" + tmp_});
  ASSERT_TRUE(emu.ok()) << emu.status();
  ASSERT_TRUE((*emu)->WaitForLineContaining(Stream::kStdout, "started", absl::Seconds(20)).ok());
  EXPECT_FALSE(std::filesystem::is_empty(tmp_));  // the testbed exists while running
  (*emu)->Signal(SIGTERM);
  absl::StatusOr<int> code = (*emu)->Wait(absl::Seconds(15));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_TRUE(std::filesystem::is_empty(tmp_));
}

TEST_F(EmulatorTest, MalformedLabIsRejectedWithFieldAndLine) {
  const std::string lab = WriteFile("bad.yaml", R"(devices:
  - name: a
    vid: 0x0bda
    pid: 0x8912
    speed: 300
    bus: 2
    port: "2"
    devnum: 10
)");
  Outcome out = Emulate(lab, {"true"});
  EXPECT_EQ(out.result.exit_code, 2);
  EXPECT_THAT(out.result.stderr_text, HasSubstr(lab + ":5: devices[0].speed"));
  EXPECT_TRUE(out.state.is_null());

  const std::string unknown = WriteFile("unknown.yaml", R"(devices:
  - {name: a, vid: 0x0bda, pid: 0x8912, speed: 480, bus: 3, port: "2", devnum: 10,
     colour: blue}
)");
  Outcome out2 = Emulate(unknown, {"true"});
  EXPECT_EQ(out2.result.exit_code, 2);
  EXPECT_THAT(out2.result.stderr_text, HasSubstr(":3: devices[0].colour: unknown key"));

  const std::string timeline = WriteFile("t.yaml", "- {at: 0.5, event: explode, device: be6500}\n");
  Outcome out3 = Emulate(LabPath("rtl8922au-superspeed"), {"true"}, timeline);
  EXPECT_EQ(out3.result.exit_code, 2);
  EXPECT_THAT(out3.result.stderr_text, HasSubstr("t.yaml:1: [0].event: unknown event"));
}

TEST_F(EmulatorTest, BadCommandLineIsAUsageError) {
  ProcessResult r = RunProcess({EmulatorPath(), "--lab", LabPath("demo")}, absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("missing -- COMMAND"));
  r = RunProcess({EmulatorPath(), "--bogus", "--", "true"}, absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 2);
  r = RunProcess({EmulatorPath(), "--lab", LabPath("demo"), "--timeout", "x", "--", "true"},
                 absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace rxfleet::emulator
