// rxfleet-agent as a real process under rxfleet-emulate (real libusb against umockdev-emulated
// adapters): what it writes, what it leaves alone, how it reacts to timeline events, policies,
// signals, and what its local status endpoint says.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/agent_state.pb.h"
#include "rxfleet/v1/local_status.grpc.pb.h"
#include "rxfleet/version.h"
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

std::string AgentPath() { return BinaryPath("agent/rxfleet-agent"); }

std::string PolicyFixture(std::string_view name) {
  return SourcePath("tests/fixtures/agent/policies/" + std::string(name));
}

// The device called `name` in a state file.
const nlohmann::json& Device(const nlohmann::json& state, const std::string& name) {
  for (const nlohmann::json& d : state.at("devices")) {
    if (d.at("name") == name) return d;
  }
  ADD_FAILURE() << "no device " << name << " in " << state.dump();
  static const nlohmann::json kNull;
  return kNull;
}

int Count(const nlohmann::json& device, const std::string& direction) {
  int n = 0;
  for (const nlohmann::json& t : device.at("transfers")) n += t.at("direction") == direction;
  return n;
}

// The adapter with `id` in `-o json` output.
nlohmann::json Adapter(const nlohmann::json& report, const std::string& id) {
  for (const nlohmann::json& a : report) {
    if (a.at("id") == id) return a;
  }
  ADD_FAILURE() << "no adapter " << id << " in " << report.dump(2);
  return nlohmann::json::object();
}

class AgentEmulatedTest : public ::testing::Test {
 protected:
  std::vector<std::string> Env() const {
    std::filesystem::create_directories(dir_.path() / "tmp");
    return {"TMPDIR=" + dir_.File("tmp")};
  }

  // Runs `rxfleet-agent --once ARGS` under the emulator with `lab`.
  ProcessResult Once(const std::string& lab, const std::vector<std::string>& args,
                     const std::string& timeline = "") {
    std::vector<std::string> argv = {EmulatorPath(), "--lab",     lab, "--state-out",
                                     StatePath(),    "--timeout", "60"};
    if (!timeline.empty()) argv.insert(argv.end(), {"--timeline", timeline});
    argv.insert(argv.end(), {"--", AgentPath(), "--once", "--status-socket", "none",
                             "--metrics-address", "none"});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, absl::Seconds(90), Env());
  }

  // Starts `rxfleet-agent` (no mode flag: the reconcile loop; short reconcile period) under the
  // emulator. `mode` adds mode flags, e.g. the --standalone alias.
  std::unique_ptr<ChildProcess> Standalone(const std::string& lab, const std::string& timeline,
                                           const std::vector<std::string>& args,
                                           const std::vector<std::string>& mode = {}) {
    std::vector<std::string> argv = {EmulatorPath(), "--lab",     lab, "--state-out",
                                     StatePath(),    "--timeout", "60"};
    if (!timeline.empty()) argv.insert(argv.end(), {"--timeline", timeline});
    argv.insert(argv.end(), {"--", AgentPath()});
    argv.insert(argv.end(), mode.begin(), mode.end());
    argv.insert(argv.end(), {"--reconcile-period", "200ms"});
    if (std::find(args.begin(), args.end(), "--metrics-address") == args.end()) {
      argv.insert(argv.end(), {"--metrics-address", "none"});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::Start(argv, Env());
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? std::move(*child) : nullptr;
  }

  // SIGTERM (forwarded by the emulator to the agent) and the agent's exit code from the state
  // file, which the emulator writes when its child is gone.
  int StopAndReadExit(ChildProcess& child) {
    const int emulator_exit = child.Terminate(absl::Seconds(10));
    EXPECT_EQ(emulator_exit, 0) << child.Text(Stream::kStderr);
    auto state = ReadJsonFile(StatePath());
    if (!state.ok()) {
      ADD_FAILURE() << state.status();
      return -1;
    }
    state_ = *state;
    return state_.at("child").at("exit_code").get<int>();
  }

  nlohmann::json State() {
    auto state = ReadJsonFile(StatePath());
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *state : nlohmann::json();
  }

  std::string StatePath() const { return dir_.File("state.json"); }

  TempDir dir_{"rxfleet-agent-emulated"};
  nlohmann::json state_;
};

// ---- --once on each layout ----

