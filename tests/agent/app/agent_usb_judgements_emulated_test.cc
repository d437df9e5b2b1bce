// rxfleet-agent under rxfleet-emulate (real libusb, umockdev) on the USB cases the field
// reports show: a USB 3 adapter at high-speed waiting for the driver's switch, USB 2-only
// ports, USB 2 hubs on USB 3 ports, ids the chip table does not know, read timeouts and
// re-plug loops. Each asserts the emulator's transfer log: what the agent wrote, and when.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/local_status.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::agent {
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
using ::testing::HasSubstr;
using ::testing::Not;

const nlohmann::json& Device(const nlohmann::json& state, const std::string& name) {
  for (const nlohmann::json& d : state.at("devices")) {
    if (d.at("name") == name) return d;
  }
  ADD_FAILURE() << "no device " << name << " in " << state.dump();
  static const nlohmann::json kNull;
  return kNull;
}

// Vendor register transfers (request 0x05) in one direction; standard requests (the BOS read)
// are not register accesses.
std::vector<nlohmann::json> Vendor(const nlohmann::json& device, const std::string& direction) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& t : device.at("transfers")) {
    if (t.at("direction") == direction && t.at("request") == 5) out.push_back(t);
  }
  return out;
}

nlohmann::json Adapter(const nlohmann::json& report, const std::string& id) {
  for (const nlohmann::json& a : report) {
    if (a.at("id") == id) return a;
  }
  ADD_FAILURE() << "no adapter " << id << " in " << report.dump(2);
  return nlohmann::json::object();
}

std::vector<std::string> Codes(const nlohmann::json& adapter) {
  std::vector<std::string> codes;
  for (const nlohmann::json& d : adapter.at("diagnoses")) codes.push_back(d.at("code"));
  return codes;
}

v1::GetStatusResponse QueryStatus(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::LocalStatusService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusRequest request;
  request.set_include_gone(true);
  v1::GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

class UsbJudgementsTest : public ::testing::Test {
 protected:
  std::vector<std::string> Env() const {
    std::filesystem::create_directories(dir_.path() / "tmp");
    return {"TMPDIR=" + dir_.File("tmp")};
  }

  std::string ChipsDir() const {
    std::filesystem::create_directories(dir_.path() / "chips.d");
    return dir_.File("chips.d");
  }

  std::vector<std::string> Prefix(const std::string& lab, const std::string& timeline) const {
    std::vector<std::string> argv = {EmulatorPath(), "--lab",     LabPath(lab), "--state-out",
                                     StatePath(),    "--timeout", "110"};
    if (!timeline.empty()) argv.insert(argv.end(), {"--timeline", LabPath(timeline)});
    return argv;
  }

  nlohmann::json Once(const std::string& lab, const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = Prefix(lab, "");
    argv.insert(argv.end(), {"--", BinaryPath("agent/rxfleet-agent"), "--once", "-o", "json",
                             "--chips-dir", ChipsDir()});
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = RunProcess(argv, absl::Seconds(90), Env());
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    state_ = State();
    return nlohmann::json::parse(r.stdout_text, nullptr, /*allow_exceptions=*/false);
  }

  std::unique_ptr<ChildProcess> Standalone(const std::string& lab, const std::string& timeline,
                                           const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = Prefix(lab, timeline);
    argv.insert(argv.end(), {"--", BinaryPath("agent/rxfleet-agent"), "--standalone",
                             "--reconcile-period", "200ms", "--metrics-address", "none",
                             "--status-socket", Socket(), "--chips-dir", ChipsDir()});
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::Start(argv, Env());
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? std::move(*child) : nullptr;
  }

  void Stop(ChildProcess& child) {
    EXPECT_EQ(child.Terminate(absl::Seconds(10)), 0) << child.Text(Stream::kStderr);
    state_ = State();
  }

  nlohmann::json State() const {
    auto state = ReadJsonFile(StatePath());
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *state : nlohmann::json();
  }

  std::string StatePath() const { return dir_.File("state.json"); }
  std::string Socket() const { return dir_.File("run/agent.sock"); }

  static bool AdapterLine(std::string_view line, std::string_view a, std::string_view b) {
    return line.find("adapter=port-2-2") != line.npos && line.find(a) != line.npos &&
           line.find(b) != line.npos;
  }

  TempDir dir_{"rxfleet-usb-judgements"};
  nlohmann::json state_;
};

// An RTL8922AU at high-speed (bcdUSB 0x0210, BOS with a SuperSpeed capability) on a connector
// whose USB 2 port has a USB 3 peer: the switch is pending, nothing is written; after the
// driver's switch (3.46 s later, on the peer port) it keeps its id and gets the SuperSpeed hold
// after the settle period.
TEST_F(UsbJudgementsTest, SwitchPendingThenSwitchedWritesOnlyAtSuperSpeed) {
  auto agent = Standalone("rtl8922au-usb3-switch", "timelines/rtl8922au-usb3-switch");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent
                  ->WaitForLine(
                      Stream::kStderr,
                      [](std::string_view l) {
                        return AdapterLine(l, "usb=high", "reason=Usb3SwitchPending");
                      },
                      absl::Seconds(20))
                  .ok())
      << agent->Text(Stream::kStderr);
  ASSERT_TRUE(agent
                  ->WaitForLine(
                      Stream::kStderr,
                      [](std::string_view l) {
                        return AdapterLine(l, "usb=super", "state=applied reason=Applied");
                      },
                      absl::Seconds(40))
                  .ok())
      << agent->Text(Stream::kStderr);
  const v1::GetStatusResponse status = QueryStatus(Socket());
  ASSERT_EQ(status.adapters_size(), 1) << status.DebugString();
  const v1::AdapterStatus& st = status.adapters(0).status();
  EXPECT_EQ(status.adapters(0).metadata().name(), "port-2-2");
  EXPECT_EQ(st.desired().settings().hold_us(), 32u);
  EXPECT_EQ(st.diagnoses_size(), 0) << st.DebugString();
  ASSERT_EQ(st.topology().appearances_size(), 2);
  EXPECT_EQ(st.topology().appearances(0).bus(), 3u);
  EXPECT_EQ(st.topology().appearances(0).usb_speed(), v1::USB_SPEED_HIGH);
  EXPECT_EQ(st.topology().appearances(1).bus(), 2u);
  EXPECT_TRUE(st.topology().usb3_partner());
  EXPECT_THAT(agent->Text(Stream::kStderr), Not(HasSubstr("usb3_switch_failed")));
  Stop(*agent);

  const nlohmann::json& be6500 = Device(state_, "be6500");
  const std::vector<nlohmann::json> writes = Vendor(be6500, "out");
  ASSERT_EQ(writes.size(), 1u) << be6500.dump(2);
  EXPECT_GE(writes[0].at("t").get<double>(), 3.46);  // the switch completed before the write
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
}

