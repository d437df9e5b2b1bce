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
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

  // Starts `rxfleet-agent --standalone` (short reconcile period) under the emulator.
  std::unique_ptr<ChildProcess> Standalone(const std::string& lab, const std::string& timeline,
                                           const std::vector<std::string>& args) {
    std::vector<std::string> argv = {EmulatorPath(), "--lab",     lab, "--state-out",
                                     StatePath(),    "--timeout", "60"};
    if (!timeline.empty()) argv.insert(argv.end(), {"--timeline", timeline});
    argv.insert(argv.end(), {"--", AgentPath(), "--standalone", "--reconcile-period", "200ms"});
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

TEST_F(AgentEmulatedTest, OtherVendorsAndStorageModeAreReportedButNeverTouched) {
  const ProcessResult r = Once(LabPath("mixed-host"), {"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json state = State();
  EXPECT_TRUE(Device(state, "alfa-mt7921au").at("transfers").empty());
  EXPECT_TRUE(Device(state, "realtek-disk").at("transfers").empty());
  // The rtw89 adapters of the same host were handled.
  EXPECT_EQ(Device(state, "be6500").at("registers").at("0x6000"), "0x80ff0114");
  EXPECT_EQ(Device(state, "dwa-x1850").at("registers").at("0x8900"), "0x80000105");
  EXPECT_EQ(Device(state, "ax1800-usb2").at("registers").at("0x8900"), "0x80002005");
  EXPECT_EQ(Count(Device(state, "ax1800-usb2"), "out"), 0);

  const nlohmann::json report = nlohmann::json::parse(r.stdout_text);
  const nlohmann::json mediatek = Adapter(report, "port-2-2");
  EXPECT_EQ(mediatek.at("state"), "ignored_other_vendor");
  EXPECT_EQ(mediatek.at("vid"), "0e8d");
  EXPECT_EQ(mediatek.at("chip"), nullptr);
  ASSERT_EQ(mediatek.at("diagnoses").size(), 1u);
  EXPECT_EQ(mediatek.at("diagnoses")[0].at("code"), "other_vendor");
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

}  // namespace
}  // namespace rxfleet::agent