TEST_F(AgentEmulatedTest, Rtl8922auAtSuperSpeedGetsTheShortHold) {
  const ProcessResult r = Once(LabPath("rtl8922au-superspeed"), {"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json be6500 = Device(State(), "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
  EXPECT_EQ(be6500.at("registers").at("0x6004"), "0x0000001f");
  // One read, one write, one verify read; 0x6004 never touched.
  ASSERT_EQ(be6500.at("transfers").size(), 3u) << be6500.dump(2);
  for (const nlohmann::json& t : be6500.at("transfers")) EXPECT_EQ(t.at("address"), "0x6000");
  EXPECT_EQ(be6500.at("transfers")[1].at("direction"), "out");
  EXPECT_EQ(be6500.at("transfers")[1].at("value"), "0x80ff0114");

  const nlohmann::json report = nlohmann::json::parse(r.stdout_text);
  const nlohmann::json a = Adapter(report, "port-2-2");
  EXPECT_EQ(a.at("vid"), "0bda");
  EXPECT_EQ(a.at("pid"), "8912");
  EXPECT_EQ(a.at("chip"), "rtl8922au");
  EXPECT_EQ(a.at("layout"), "v3");
  EXPECT_EQ(a.at("usb_speed"), "super");
  EXPECT_EQ(a.at("port_path"), "2-2");
  EXPECT_EQ(a.at("bus"), 2);
  EXPECT_EQ(a.at("devnum"), 10);
  EXPECT_EQ(a.at("netdev"), "wlx00e04c000001");
  EXPECT_EQ(a.at("driver"), "rtw89_8922au");
  EXPECT_EQ(a.at("state"), "applied");
  EXPECT_EQ(a.at("desired").at("hold_us").at("value"), 32);
  EXPECT_EQ(a.at("desired").at("hold_us").at("provenance"), "builtin-default");
  EXPECT_EQ(a.at("observed").at("registers").at("0x6000"), "0x80ff0114");
  EXPECT_EQ(a.at("observed").at("enable"), true);
  EXPECT_EQ(a.at("observed").at("hold_us"), 32);
  EXPECT_EQ(a.at("observed").at("count_threshold"), 255);
  EXPECT_EQ(a.at("observed").at("buffer_kib"), 20);
  EXPECT_TRUE(a.at("diagnoses").empty());
}

TEST_F(AgentEmulatedTest, Rtl8922auAtHighSpeedIsOnlyRead) {
  // Without a settle period the USB 3 switch is not waited for (usb3_switch_failed at once); the
  // hold follows the high-speed link. (The pending switch: agent_usb_judgements_emulated_test.)
  const ProcessResult r = Once(LabPath("rtl8922au-highspeed"), {"-o", "json", "--settle", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json be6500 = Device(State(), "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff2014");
  EXPECT_EQ(Count(be6500, "out"), 0) << be6500.dump(2);
  int register_reads = 0;  // the other "in" transfer is the BOS descriptor (request 6)
  for (const nlohmann::json& t : be6500.at("transfers")) {
    register_reads += t.at("direction") == "in" && t.at("request") == 5;
  }
  EXPECT_EQ(register_reads, 1);
  const nlohmann::json a = Adapter(nlohmann::json::parse(r.stdout_text), "port-2-2");
  EXPECT_EQ(a.at("state"), "applied");
  EXPECT_EQ(a.at("usb_speed"), "high");
  EXPECT_EQ(a.at("desired").at("hold_us").at("value"), 1024);
  EXPECT_EQ(a.at("observed").at("hold_us"), 1024);
  ASSERT_EQ(a.at("diagnoses").size(), 1u);
  EXPECT_EQ(a.at("diagnoses")[0].at("code"), "usb3_switch_failed");
}

TEST_F(AgentEmulatedTest, Rtl8852buLayoutV1UsesRegister8900) {
  const ProcessResult r = Once(LabPath("rtl8852bu-superspeed"), {"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json ax1800 = Device(State(), "ax1800");
  EXPECT_EQ(ax1800.at("registers").at("0x8900"), "0x80000105");
  EXPECT_EQ(Count(ax1800, "out"), 1);
  const nlohmann::json a = Adapter(nlohmann::json::parse(r.stdout_text), "port-2-1");
  EXPECT_EQ(a.at("layout"), "v1");
  EXPECT_EQ(a.at("observed").at("registers").at("0x8900"), "0x80000105");
  EXPECT_EQ(a.at("observed").at("buffer_kib"), 20);
}

TEST_F(AgentEmulatedTest, Rtl8852cuLayoutV2UsesRegister6000) {
  const ProcessResult r = Once(LabPath("rtl8852cu-superspeed"), {"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json axe3000 = Device(State(), "axe3000");
  EXPECT_EQ(axe3000.at("registers").at("0x6000"), "0x80ff0114");
  EXPECT_EQ(axe3000.at("registers").at("0x6004"), "0x0000001f");
  for (const nlohmann::json& t : axe3000.at("transfers")) EXPECT_EQ(t.at("address"), "0x6000");
  EXPECT_EQ(Adapter(nlohmann::json::parse(r.stdout_text), "port-2-3").at("layout"), "v2");
}

TEST_F(AgentEmulatedTest, DriverDisabledAggregationIsReportedAndLeftOff) {
  const ProcessResult r = Once(LabPath("driver-disabled"), {"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json be6500 = Device(State(), "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x00000000");
  EXPECT_EQ(Count(be6500, "out"), 0);
  const nlohmann::json a = Adapter(nlohmann::json::parse(r.stdout_text), "port-2-2");
  EXPECT_EQ(a.at("state"), "disabled_by_driver");
  EXPECT_THAT(a.at("message").get<std::string>(), HasSubstr("disabled by the driver"));
  EXPECT_EQ(a.at("observed").at("enable"), false);
}

TEST_F(AgentEmulatedTest, Mt76IsOnlyReadAndStorageModeIsNeverTouched) {
  const ProcessResult r = Once(LabPath("mixed-host"), {"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json state = State();
  EXPECT_EQ(Count(Device(state, "alfa-mt7921au"), "out"), 0);
  EXPECT_TRUE(Device(state, "realtek-disk").at("transfers").empty());
  // The rtw89 adapters of the same host were handled.
  EXPECT_EQ(Device(state, "be6500").at("registers").at("0x6000"), "0x80ff0114");
  EXPECT_EQ(Device(state, "dwa-x1850").at("registers").at("0x8900"), "0x80000105");
  EXPECT_EQ(Device(state, "ax1800-usb2").at("registers").at("0x8900"), "0x80002005");
  EXPECT_EQ(Count(Device(state, "ax1800-usb2"), "out"), 0);

  const nlohmann::json report = nlohmann::json::parse(r.stdout_text);
  const nlohmann::json mediatek = Adapter(report, "port-2-2");
  EXPECT_EQ(mediatek.at("state"), "observed");
  EXPECT_EQ(mediatek.at("vid"), "0e8d");
  EXPECT_EQ(mediatek.at("chip"), "mt7921au");
  EXPECT_EQ(mediatek.at("family"), "mt76");
  ASSERT_EQ(mediatek.at("diagnoses").size(), 1u);
  EXPECT_EQ(mediatek.at("diagnoses")[0].at("code"), "hold_not_controllable");
  const nlohmann::json disk = Adapter(report, "port-3-1.2");
  EXPECT_EQ(disk.at("state"), "storage_mode");
  EXPECT_EQ(disk.at("diagnoses")[0].at("code"), "storage_mode");
  EXPECT_EQ(disk.at("observed"), nullptr);
}

TEST_F(AgentEmulatedTest, TableOutputIsTheDefault) {
  const ProcessResult r = Once(LabPath("mixed-host"), {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("ADAPTER"));
  EXPECT_THAT(r.stdout_text, HasSubstr("0x6000=0x80ff0114"));
  EXPECT_THAT(r.stdout_text, HasSubstr("storage_mode"));
}

// ---- policies ----

TEST_F(AgentEmulatedTest, HostLabelPolicyOverridesTheDefaultOnlyOnThatHost) {
  const std::vector<std::string> policy = {"--policy-file", PolicyFixture("pi1-long-hold.yaml"),
                                           "-o", "json"};
  // Without the label: the built-in default.
  ProcessResult r = Once(LabPath("rtl8922au-superspeed"), policy);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(Device(State(), "be6500").at("registers").at("0x6000"), "0x80ff0114");
  nlohmann::json a = Adapter(nlohmann::json::parse(r.stdout_text), "port-2-2");
  EXPECT_EQ(a.at("desired").at("hold_us").at("provenance"), "builtin-default");

  // With --label board=pi1: the policy keeps the long hold; nothing is written.
  std::vector<std::string> labelled = policy;
  labelled.insert(labelled.end(), {"--label", "board=pi1"});
  r = Once(LabPath("rtl8922au-superspeed"), labelled);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json be6500 = Device(State(), "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff2014");
  EXPECT_EQ(Count(be6500, "out"), 0);
  a = Adapter(nlohmann::json::parse(r.stdout_text), "port-2-2");
  EXPECT_EQ(a.at("desired").at("hold_us").at("value"), 1024);
  EXPECT_EQ(a.at("desired").at("hold_us").at("provenance"), "local policy pi1-long-hold");
}

TEST_F(AgentEmulatedTest, MalformedPolicyIsAUsageErrorWithFileAndLine) {
  const ProcessResult r =
      Once(LabPath("rtl8922au-superspeed"), {"--policy-file", PolicyFixture("malformed.yaml")});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("malformed.yaml:"));
  EXPECT_THAT(r.stderr_text, ::testing::ContainsRegex("malformed\\.yaml:[0-9]+:[0-9]+"));
  EXPECT_TRUE(Device(State(), "be6500").at("transfers").empty());

  const ProcessResult invalid =
      Once(LabPath("rtl8922au-superspeed"), {"--policy-file", PolicyFixture("bad-hold.yaml")});
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_THAT(invalid.stderr_text, HasSubstr("bad-hold.yaml:"));
  EXPECT_THAT(invalid.stderr_text, HasSubstr("32"));
}

TEST_F(AgentEmulatedTest, BrokenReloadKeepsThePreviousPolicy) {
  const std::string policy = dir_.File("site.yaml");
  std::filesystem::copy_file(PolicyFixture("hold-64us.yaml"), policy);
  auto agent = Standalone(LabPath("rtl8922au-superspeed"), "",
                          {"--policy-file", policy, "--status-socket", "none"});
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(
      agent->WaitForLineContaining(Stream::kStderr, "wrote 0x80ff0214", absl::Seconds(20)).ok())
      << agent->Text(Stream::kStderr);

  std::filesystem::copy_file(PolicyFixture("malformed.yaml"), policy,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE(agent->Signal(SIGHUP));
  auto error = agent->WaitForLineContaining(Stream::kStderr, "local policies not reloaded",
                                            absl::Seconds(20));
  ASSERT_TRUE(error.ok()) << agent->Text(Stream::kStderr);
  EXPECT_THAT(*error, HasSubstr("site.yaml:11:1"));
  EXPECT_THAT(*error, HasSubstr("the previous 1 stay in force"));
  // Several reconcile periods later the register still holds the good policy's value.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json be6500 = Device(state_, "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0214");
  EXPECT_EQ(Count(be6500, "out"), 1);
  EXPECT_GE(Count(be6500, "in"), 4);
}

// ---- timelines ----

TEST_F(AgentEmulatedTest, AsleepChipIsNotWrittenUntilItWakes) {
  auto agent = Standalone(LabPath("agent/rtl8922au-asleep"), LabPath("agent/timelines/wake"),
                          {"--status-socket", "none"});
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->WaitForLineContaining(Stream::kStderr, "state=asleep", absl::Seconds(20)).ok())
      << agent->Text(Stream::kStderr);
  ASSERT_TRUE(agent
                  ->WaitForLineContaining(Stream::kStderr, "state=applied reason=Applied",
                                          absl::Seconds(20))
                  .ok())
      << agent->Text(Stream::kStderr);
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json be6500 = Device(state_, "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
  // Every transfer before the wake (1.5 s) is a read that saw the chip asleep; the one write
  // comes after it.
  int asleep_reads = 0;
  for (const nlohmann::json& t : be6500.at("transfers")) {
    if (t.at("direction") == "out") {
      EXPECT_GE(t.at("t").get<double>(), 1.5);
    } else if (t.at("result") == "asleep") {
      ++asleep_reads;
      EXPECT_LT(t.at("t").get<double>(), 1.6);
    }
  }
  EXPECT_GE(asleep_reads, 2);
  EXPECT_EQ(Count(be6500, "out"), 1);
  // Asleep is one log line, not one per retry, and never a drift.
  EXPECT_THAT(agent->Text(Stream::kStderr), Not(HasSubstr("Drift")));
  size_t asleep_lines = 0;
  for (const std::string& line : agent->Lines(Stream::kStderr)) {
    asleep_lines += line.find("state=asleep") != std::string::npos;
  }
  EXPECT_EQ(asleep_lines, 1u);
}

TEST_F(AgentEmulatedTest, DriverOverwriteIsRepairedWithinOneReconcilePeriod) {
  auto agent = Standalone(LabPath("rtl8922au-superspeed"),
                          LabPath("agent/timelines/driver-overwrite"), {"--status-socket", "none"});
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(
      agent->WaitForLineContaining(Stream::kStderr, "reason=DriftRepaired", absl::Seconds(20)).ok())
      << agent->Text(Stream::kStderr);
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json be6500 = Device(state_, "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
  std::vector<double> writes;
  for (const nlohmann::json& t : be6500.at("transfers")) {
    if (t.at("direction") == "out") writes.push_back(t.at("t").get<double>());
  }
  ASSERT_EQ(writes.size(), 2u) << be6500.dump(2);
  // The overwrite happened at 2.0 s; the repair write follows within one 200 ms period (plus
  // scheduling slack on a loaded machine).
  RecordProperty("repair_latency_ms", static_cast<int>((writes[1] - 2.0) * 1000));
  EXPECT_GT(writes[1], 2.0);
  EXPECT_LT(writes[1], 2.0 + 0.2 + 0.3) << "repair took " << writes[1] - 2.0 << " s";
}

TEST_F(AgentEmulatedTest, UnplugMidTransferIsReportedGoneWithoutCrashing) {
  auto agent =
      Standalone(LabPath("rtl8922au-superspeed"), LabPath("agent/timelines/unplug-mid-transfer"),
                 {"--status-socket", "none"});
  ASSERT_NE(agent, nullptr);
  auto gone = agent->WaitForLineContaining(Stream::kStderr, "state=gone", absl::Seconds(20));
  ASSERT_TRUE(gone.ok()) << agent->Text(Stream::kStderr);
  EXPECT_THAT(*gone, HasSubstr("adapter=port-2-2"));
  // It comes back at 3.0 s on the same port: same id, applied again.
  ASSERT_TRUE(agent
                  ->WaitForLineContaining(Stream::kStderr, "state=applied reason=Applied",
                                          absl::Seconds(20))
                  .ok())
      << agent->Text(Stream::kStderr);
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json be6500 = Device(state_, "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
  EXPECT_EQ(be6500.at("devnum"), 11);
}

TEST_F(AgentEmulatedTest, StallIsBackedOffAndRetried) {
  auto agent = Standalone(LabPath("rtl8922au-superspeed"), LabPath("agent/timelines/stall-once"),
                          {"--status-socket", "none"});
  ASSERT_NE(agent, nullptr);
  auto error = agent->WaitForLineContaining(Stream::kStderr, "state=error", absl::Seconds(20));
  ASSERT_TRUE(error.ok()) << agent->Text(Stream::kStderr);
  EXPECT_THAT(*error, HasSubstr("(stall)"));
  EXPECT_THAT(*error, HasSubstr("retry in 1s"));
  ASSERT_TRUE(agent
                  ->WaitForLineContaining(Stream::kStderr, "state=applied reason=Applied",
                                          absl::Seconds(20))
                  .ok())
      << agent->Text(Stream::kStderr);
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json be6500 = Device(state_, "be6500");
  ASSERT_GE(be6500.at("transfers").size(), 4u);
  EXPECT_EQ(be6500.at("transfers")[0].at("result"), "stall");
  // The retry waited for the backoff (1 s), not for the 200 ms reconcile period.
  EXPECT_GE(be6500.at("transfers")[1].at("t").get<double>() -
                be6500.at("transfers")[0].at("t").get<double>(),
            0.9);
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
}

// ---- re-enumeration and the local status endpoint ----

v1::GetStatusResponse QueryStatus(const std::string& socket, bool include_gone = false) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::LocalStatusService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusRequest request;
  request.set_include_gone(include_gone);
  v1::GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

TEST_F(AgentEmulatedTest, ReenumerationAtSuperSpeedKeepsTheIdAndGetsTheNewHold) {
  const std::string socket = dir_.File("run/agent.sock");
  auto agent =
      Standalone(LabPath("be6500-reenumerate"), LabPath("timelines/be6500-reenumerate"),
                 {"--status-socket", socket, "--host-id", "lab-host", "--label", "site=lab"});
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent
                  ->WaitForLine(
                      Stream::kStderr,
                      [](std::string_view line) {
                        return line.find("adapter=port-2-2") != line.npos &&
                               line.find("usb=super") != line.npos &&
                               line.find("state=applied") != line.npos;
                      },
                      absl::Seconds(20))
                  .ok())
      << agent->Text(Stream::kStderr);

  struct stat st;
  ASSERT_EQ(::stat(socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  const v1::GetStatusResponse status = QueryStatus(socket);
  EXPECT_EQ(status.host_id(), "lab-host");
  EXPECT_EQ(status.labels().at("site"), "lab");
  EXPECT_EQ(status.agent_version(), kVersion);
  EXPECT_EQ(status.server_link().state(), v1::SERVER_LINK_STATE_STANDALONE);
  ASSERT_EQ(status.adapters_size(), 1) << status.DebugString();
  const v1::Adapter& adapter = status.adapters(0);
  EXPECT_EQ(adapter.metadata().name(), "port-2-2");
  EXPECT_EQ(adapter.host_id(), "lab-host");
  EXPECT_EQ(adapter.status().state(), v1::ADAPTER_STATE_APPLIED);
  EXPECT_EQ(adapter.status().usb_speed(), v1::USB_SPEED_SUPER);
  EXPECT_EQ(adapter.status().port_path(), "2-2");
  EXPECT_EQ(adapter.status().peer_port_path(), "3-3");
  EXPECT_EQ(adapter.status().chip(), "rtl8922au");
  EXPECT_EQ(adapter.status().desired().settings().hold_us(), 32u);
  EXPECT_EQ(adapter.status().desired().provenance().at("hold_us").source(),
            v1::SETTING_SOURCE_BUILT_IN_DEFAULT);
  ASSERT_EQ(adapter.status().observed().registers_size(), 1);
  EXPECT_EQ(adapter.status().observed().registers(0).address(), 0x6000u);
  EXPECT_EQ(adapter.status().observed().registers(0).value(), 0x80FF0114u);
  EXPECT_EQ(adapter.status().observed().decoded().hold_us(), 32u);
  EXPECT_EQ(adapter.status().counters().applies_total(), 1u);

  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json be6500 = Device(state_, "be6500");
  EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
  // Storage mode (first incarnation) was never touched; at high-speed it was only read.
  for (const nlohmann::json& t : be6500.at("transfers")) {
    if (t.at("direction") == "out") {
      EXPECT_GE(t.at("t").get<double>(), 2.0);
    }
  }
  EXPECT_EQ(Count(be6500, "out"), 1);
  // Graceful exit removed the socket.
  EXPECT_FALSE(std::filesystem::exists(socket));
}

TEST_F(AgentEmulatedTest, UnusableStatusSocketDisablesOnlyThatEndpoint) {
  // The socket's parent is a regular file: the endpoint cannot start, the agent still works.
  const std::string blocker = dir_.File("not-a-dir");
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(blocker, "x").ok());
  auto agent =
      Standalone(LabPath("rtl8922au-superspeed"), "", {"--status-socket", blocker + "/agent.sock"});
  ASSERT_NE(agent, nullptr);
  auto error = agent->WaitForLineContaining(Stream::kStderr, "local status endpoint disabled",
                                            absl::Seconds(20));
  ASSERT_TRUE(error.ok()) << agent->Text(Stream::kStderr);
  EXPECT_THAT(*error, ::testing::StartsWith("error "));
  ASSERT_TRUE(
      agent->WaitForLineContaining(Stream::kStderr, "state=applied", absl::Seconds(20)).ok())
      << agent->Text(Stream::kStderr);
  EXPECT_EQ(StopAndReadExit(*agent), 0);
}

// GET `path` from 127.0.0.1:`port` (HTTP/1.0), the body or an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError("connect");
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::InternalError("write");
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return absl::InternalError("no HTTP body: " + response);
  return response.substr(body + 4);
}

TEST_F(AgentEmulatedTest, MetricsFollowTheAdapter) {
  auto agent = Standalone(LabPath("rtl8922au-superspeed"), "",
                          {"--status-socket", "none", "--metrics-address", "127.0.0.1:0"});
  ASSERT_NE(agent, nullptr);
  auto endpoint = agent->WaitForLineContaining(Stream::kStderr, "metrics endpoint on http://",
                                               absl::Seconds(20));
  ASSERT_TRUE(endpoint.ok()) << agent->Text(Stream::kStderr);
  const size_t colon = endpoint->rfind(':');
  const int port = std::stoi(endpoint->substr(colon + 1));
  ASSERT_TRUE(
      agent->WaitForLineContaining(Stream::kStderr, "state=applied", absl::Seconds(20)).ok());
  // The log line comes before the observers update the series: scrape until they show it.
  const std::string applied = R"(rxfleet_adapter_state{adapter="port-2-2",state="applied"} 1)";
  absl::StatusOr<std::string> metrics = HttpGet(port, "/metrics");
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20);
       metrics.ok() && metrics->find(applied) == std::string::npos && absl::Now() < deadline;
       metrics = HttpGet(port, "/metrics")) {
    absl::SleepFor(absl::Milliseconds(20));  // poll interval, not synchronisation
  }
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics,
              HasSubstr(R"(rxfleet_adapter_state{adapter="port-2-2",state="applied"} 1)"));
  EXPECT_THAT(*metrics, HasSubstr(R"(rxfleet_adapter_applies_total{adapter="port-2-2"} 1)"));
  EXPECT_THAT(*metrics,
              ::testing::ContainsRegex(
                  R"(rxfleet_adapter_hold_observed_seconds\{adapter="port-2-2"\} 3\.2e-0?5)"));
  EXPECT_THAT(*metrics, HasSubstr(R"(usb_speed="super")"));
  auto health = HttpGet(port, "/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, "ok\n");
  EXPECT_EQ(StopAndReadExit(*agent), 0);
}

// ---- run modes ----

// `rxfleet-agent` alone runs the loop (like node_exporter or kubelet) and `--standalone` is the
// same loop under its older name: both apply, keep running and stop on SIGTERM.
TEST_F(AgentEmulatedTest, NoModeFlagRunsTheLoopAndStandaloneIsAnAlias) {
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{}, std::vector<std::string>{"--standalone"}}) {
    SCOPED_TRACE(mode.empty() ? "no mode flag" : "--standalone");
    auto agent = Standalone(LabPath("rtl8922au-superspeed"), "", {"--status-socket", "none"}, mode);
    ASSERT_NE(agent, nullptr);
    ASSERT_TRUE(
        agent->WaitForLineContaining(Stream::kStderr, "reconcile every 200ms", absl::Seconds(20))
            .ok())
        << agent->Text(Stream::kStderr);
    ASSERT_TRUE(
        agent->WaitForLineContaining(Stream::kStderr, "state=applied", absl::Seconds(20)).ok())
        << agent->Text(Stream::kStderr);
    // A loop, not one shot: the agent does not exit on its own.
    EXPECT_TRUE(absl::IsDeadlineExceeded(agent->Wait(absl::Seconds(1)).status()))
        << agent->Text(Stream::kStderr);
    EXPECT_EQ(StopAndReadExit(*agent), 0);
    const nlohmann::json be6500 = Device(state_, "be6500");
    EXPECT_EQ(be6500.at("registers").at("0x6000"), "0x80ff0114");
    EXPECT_EQ(Count(be6500, "out"), 1);
    EXPECT_THAT(agent->Text(Stream::kStderr), HasSubstr("info stopped"));
  }
}

// ---- the persisted bundle and the host it belongs to ----

// <dir>/bundle.pb as the server link persists it: version 5, one policy holding 64 us on every
// adapter, received for `host_id`.
void WritePersistedBundle(const std::string& dir, const std::string& host_id) {
  v1::PersistedBundle persisted;
  persisted.set_host_id(host_id);
  v1::PolicyBundle* bundle = persisted.mutable_bundle();
  bundle->set_version(5);
  v1::Policy* policy = bundle->add_policies();
  policy->mutable_metadata()->set_name("hold-64us");
  policy->mutable_spec()->mutable_settings()->set_hold_us(64);
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/bundle.pb", std::ios::binary);
  ASSERT_TRUE(persisted.SerializeToOstream(&out));
}

// An agent started with another host's --state-dir (copied, or a cloned SD card) keeps the
// built-in default until the server sends this host's bundle; its own bundle is applied while
// the server is away. Nothing listens on 127.0.0.1:1: the server stays unreachable.
TEST_F(AgentEmulatedTest, PersistedBundleOfAnotherHostIsNotApplied) {
  struct Case {
    std::string recorded_host;
    std::string reg0;
    std::string log;
  };
  for (const Case& c :
       {Case{"pi-b", "0x80ff0114", "received for host pi-b, this agent is host pi-a"},
        Case{"pi-a", "0x80ff0214", "applied the persisted bundle version 5"}}) {
    SCOPED_TRACE(c.recorded_host);
    const std::string state_dir = dir_.File("state-" + c.recorded_host);
    WritePersistedBundle(state_dir, c.recorded_host);
    auto agent = Standalone(LabPath("rtl8922au-superspeed"), "",
                            {"--status-socket", "none", "--host-id", "pi-a", "--state-dir",
                             state_dir, "--server", "127.0.0.1:1", "--insecure"});
    ASSERT_NE(agent, nullptr);
    ASSERT_TRUE(agent->WaitForLineContaining(Stream::kStderr, c.log, absl::Seconds(20)).ok())
        << agent->Text(Stream::kStderr);
    ASSERT_TRUE(
        agent->WaitForLineContaining(Stream::kStderr, "state=applied", absl::Seconds(20)).ok())
        << agent->Text(Stream::kStderr);
    EXPECT_EQ(StopAndReadExit(*agent), 0);
    EXPECT_EQ(Device(state_, "be6500").at("registers").at("0x6000"), c.reg0);
  }
}

TEST_F(AgentEmulatedTest, SigtermStopsGracefully) {
  const std::string socket = dir_.File("agent.sock");
  auto agent = Standalone(LabPath("rtl8922au-superspeed"), "", {"--status-socket", socket});
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(
      agent->WaitForLineContaining(Stream::kStderr, "state=applied", absl::Seconds(20)).ok());
  ASSERT_TRUE(std::filesystem::exists(socket));
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  EXPECT_THAT(agent->Text(Stream::kStderr), HasSubstr("info stopped"));
  EXPECT_FALSE(std::filesystem::exists(socket));
}

// ---- observe-only families (rtw88, mt76): inventoried, measured, diagnosed, never written ----

// True when every transfer of `device` is an IN transfer with `request`/`request_type`, apart
// from the standard GET_DESCRIPTOR of the BOS (request 6, 0x80) read at high-speed.
void ExpectOnlyReads(const nlohmann::json& device, int request, const std::string& request_type) {
  EXPECT_EQ(Count(device, "out"), 0) << device.dump(2);
  EXPECT_GT(Count(device, "in"), 0) << device.dump(2);
  for (const nlohmann::json& t : device.at("transfers")) {
    if (t.at("request") == 6 && t.at("request_type") == "0x80") continue;
    EXPECT_EQ(t.at("request"), request) << t.dump();
    EXPECT_EQ(t.at("request_type"), request_type) << t.dump();
  }
}

bool HasDiagnosis(const nlohmann::json& adapter, const std::string& code) {
  for (const nlohmann::json& d : adapter.at("diagnoses")) {
    if (d.at("code") == code) return true;
  }
  return false;
}

TEST_F(AgentEmulatedTest, ObserveOnlyFamiliesAreReadNeverWrittenAndDiagnosed) {
  const ProcessResult r = Once(LabPath("families"), {"-o", "json", "--label", "kernel=6.6.31-v8"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json state = State();
  // Zero writes on every observe-only adapter; each read with its family's request.
  const nlohmann::json off = Device(state, "rtl8822bu-off");
  ExpectOnlyReads(off, 0x05, "0xc0");
  std::set<std::string> addresses;
  for (const nlohmann::json& t : off.at("transfers")) addresses.insert(t.at("address"));
  EXPECT_EQ(addresses, (std::set<std::string>{"0xfc", "0x10c", "0x280"}));
  EXPECT_EQ(off.at("registers").at("0x280"), "0x00000100");
  ExpectOnlyReads(Device(state, "rtl8822bu-precalc"), 0x05, "0xc0");
  const nlohmann::json mt7921 = Device(state, "mt7921au");
  ExpectOnlyReads(mt7921, 0x63, "0xdf");
  EXPECT_EQ(mt7921.at("transfers")[0].at("address"), "0x7400000c");
  ExpectOnlyReads(Device(state, "mt7612u-dead"), 0x47, "0xc0");
  // The rtw89 adapter beside them still gets its hold.
  EXPECT_EQ(Count(Device(state, "be6500"), "out"), 1);

  const nlohmann::json report = nlohmann::json::parse(r.stdout_text);
  const nlohmann::json a = Adapter(report, "port-2-2");
  EXPECT_EQ(a.at("chip"), "rtl8822bu");
  EXPECT_EQ(a.at("family"), "rtw88");
  EXPECT_EQ(a.at("managed"), false);
  EXPECT_EQ(a.at("driver"), "rtw_8822bu");
  EXPECT_EQ(a.at("netdev"), "wlx00e04c8822b0");
  EXPECT_EQ(a.at("usb_speed"), "super");
  EXPECT_EQ(a.at("state"), "observed");
  EXPECT_TRUE(a.at("desired").empty()) << a.dump(2);
  EXPECT_EQ(a.at("observed").at("registers").at("0x0280"), "0x00000100");
  EXPECT_EQ(a.at("observed").at("fields").at("rx_agg_size"), 0);
  EXPECT_EQ(a.at("observed").at("fields").at("rx_agg_timeout"), 1);
  EXPECT_EQ(a.at("observed").at("fields").at("rx_agg_en"), 1);
  ASSERT_TRUE(HasDiagnosis(a, "rx_agg_off_old_kernel")) << a.dump(2);
  EXPECT_THAT(a.at("diagnoses")[0].at("message").get<std::string>(),
              HasSubstr("kernel 6.6.31-v8 predates 6.12"));
  EXPECT_FALSE(HasDiagnosis(a, "rtw88_pre_calc_usb3"));

  const nlohmann::json precalc = Adapter(report, "port-2-3");
  EXPECT_TRUE(HasDiagnosis(precalc, "rtw88_pre_calc_usb3")) << precalc.dump(2);
  EXPECT_FALSE(HasDiagnosis(precalc, "rx_agg_off_old_kernel"));
  EXPECT_EQ(precalc.at("observed").at("fields").at("en_pre_calc"), 1);

  const nlohmann::json mt = Adapter(report, "port-2-4");
  EXPECT_EQ(mt.at("chip"), "mt7921au");
  EXPECT_EQ(mt.at("family"), "mt76");
  EXPECT_EQ(mt.at("state"), "observed");
  EXPECT_TRUE(HasDiagnosis(mt, "hold_not_controllable")) << mt.dump(2);
  EXPECT_EQ(mt.at("observed").at("fields").at("rx_agg_en"), 0);
  EXPECT_EQ(mt.at("observed").at("fields").at("rx_en"), 1);

  // 0xFFFFFFFF reads: listed, not judged, no register-based diagnosis.
  const nlohmann::json dead = Adapter(report, "port-3-1");
  EXPECT_EQ(dead.at("family"), "mt76");
  EXPECT_EQ(dead.at("reason"), "NotJudged");
  EXPECT_THAT(dead.at("message").get<std::string>(), HasSubstr("0xffffffff"));
  EXPECT_TRUE(dead.at("observed").is_null());
  ASSERT_EQ(dead.at("diagnoses").size(), 1u) << dead.dump(2);
  EXPECT_EQ(dead.at("diagnoses")[0].at("code"), "hold_not_controllable");

  EXPECT_EQ(Adapter(report, "port-2-5").at("family"), "rtw89");
  EXPECT_EQ(Adapter(report, "port-2-5").at("managed"), true);
}

// Scrapes /metrics until it contains every one of `needles` (or 20 s pass); returns the last
// body.
std::string ScrapeUntil(int port, const std::vector<std::string>& needles) {
  absl::StatusOr<std::string> metrics = HttpGet(port, "/metrics");
  auto complete = [&] {
    if (!metrics.ok()) return false;
    for (const std::string& n : needles) {
      if (metrics->find(n) == std::string::npos) return false;
    }
    return true;
  };
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20);
       !complete() && absl::Now() < deadline; metrics = HttpGet(port, "/metrics")) {
    absl::SleepFor(absl::Milliseconds(50));  // poll interval, not synchronisation
  }
  return metrics.ok() ? *metrics : std::string();
}

int MetricsPort(ChildProcess& agent) {
  auto endpoint = agent.WaitForLineContaining(Stream::kStderr, "metrics endpoint on http://",
                                              absl::Seconds(20));
  if (!endpoint.ok()) return -1;
  return std::stoi(endpoint->substr(endpoint->rfind(':') + 1));
}

TEST_F(AgentEmulatedTest, ObserveOnlyAdaptersGetTheSameSeriesAndTheirFields) {
  auto agent = Standalone(
      LabPath("families"), "",
      {"--status-socket", "none", "--metrics-address", "127.0.0.1:0", "--label", "kernel=6.6.31"});
  ASSERT_NE(agent, nullptr);
  const int port = MetricsPort(*agent);
  ASSERT_GT(port, 0) << agent->Text(Stream::kStderr);
  const std::vector<std::string> needles = {
      R"(family="rtw88")",
      R"(family="mt76")",
      R"(rxfleet_adapter_state{adapter="port-2-4",state="observed"} 1)",
      R"(rxfleet_adapter_diagnosis{adapter="port-2-4",code="hold_not_controllable"} 1)",
      R"(rxfleet_adapter_diagnosis{adapter="port-2-2",code="rx_agg_off_old_kernel"} 1)",
      R"(rxfleet_adapter_diagnosis{adapter="port-2-3",code="rtw88_pre_calc_usb3"} 1)",
      R"(rxfleet_adapter_rx_agg_field{adapter="port-2-2",field="rx_agg_timeout"} 1)",
      R"(rxfleet_adapter_rx_agg_field{adapter="port-2-4",field="rx_en"} 1)",
      R"(rxfleet_adapter_receive_bytes_total{adapter="port-2-2"})",
      R"(rxfleet_adapter_receive_bytes_total{adapter="port-2-4"})",
  };
  const std::string metrics = ScrapeUntil(port, needles);
  for (const std::string& n : needles) EXPECT_THAT(metrics, HasSubstr(n));
  EXPECT_THAT(metrics, HasSubstr(R"(managed="false")"));
  EXPECT_THAT(metrics, HasSubstr(R"(managed="true")"));
  // No desired hold and no field series for the unjudged (all-ones) adapter.
  EXPECT_THAT(metrics,
              Not(HasSubstr(R"(rxfleet_adapter_hold_desired_seconds{adapter="port-2-2"})")));
  EXPECT_THAT(metrics, Not(HasSubstr(R"(rxfleet_adapter_rx_agg_field{adapter="port-3-1")")));
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  for (const char* name : {"rtl8822bu-off", "rtl8822bu-precalc", "mt7921au", "mt7612u-dead"}) {
    EXPECT_EQ(Count(Device(state_, name), "out"), 0) << name;
  }
}

TEST_F(AgentEmulatedTest, Rtw88WatchdogRewritesAreOnlyRead) {
  auto agent = Standalone(
      LabPath("rtw88-watchdog"), "",
      {"--status-socket", "none", "--metrics-address", "127.0.0.1:0", "--label", "kernel=6.12.25"});
  ASSERT_NE(agent, nullptr);
  const int port = MetricsPort(*agent);
  ASSERT_GT(port, 0) << agent->Text(Stream::kStderr);
  // The watchdog turns aggregation on within its first 2 s tick; the agent sees it.
  const std::vector<std::string> needles = {
      R"(rxfleet_adapter_rx_agg_field{adapter="port-2-2",field="rx_agg_size"} 5)",
      R"(rxfleet_adapter_rx_agg_field{adapter="port-2-2",field="rx_agg_timeout"} 32)",
      R"(rxfleet_adapter_rx_agg_field{adapter="port-2-2",field="rx_agg_en"} 1)",
      R"(rxfleet_adapter_receive_bytes_total{adapter="port-2-2"})",
  };
  const std::string metrics = ScrapeUntil(port, needles);
  for (const std::string& n : needles) EXPECT_THAT(metrics, HasSubstr(n));
  EXPECT_THAT(metrics, Not(HasSubstr("rx_agg_off_old_kernel")));
  EXPECT_EQ(StopAndReadExit(*agent), 0);
  const nlohmann::json d = Device(state_, "rtl8822bu");
  EXPECT_GE(d.at("driver_writes").get<int>(), 1);
  EXPECT_EQ(d.at("registers").at("0x280"), "0x00002005");
  EXPECT_EQ(d.at("registers").at("0x10c"), "0x0000f5f4");
  ExpectOnlyReads(d, 0x05, "0xc0");
}

}  // namespace
}  // namespace rxfleet::agent