TEST_F(UsbJudgementsTest, HighSpeedOnceReportsSwitchPendingAndWritesNothing) {
  const nlohmann::json report = Once("rtl8922au-highspeed");
  const nlohmann::json a = Adapter(report, "port-2-2");
  EXPECT_THAT(Codes(a), ::testing::ElementsAre("usb3_switch_pending"));
  EXPECT_EQ(a.at("state"), "pending");
  EXPECT_TRUE(Vendor(Device(state_, "be6500"), "out").empty());
  EXPECT_TRUE(Vendor(Device(state_, "be6500"), "in").empty());
}

// The same adapter on a USB 2-only port (no peer): nothing to fix, the high-speed hold, no
// advice to replug.
TEST_F(UsbJudgementsTest, Usb2OnlyPortKeepsTheHighSpeedHold) {
  const nlohmann::json report = Once("rtl8922au-usb2-only");
  const nlohmann::json a = Adapter(report, "port-1-1");
  EXPECT_THAT(Codes(a), ::testing::ElementsAre("usb2_only_port"));
  EXPECT_THAT(a.at("diagnoses")[0].at("message").get<std::string>(), Not(HasSubstr("replug")));
  EXPECT_EQ(a.at("desired").at("hold_us").at("value"), 1024);
  EXPECT_EQ(a.at("state"), "applied");
  EXPECT_EQ(a.at("topology").at("usb3_partner"), false);
  EXPECT_TRUE(Vendor(Device(state_, "be6500"), "out").empty());  // 1024 µs is already there
}

TEST_F(UsbJudgementsTest, HighSpeedHubOnUsb3PortIsNamed) {
  const nlohmann::json report = Once("rtl8922au-behind-usb2-hub");
  const nlohmann::json a = Adapter(report, "port-3-1.2");
  ASSERT_THAT(Codes(a), ::testing::ElementsAre("hub_limits_speed"));
  EXPECT_THAT(a.at("diagnoses")[0].at("message").get<std::string>(),
              HasSubstr("hub 3-1, which runs at high-speed"));
  const nlohmann::json& hubs = a.at("topology").at("hubs");
  ASSERT_EQ(hubs.size(), 1u);
  EXPECT_EQ(hubs[0].at("port_path"), "3-1");
  EXPECT_EQ(hubs[0].at("usb_speed"), "high");
  EXPECT_EQ(hubs[0].at("upstream_peer"), "2-1");
  EXPECT_EQ(a.at("desired").at("hold_us").at("value"), 1024);
}

// TP-Link TBE400U 37ad:0104: not in the table; bound to rtw89_8922au it is managed as an
// RTL8922AU, unbound it is left alone with a reason.
TEST_F(UsbJudgementsTest, UnknownIdBoundToRtw89IsManagedUnboundLeftAlone) {
  const nlohmann::json report = Once("tbe400u");
  const nlohmann::json bound = Adapter(report, "port-2-2");
  EXPECT_EQ(bound.at("chip"), "rtl8922au");
  EXPECT_EQ(bound.at("chip_source"), "driver");
  EXPECT_EQ(bound.at("chip_origin"), "rtw89_8922au");
  EXPECT_THAT(Codes(bound), ::testing::ElementsAre("chip_from_driver"));
  EXPECT_EQ(bound.at("state"), "applied");
  EXPECT_EQ(Vendor(Device(state_, "bound"), "out").size(), 1u);
  EXPECT_EQ(Device(state_, "bound").at("registers").at("0x6000"), "0x80ff0114");

  const nlohmann::json unbound = Adapter(report, "port-2-3");
  EXPECT_EQ(unbound.at("state"), "ignored_other_vendor");
  EXPECT_THAT(Codes(unbound), ::testing::ElementsAre("unknown_id_unbound"));
  EXPECT_TRUE(Device(state_, "unbound").at("transfers").empty());
}

TEST_F(UsbJudgementsTest, ChipsDirExtensionManagesAnUnboundId) {
  std::ofstream(ChipsDir() + "/tplink.tsv")
      << "vid\tpid\tchip\trx_agg_layout\tsource\n37ad\t0104\trtl8922au\tv3\tmorrownr/rtw89#123\n";
  const nlohmann::json report = Once("tbe400u");
  const nlohmann::json unbound = Adapter(report, "port-2-3");
  EXPECT_EQ(unbound.at("chip_source"), "chips.d");
  EXPECT_THAT(unbound.at("chip_origin").get<std::string>(), HasSubstr("tplink.tsv:2"));
  EXPECT_EQ(unbound.at("state"), "applied");
  EXPECT_EQ(Device(state_, "unbound").at("registers").at("0x6000"), "0x80ff0114");
}

// Five reads time out (-110), then the path recovers: nothing is written before a read
// succeeds, and the burst is one event with its errno and count, not drift.
TEST_F(UsbJudgementsTest, ReadTimeoutBurstIsOneEventAndNoBlindWrite) {
  auto agent = Standalone("rtl8922au-superspeed", "timelines/read-timeouts");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent
                  ->WaitForLine(
                      Stream::kStderr,
                      [](std::string_view l) { return AdapterLine(l, "state=applied", "usb"); },
                      absl::Seconds(60))
                  .ok())
      << agent->Text(Stream::kStderr);
  const v1::GetStatusResponse status = QueryStatus(Socket());
  ASSERT_EQ(status.adapters_size(), 1);
  const v1::AdapterStatus& st = status.adapters(0).status();
  EXPECT_EQ(st.counters().io_error_bursts_total(), 1u);
  EXPECT_EQ(st.counters().drift_repairs_total(), 0u);
  EXPECT_EQ(st.last_io_burst().count(), 5u);
  EXPECT_EQ(st.last_io_burst().errno_name(), "ETIMEDOUT");
  EXPECT_EQ(st.last_io_burst().errno_value(), -110);
  Stop(*agent);

  const nlohmann::json& be6500 = Device(state_, "be6500");
  int failed_before_write = 0;
  bool ok_read_seen = false;
  for (const nlohmann::json& t : be6500.at("transfers")) {
    if (t.at("request") != 5) continue;
    if (t.at("direction") == "in") {
      if (t.at("result") == "timeout") {
        EXPECT_FALSE(ok_read_seen);
        ++failed_before_write;
      } else {
        ok_read_seen = true;
      }
    } else {
      EXPECT_TRUE(ok_read_seen) << "a write before any successful read: " << t.dump();
    }
  }
  EXPECT_EQ(failed_before_write, 5);
  EXPECT_EQ(Vendor(be6500, "out").size(), 1u);
}

// A re-plug every 2.8 s for 30 s in a USB 2 port: one quarantine, zero writes while it loops,
// released (and written) once it stays put.
TEST_F(UsbJudgementsTest, ReplugLoopIsQuarantinedUntilItStaysPut) {
  auto agent =
      Standalone("rtl8922au-replug-loop", "timelines/replug-loop",
                 {"--reenumeration-loop-count", "3", "--reenumeration-loop-window", "10s",
                  "--policy-file", SourcePath("tests/fixtures/agent/policies/hold-64us.yaml")});
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(
      agent->WaitForLineContaining(Stream::kStderr, "reenumeration_loop:", absl::Seconds(30)).ok())
      << agent->Text(Stream::kStderr);
  v1::GetStatusResponse status = QueryStatus(Socket());
  ASSERT_EQ(status.adapters_size(), 1);
  int loop_diagnoses = 0;
  for (const v1::Diagnosis& d : status.adapters(0).status().diagnoses()) {
    loop_diagnoses += d.code() == "reenumeration_loop";
  }
  EXPECT_EQ(loop_diagnoses, 1) << status.DebugString();
  EXPECT_TRUE(status.adapters(0).status().quarantined());

  ASSERT_TRUE(
      agent
          ->WaitForLineContaining(Stream::kStderr, "reenumeration_loop released", absl::Seconds(60))
          .ok())
      << agent->Text(Stream::kStderr);
  ASSERT_TRUE(agent
                  ->WaitForLine(
                      Stream::kStderr,
                      [](std::string_view l) {
                        return l.find("adapter=port-1-1") != l.npos &&
                               l.find("state=applied reason=Applied") != l.npos;
                      },
                      absl::Seconds(20))
                  .ok())
      << agent->Text(Stream::kStderr);
  status = QueryStatus(Socket());
  const v1::AdapterStatus& st = status.adapters(0).status();
  EXPECT_EQ(st.counters().reenumeration_loops_total(), 1u);
  EXPECT_FALSE(st.quarantined());
  const std::string log = agent->Text(Stream::kStderr);
  Stop(*agent);
  size_t starts = 0;
  for (size_t at = log.find("reenumeration_loop:"); at != std::string::npos;
       at = log.find("reenumeration_loop:", at + 1)) {
    ++starts;
  }
  EXPECT_EQ(starts, 1u);

  const std::vector<nlohmann::json> writes = Vendor(Device(state_, "be6500"), "out");
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_GE(writes[0].at("t").get<double>(), 28.5);  // only after the last plug
}

// Observe-only adapters at high-speed: the cause of the speed without a settle period (nothing
// is written, so nothing waits), the topology, and an id of no table identified by its bound
// mt76 driver. Zero writes to either.
TEST_F(UsbJudgementsTest, ObserveOnlyAdaptersGetTheSpeedCauseAndTheDriverIdentity) {
  const nlohmann::json report = Once("observed-usb2");
  const nlohmann::json bu = Adapter(report, "port-2-3");
  EXPECT_EQ(bu.at("family"), "rtw88");
  EXPECT_EQ(bu.at("managed"), false);
  EXPECT_EQ(bu.at("state"), "observed");
  EXPECT_EQ(bu.at("chip_source"), "table");
  EXPECT_EQ(bu.at("chip_origin"), "rtw88-usb-devices.tsv");
  EXPECT_THAT(Codes(bu), ::testing::Contains("usb3_switch_failed"));
  EXPECT_THAT(Codes(bu), Not(::testing::Contains("usb3_switch_pending")));
  EXPECT_EQ(bu.at("topology").at("usb3_partner"), true);
  EXPECT_EQ(bu.at("topology").at("peer_port_path"), "2-3");
  const nlohmann::json& bu_device = Device(state_, "rtl8822bu");
  EXPECT_FALSE(Vendor(bu_device, "in").empty()) << bu_device.dump(2);

  const nlohmann::json mt = Adapter(report, "port-1-2");
  EXPECT_EQ(mt.at("family"), "mt76");
  EXPECT_EQ(mt.at("managed"), false);
  EXPECT_EQ(mt.at("state"), "observed");
  EXPECT_EQ(mt.at("chip"), "mt7921au");
  EXPECT_EQ(mt.at("chip_source"), "driver");
  EXPECT_EQ(mt.at("chip_origin"), "mt7921u");
  EXPECT_THAT(Codes(mt), ::testing::Contains("chip_from_driver"));
  EXPECT_EQ(mt.at("desired"), nlohmann::json::object());

  for (const char* name : {"rtl8822bu", "mt7921-new-id"}) {
    for (const nlohmann::json& t : Device(state_, name).at("transfers")) {
      EXPECT_NE(t.at("direction"), "out") << name << ": " << t.dump();
    }
  }
}

}  // namespace
}  // namespace rxfleet::agent
