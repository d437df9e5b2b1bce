#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <thread>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/app/agent.h"
#include "agent/app/command_line.h"
#include "agent/app/host_facts.h"
#include "agent/app/local_policies.h"
#include "agent/app/report.h"
#include "agent/metrics/adapter_metrics.h"
#include "agent/reconcile/adapter_snapshot.h"
#include "agent/status/adapter_proto.h"
#include "agent/status/status_server.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rxfleet/v1/local_status.grpc.pb.h"
#include "tests/agent/reconcile/fake_device.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using testing::FakeChip;
using testing::FakeDeviceSource;
using ::testing::HasSubstr;
using testing::MakeDevice;

ServerBundle Bundle(uint64_t version, std::vector<common::Policy> policies,
                    std::vector<ExperimentAssignment> assignments) {
  ServerBundle bundle;
  bundle.version = version;
  bundle.policies = std::move(policies);
  bundle.assignments = std::move(assignments);
  return bundle;
}

// ---- host labels ----

TEST(HostFactsTest, NormalisesBoardModels) {
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi 1 Model B Plus Rev 1.2"), "pi1");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi Model B Plus Rev 1.2"), "pi1");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi 5 Model B Rev 1.0"), "pi5");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi 4 Model B Rev 1.4"), "pi4");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi 400 Rev 1.0"), "pi400");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi Zero 2 W Rev 1.0"), "pizero2");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi Zero W Rev 1.1"), "pizero");
  EXPECT_EQ(NormalizeBoardModel("Raspberry Pi Compute Module 4 Rev 1.0"), "cm4");
  EXPECT_EQ(NormalizeBoardModel(std::string("Raspberry Pi 5 Model B Rev 1.0\0", 31)), "pi5");
  EXPECT_EQ(NormalizeBoardModel("Radxa ROCK 5B"), "radxa-rock-5b");
  EXPECT_EQ(NormalizeBoardModel(""), std::nullopt);
  EXPECT_EQ(NormalizeBoardModel(std::string("\0\n", 2)), std::nullopt);
}

TEST(HostFactsTest, SanitisesLabelValues) {
  EXPECT_EQ(SanitizeLabelValue("6.12.25-v8+"), "6.12.25-v8");
  EXPECT_EQ(SanitizeLabelValue("x86_64"), "x86_64");
  EXPECT_EQ(SanitizeLabelValue("a b//c"), "a-b-c");
  EXPECT_EQ(SanitizeLabelValue("+++"), "");
  EXPECT_EQ(SanitizeLabelValue(std::string(100, 'a')).size(), 63u);
}

TEST(HostFactsTest, DetectsArchKernelAndBoard) {
  TempDir procfs;
  std::filesystem::create_directories(procfs.path() / "device-tree");
  ASSERT_TRUE(WriteTextFile(procfs.path() / "device-tree/model",
                            std::string("Raspberry Pi 1 Model B Plus Rev 1.2\0", 36))
                  .ok());
  const auto labels =
      DetectHostLabels(procfs.path().string(), UnameInfo{"pi", "6.12.25+rpt-rpi-v6", "armv6l"});
  EXPECT_EQ(labels.at("arch"), "armv6l");
  EXPECT_EQ(labels.at("kernel"), "6.12.25-rpt-rpi-v6");
  EXPECT_EQ(labels.at("board"), "pi1");

  TempDir x86;
  const auto no_board = DetectHostLabels(x86.path().string(), UnameInfo{"h", "6.1.0", "x86_64"});
  EXPECT_FALSE(no_board.contains("board"));
}

// ---- command line ----

std::variant<CommandLine, int> Parse(std::vector<std::string> args, std::string* out_text = nullptr,
                                     std::string* err_text = nullptr) {
  args.insert(args.begin(), "rxfleet-agent");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  auto parsed = ParseCommandLine(static_cast<int>(argv.size()), argv.data(), out, err);
  if (out_text) *out_text = out.str();
  if (err_text) *err_text = err.str();
  return parsed;
}

TEST(CommandLineTest, NoModeFlagRunsTheLoopAndStandaloneIsAnAlias) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, std::vector<std::string>{"--standalone"}}) {
    auto parsed = Parse(args);
    ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed)) << args.size();
    EXPECT_EQ(std::get<CommandLine>(parsed).options.mode, AgentMode::kRun);
    EXPECT_TRUE(std::get<CommandLine>(parsed).servers.empty());
  }
  // --server alone runs the loop under the server; the alias may still be combined with it.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--server", "fleet:7443", "--insecure"},
        std::vector<std::string>{"--standalone", "--server", "fleet:7443", "--insecure"}}) {
    auto parsed = Parse(args);
    ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed)) << args.size();
    EXPECT_EQ(std::get<CommandLine>(parsed).options.mode, AgentMode::kRun);
    EXPECT_EQ(std::get<CommandLine>(parsed).servers, std::vector<std::string>{"fleet:7443"});
  }
}

// --server takes replicas as a comma-separated list, validated at the boundary.
TEST(CommandLineTest, ServerTakesAListOfReplicas) {
  auto parsed = Parse({"--server", "a.example:7443, b.example:7443,[::1]:7443", "--insecure"});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  EXPECT_EQ(std::get<CommandLine>(parsed).servers,
            (std::vector<std::string>{"a.example:7443", "b.example:7443", "[::1]:7443"}));
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"", "--server: no server address"},
           {"a:1,,b:1", "--server: entry 2 is empty"},
           {"a:1,b:1,", "--server: entry 3 is empty"},
           {"a:1,A:1", "--server: entry 2: \"A:1\" is already in the list"},
           {"a:1,b:70000", "--server: entry 2: address \"b:70000\": port must be"},
           {"a:0", "--server: entry 1: address \"a:0\": port 0"}}) {
    std::string err;
    parsed = Parse({"--server", list, "--insecure"}, nullptr, &err);
    ASSERT_TRUE(std::holds_alternative<int>(parsed)) << list;
    EXPECT_EQ(std::get<int>(parsed), kExitUsage) << list;
    EXPECT_THAT(err, HasSubstr(message)) << list;
  }
  std::string list;
  for (int i = 0; i < 17; ++i) absl::StrAppend(&list, i == 0 ? "" : ",", "s", i, ":7443");
  std::string err;
  parsed = Parse({"--server", list, "--insecure"}, nullptr, &err);
  ASSERT_TRUE(std::holds_alternative<int>(parsed));
  EXPECT_THAT(err, HasSubstr("more than 16 server addresses"));
}

TEST(CommandLineTest, DefaultsOfTheLoop) {
  auto parsed = Parse({});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  const AgentOptions& o = std::get<CommandLine>(parsed).options;
  EXPECT_EQ(o.mode, AgentMode::kRun);
  EXPECT_EQ(o.policy_paths, std::vector<std::string>{"/etc/rxfleet/policies.d"});
  EXPECT_EQ(o.reconcile_period, absl::Seconds(10));
  EXPECT_EQ(o.status_socket, "/run/rxfleet/agent.sock");
  EXPECT_EQ(o.metrics_address, "127.0.0.1:9477");
  EXPECT_EQ(o.state_dir, "/var/lib/rxfleet/agent");
  EXPECT_EQ(o.sysfs_root, "/sys");
  EXPECT_EQ(o.probe_target, "gateway");
}

// Regression: only the bare "0" disabled the settle period; "0s" was refused as "must be
// greater than zero".
TEST(CommandLineTest, SettleAcceptsAnySpellingOfZero) {
  for (const std::string zero : {"0", "0s", "0ms"}) {
    auto parsed = Parse({"--settle", zero});
    ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed)) << zero;
    EXPECT_EQ(std::get<CommandLine>(parsed).options.settle, absl::ZeroDuration()) << zero;
  }
  auto parsed = Parse({"--settle", "2s"});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  EXPECT_EQ(std::get<CommandLine>(parsed).options.settle, absl::Seconds(2));
  std::string err;
  parsed = Parse({"--settle", "-1s"}, nullptr, &err);
  ASSERT_TRUE(std::holds_alternative<int>(parsed));
  EXPECT_THAT(err, HasSubstr("--settle"));
}

TEST(CommandLineTest, OnceWithEverything) {
  auto parsed = Parse({"--once",    "-o",
                       "json",      "--status-socket",
                       "none",      "--metrics-address",
                       "none",      "--policy-file",
                       "a.yaml",    "--policy-file",
                       "dir",       "--label",
                       "board=pi1", "--label",
                       "site=lab",  "--host-id",
                       "h-1",       "--reconcile-period",
                       "200ms",     "--rescan-period",
                       "5",         "--sysfs-root",
                       "/tmp/sys"});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  const CommandLine& c = std::get<CommandLine>(parsed);
  EXPECT_EQ(c.output, OutputFormat::kJson);
  EXPECT_EQ(c.options.mode, AgentMode::kOnce);
  EXPECT_EQ(c.options.status_socket, "");
  EXPECT_EQ(c.options.metrics_address, "");
  EXPECT_EQ(c.options.policy_paths, (std::vector<std::string>{"a.yaml", "dir"}));
  EXPECT_EQ(c.options.labels.at("board"), "pi1");
  EXPECT_EQ(c.options.labels.at("site"), "lab");
  EXPECT_EQ(c.options.host_id, "h-1");
  EXPECT_EQ(c.options.reconcile_period, absl::Milliseconds(200));
  EXPECT_EQ(c.options.rescan_period, absl::Seconds(5));
  EXPECT_EQ(c.options.sysfs_root, "/tmp/sys");
}

TEST(CommandLineTest, HelpAndVersionExitZero) {
  std::string out;
  auto help = Parse({"--help"}, &out);
  ASSERT_TRUE(std::holds_alternative<int>(help));
  EXPECT_EQ(std::get<int>(help), 0);
  EXPECT_THAT(out, HasSubstr("--reconcile-period"));
  EXPECT_THAT(out, HasSubstr("Exit codes: 0 ok"));
  auto version = Parse({"--version"}, &out);
  EXPECT_EQ(std::get<int>(version), 0);
  EXPECT_FALSE(out.empty());
}

TEST(CommandLineTest, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--once", "--standalone"},
      {"--once", "--server", "fleet:7443", "--insecure"},
      {"--standalone", "-o", "json"},
      {"-o", "json"},
      {"--once", "-o", "yaml"},
      {"--once", "--label", "board"},
      {"--once", "--label", "Bad Key=x"},
      {"--once", "--reconcile-period", "0s"},
      {"--once", "--reconcile-period", "soon"},
      {"--once", "--metrics-address", "localhost"},
      {"--once", "--host-id", "Not_Valid"},
      {"--once", "--probe-target", "example.org"},
      {"--once", "--no-such-flag"},
  };
  for (const auto& args : bad) {
    std::string err;
    auto parsed = Parse(args, nullptr, &err);
    ASSERT_TRUE(std::holds_alternative<int>(parsed)) << ::testing::PrintToString(args);
    EXPECT_EQ(std::get<int>(parsed), 2) << ::testing::PrintToString(args);
    EXPECT_THAT(err, HasSubstr("rxfleet-agent: ")) << ::testing::PrintToString(args);
  }
}

TEST(CommandLineTest, ConfigFileIsAppliedAndFlagsWin) {
  TempDir dir;
  const std::string config = dir.File("agent.yaml");
  ASSERT_TRUE(WriteTextFile(config, R"(hostId: from-config
labels: {board: pi5, site: a}
policyFiles: [/etc/a.yaml]
reconcilePeriod: 5s
statusSocket: none
)")
                  .ok());
  auto parsed = Parse({"--standalone", "--config", config, "--label", "site=b"});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  const AgentOptions& o = std::get<CommandLine>(parsed).options;
  EXPECT_EQ(o.host_id, "from-config");
  EXPECT_EQ(o.labels.at("board"), "pi5");
  EXPECT_EQ(o.labels.at("site"), "b");
  EXPECT_EQ(o.policy_paths, std::vector<std::string>{"/etc/a.yaml"});
  EXPECT_EQ(o.reconcile_period, absl::Seconds(5));
  EXPECT_EQ(o.status_socket, "");
}

TEST(CommandLineTest, ConfigErrorsNameFileAndLine) {
  TempDir dir;
  const std::string config = dir.File("agent.yaml");
  ASSERT_TRUE(WriteTextFile(config, "hostId: h\nlabels: {board: pi5}\nnoSuchKey: 1\n").ok());
  std::string err;
  auto parsed = Parse({"--standalone", "--config", config}, nullptr, &err);
  EXPECT_EQ(std::get<int>(parsed), 2);
  EXPECT_THAT(err, HasSubstr(config + ":3: noSuchKey: unknown key"));

  ASSERT_TRUE(WriteTextFile(config, "reconcilePeriod: [1\n").ok());
  parsed = Parse({"--standalone", "--config", config}, nullptr, &err);
  EXPECT_EQ(std::get<int>(parsed), 2);
  EXPECT_THAT(err, HasSubstr(config + ":"));
  EXPECT_THAT(err, HasSubstr("malformed YAML"));

  ASSERT_TRUE(WriteTextFile(config, "hostId: ok\nreconcilePeriod: -1s\n").ok());
  parsed = Parse({"--standalone", "--config", config}, nullptr, &err);
  EXPECT_THAT(err, HasSubstr(config + ":2: reconcilePeriod"));
}

TEST(CommandLineTest, ParsesPeriods) {
  EXPECT_EQ(*ParsePeriod("200ms"), absl::Milliseconds(200));
  EXPECT_EQ(*ParsePeriod("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParsePeriod("2.5"), absl::Milliseconds(2500));
  EXPECT_FALSE(ParsePeriod("0").ok());
  EXPECT_FALSE(ParsePeriod("inf").ok());
  EXPECT_FALSE(ParsePeriod("").ok());
}

// ---- local policy files ----

TEST(LocalPolicyFilesTest, FingerprintFollowsEdits) {
  TempDir dir;
  const std::string policies = dir.File("policies.d");
  LocalPolicyFiles files({policies});
  const std::string missing = files.Fingerprint();
  ASSERT_TRUE(files.Load().ok());  // a missing directory is no policies, not an error
  EXPECT_TRUE(files.Load()->empty());

  std::filesystem::create_directories(policies);
  std::filesystem::copy_file(SourcePath("tests/fixtures/agent/policies/hold-64us.yaml"),
                             policies + "/site.yaml");
  const std::string one = files.Fingerprint();
  EXPECT_NE(one, missing);
  ASSERT_EQ(files.Load()->size(), 1u);
  ASSERT_TRUE(WriteTextFile(policies + "/notes.txt", "not a policy").ok());
  EXPECT_EQ(files.Fingerprint(), one);

  std::filesystem::copy_file(SourcePath("tests/fixtures/agent/policies/malformed.yaml"),
                             policies + "/site.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(files.Fingerprint(), one);
  const auto broken = files.Load();
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("site.yaml:11:1"));
}

// ---- report ----

AdapterSnapshot SampleSnapshot() {
  AdapterSnapshot s;
  s.id = "port-2-2";
  s.device = MakeDevice(0x0bda, 0x8912, common::UsbSpeed::kSuper, 2, 2, 10);
  s.device_class = DeviceClass::kSupported;
  s.chip = "rtl8922au";
  s.layout = common::RxAggLayout::kV3;
  s.netdev = "wlan1";
  s.driver = "rtw89_8922au";
  s.phase = AdapterPhase::kApplied;
  s.reason = "Applied";
  DesiredSettings desired;
  desired.resolved.hold_us = common::Resolved<uint32_t>{
      32, common::Provenance{common::PolicySource::kBuiltinDefault, "builtin-default"}};
  desired.origins["hold_us"].provenance = desired.resolved.hold_us->provenance;
  s.desired = desired;
  s.observed_reg0 = 0x80FF0114;
  s.counters.applies = 1;
  s.counters.verifies = 1;
  return s;
}

// Users see an adapter's state in the agent's report and logs, the metrics' state label, the
// API and rxfleetctl: every one spells it as the API enum does, lower case without the
// ADAPTER_STATE_ prefix ("ignored_other_vendor", not "other_vendor").
TEST(StateNamesTest, AgentSpellsStatesAsTheApiEnum) {
  const AdapterPhase phases[] = {
      AdapterPhase::kPending,     AdapterPhase::kApplied,          AdapterPhase::kDrifted,
      AdapterPhase::kAsleep,      AdapterPhase::kDisabledByDriver, AdapterPhase::kUnsupported,
      AdapterPhase::kStorageMode, AdapterPhase::kOtherVendor,      AdapterPhase::kGone,
      AdapterPhase::kError,       AdapterPhase::kInvalidSettings};
  for (AdapterPhase phase : phases) {
    const std::string api = v1::AdapterState_Name(AdapterPhaseToProto(phase));
    ASSERT_EQ(api.rfind("ADAPTER_STATE_", 0), 0u) << api;
    EXPECT_EQ(AdapterPhaseName(phase), absl::AsciiStrToLower(api.substr(14)));
  }
  for (AdapterState state : kAllAdapterStates) {
    v1::AdapterState parsed;
    EXPECT_TRUE(v1::AdapterState_Parse(
        absl::StrCat("ADAPTER_STATE_", absl::AsciiStrToUpper(std::string(AdapterStateName(state)))),
        &parsed))
        << AdapterStateName(state);
  }
  EXPECT_EQ(AdapterPhaseName(AdapterPhase::kOtherVendor), "ignored_other_vendor");
  EXPECT_EQ(AdapterStateName(AdapterState::kOtherVendor), "ignored_other_vendor");
}

TEST(ReportTest, JsonHasTheDocumentedShape) {
  const nlohmann::json j = AdapterToJson(SampleSnapshot());
  EXPECT_EQ(j.at("id"), "port-2-2");
  EXPECT_EQ(j.at("vid"), "0bda");
  EXPECT_EQ(j.at("pid"), "8912");
  EXPECT_EQ(j.at("chip"), "rtl8922au");
  EXPECT_EQ(j.at("layout"), "v3");
  EXPECT_EQ(j.at("usb_speed"), "super");
  EXPECT_EQ(j.at("port_path"), "2-2");
  EXPECT_EQ(j.at("bus"), 2);
  EXPECT_EQ(j.at("devnum"), 10);
  EXPECT_EQ(j.at("netdev"), "wlan1");
  EXPECT_EQ(j.at("driver"), "rtw89_8922au");
  EXPECT_EQ(j.at("state"), "applied");
  EXPECT_EQ(j.at("desired"), nlohmann::json::parse(
                                 R"({"hold_us": {"value": 32, "provenance": "builtin-default"}})"));
  EXPECT_EQ(j.at("observed"), nlohmann::json::parse(R"({"registers": {"0x6000": "0x80ff0114"},
      "enable": true, "hold_us": 32, "count_threshold": 255, "buffer_kib": 20})"));
  EXPECT_EQ(j.at("diagnoses"), nlohmann::json::array());

  AdapterSnapshot other;
  other.id = "port-2-4";
  other.device = MakeDevice(0x0e8d, 0x7961, common::UsbSpeed::kSuper, 2, 4, 5);
  other.phase = AdapterPhase::kOtherVendor;
  other.diagnoses = {{"other_vendor", "left alone"}};
  const nlohmann::json o = AdapterToJson(other);
  EXPECT_EQ(o.at("chip"), nullptr);
  EXPECT_EQ(o.at("netdev"), nullptr);
  EXPECT_EQ(o.at("observed"), nullptr);
  EXPECT_EQ(o.at("desired"), nlohmann::json::object());
  EXPECT_EQ(o.at("diagnoses")[0].at("code"), "other_vendor");
}

TEST(ReportTest, TableIsAligned) {
  AdapterSnapshot a = SampleSnapshot();
  AdapterSnapshot b = SampleSnapshot();
  b.id = "port-10-1.2";
  b.phase = AdapterPhase::kDisabledByDriver;
  b.message = "left disabled";
  const std::string table = RenderAdaptersTable({a, b});
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << table;
  EXPECT_EQ(lines[0].find("CHIP"), lines[1].find("rtl8922au"));
  EXPECT_EQ(lines[1].find("rtl8922au"), lines[2].find("rtl8922au"));
  EXPECT_THAT(lines[3], HasSubstr("! left disabled"));
  EXPECT_EQ(RenderAdaptersTable({}), "No USB Wi-Fi adapters found.\n");
}

// ---- status endpoint ----

absl::StatusOr<v1::GetStatusResponse> Query(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::LocalStatusService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, v1::GetStatusRequest(), &response);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return response;
}

TEST(StatusServerTest, ServesOnAUnixSocketAndCleansUp) {
  TempDir dir;
  const std::string socket = dir.File("run/rxfleet/agent.sock");
  auto server = StatusServer::Start(socket, [](const v1::GetStatusRequest&) {
    v1::GetStatusResponse r;
    r.set_host_id("h1");
    return r;
  });
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st;
  ASSERT_EQ(::stat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  auto response = Query(socket);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->host_id(), "h1");

  // A second server on a live socket is refused.
  auto second = StatusServer::Start(
      socket, [](const v1::GetStatusRequest&) { return v1::GetStatusResponse(); });
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();

  server->reset();
  EXPECT_FALSE(std::filesystem::exists(socket));
}

TEST(StatusServerTest, ReplacesAStaleSocketButNotOtherFiles) {
  TempDir dir;
  const std::string socket = dir.File("agent.sock");
  {
    auto server = StatusServer::Start(
        socket, [](const v1::GetStatusRequest&) { return v1::GetStatusResponse(); });
    ASSERT_TRUE(server.ok());
    // Simulate a crash: keep the socket file by hard-linking it away and back.
    std::filesystem::create_hard_link(socket, dir.File("kept.sock"));
  }
  std::filesystem::rename(dir.File("kept.sock"), socket);
  auto again = StatusServer::Start(
      socket, [](const v1::GetStatusRequest&) { return v1::GetStatusResponse(); });
  EXPECT_TRUE(again.ok()) << again.status();
  again->reset();

  const std::string file = dir.File("plain");
  ASSERT_TRUE(WriteTextFile(file, "data").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(StatusServer::Start(file, [](const v1::GetStatusRequest&) {
                                           return v1::GetStatusResponse();
                                         }).status()));
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_TRUE(absl::IsInvalidArgument(
      StatusServer::Start(dir.File(std::string(120, 'x')), [](const v1::GetStatusRequest&) {
        return v1::GetStatusResponse();
      }).status()));
}

// ---- Agent over a fake device source ----

class Changes : public AdapterObserver {
 public:
  void OnAdapterChanged(const AdapterSnapshot& s, const AdapterEvents&, bool changed) override {
    if (changed) ids.push_back(s.id + ":" + std::string(AdapterPhaseName(s.phase)));
  }
  void OnAdapterRemoved(const std::string&) override {}
  std::vector<std::string> ids;
};

class AgentTest : public ::testing::Test {
 protected:
  std::unique_ptr<Agent> MakeAgent(AgentMode mode, std::vector<std::string> policy_paths = {}) {
    auto source = std::make_unique<FakeDeviceSource>();
    source_ = source.get();
    source_->devices.push_back(MakeDevice(0x0bda, 0x8912, common::UsbSpeed::kSuper, 2, 2, 10));
    chip_ = std::make_shared<FakeChip>(
        std::map<uint32_t, uint32_t>{{0x6000, 0x80FF2014}, {0x6004, 0x1F}});
    source_->chips["2-2"] = chip_;
    AgentOptions options;
    options.mode = mode;
    options.host_id = "test-host";
    options.labels = {{"site", "lab"}};
    options.policy_paths = std::move(policy_paths);
    options.sysfs_root = dir_.File("sys");
    options.procfs_root = dir_.File("proc");
    options.reconcile_period = absl::Milliseconds(50);
    auto agent = Agent::Create(options, std::move(source), [this](LogLevel, std::string_view line) {
      absl::MutexLock lock(&log_mu_);
      log_.emplace_back(line);
    });
    EXPECT_TRUE(agent.ok()) << agent.status();
    return agent.ok() ? std::move(*agent) : nullptr;
  }

  TempDir dir_;
  FakeDeviceSource* source_ = nullptr;
  std::shared_ptr<FakeChip> chip_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(AgentTest, RunOnceAppliesAndReportsStatus) {
  auto agent = MakeAgent(AgentMode::kOnce);
  ASSERT_NE(agent, nullptr);
  Changes changes;
  agent->AddObserver(&changes);
  auto snapshots = agent->RunOnce();
  ASSERT_TRUE(snapshots.ok());
  ASSERT_EQ(snapshots->size(), 1u);
  EXPECT_EQ((*snapshots)[0].phase, AdapterPhase::kApplied);
  EXPECT_EQ(chip_->reg(0x6000), 0x80FF0114u);
  EXPECT_EQ(changes.ids, (std::vector<std::string>{"port-2-2:pending", "port-2-2:applied"}));
  EXPECT_EQ(agent->labels().at("site"), "lab");

  const v1::GetStatusResponse status = agent->Status(false);
  EXPECT_EQ(status.host_id(), "test-host");
  EXPECT_EQ(status.labels().at("site"), "lab");
  EXPECT_TRUE(status.local_policy_file().loaded());
  ASSERT_EQ(status.adapters_size(), 1);
  EXPECT_EQ(status.adapters(0).status().state(), v1::ADAPTER_STATE_APPLIED);
  EXPECT_EQ(status.adapters(0).status().vid(), 0x0bdau);
  // Run() belongs to agents not created in once mode.
  EXPECT_TRUE(absl::IsFailedPrecondition(agent->Run()));
}

TEST_F(AgentTest, ServerBundleIsValidatedAsAWholeAndKeepsTheLastGoodOne) {
  auto agent = MakeAgent(AgentMode::kOnce);
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->RunOnce().ok());

  common::Policy hold;
  hold.name = "fleet-hold-64";
  hold.settings.hold_us = 64;
  ASSERT_TRUE(agent->SetServerBundle(Bundle(5, {hold}, {})).ok());
  EXPECT_EQ(agent->active_bundle_version(), 5u);
  ASSERT_TRUE(agent->RunOnce().ok());
  auto s = agent->Snapshot("port-2-2");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(chip_->reg(0x6000), 0x80FF0214u);
  EXPECT_EQ(s->desired->resolved.hold_us->provenance.ToString(), "server policy fleet-hold-64");
  EXPECT_EQ(s->applied_bundle_version, 5u);

  // One bad assignment rejects the whole bundle: version 5 stays in force.
  common::Policy other = hold;
  other.name = "fleet-hold-96";
  other.settings.hold_us = 96;
  ExperimentAssignment bad;
  bad.adapter_id = "port-2-2";
  bad.experiment = "hold-ab";
  bad.arm = "odd";
  bad.settings.hold_us = 33;
  const absl::Status rejected = agent->SetServerBundle(Bundle(6, {other}, {bad}));
  EXPECT_TRUE(absl::IsInvalidArgument(rejected));
  EXPECT_THAT(rejected.message(), HasSubstr("experiment hold-ab"));
  EXPECT_EQ(agent->active_bundle_version(), 5u);
  ASSERT_TRUE(agent->RunOnce().ok());
  EXPECT_EQ(chip_->reg(0x6000), 0x80FF0214u);

  // A good experiment assignment wins over the server policy.
  ExperimentAssignment arm = bad;
  arm.arm = "short";
  arm.settings.hold_us = 32;
  ASSERT_TRUE(agent->SetServerBundle(Bundle(7, {hold}, {arm})).ok());
  ASSERT_TRUE(agent->RunOnce().ok());
  EXPECT_EQ(chip_->reg(0x6000), 0x80FF0114u);
  s = agent->Snapshot("port-2-2");
  EXPECT_EQ(s->desired->resolved.hold_us->provenance.ToString(), "experiment hold-ab arm short");
  EXPECT_EQ(s->desired->experiments.at("hold-ab"), "short");
  const v1::GetStatusResponse status = agent->Status(false);
  EXPECT_EQ(status.server_link().active_bundle_version(), 7u);
  const v1::Provenance& p = status.adapters(0).status().desired().provenance().at("hold_us");
  EXPECT_EQ(p.source(), v1::SETTING_SOURCE_EXPERIMENT);
  EXPECT_EQ(p.name(), "hold-ab");
  EXPECT_EQ(p.arm(), "short");
  EXPECT_EQ(p.bundle_version(), 7u);
}

TEST_F(AgentTest, BadLocalPolicyFailsCreation) {
  AgentOptions options;
  options.mode = AgentMode::kOnce;
  options.host_id = "h";
  options.policy_paths = {SourcePath("tests/fixtures/agent/policies/malformed.yaml")};
  auto agent = Agent::Create(options, std::make_unique<FakeDeviceSource>(), nullptr);
  ASSERT_FALSE(agent.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(agent.status()));
  EXPECT_THAT(agent.status().message(), HasSubstr("malformed.yaml:11:1"));
}

TEST_F(AgentTest, StandaloneLoopReconcilesServesStatusAndStops) {
  const std::string policies = dir_.File("policies.d");
  auto agent = MakeAgent(AgentMode::kRun, {policies});
  ASSERT_NE(agent, nullptr);
  std::thread loop([&] { EXPECT_TRUE(agent->Run().ok()); });
  auto wait_for = [&](uint32_t word) {
    for (int i = 0; i < 400 && chip_->reg(0x6000) != word; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return chip_->reg(0x6000) == word;
  };
  EXPECT_TRUE(wait_for(0x80FF0114));
  // A policy file appearing later is picked up by the poll... and by SIGHUP's reload.
  std::filesystem::create_directories(policies);
  std::filesystem::copy_file(SourcePath("tests/fixtures/agent/policies/hold-64us.yaml"),
                             policies + "/site.yaml");
  agent->ReloadLocalPolicies();
  EXPECT_TRUE(wait_for(0x80FF0214));
  // The driver overwrites the register: repaired.
  chip_->Set(0x6000, 0x80FF2014);
  EXPECT_TRUE(wait_for(0x80FF0214));
  agent->Stop();
  loop.join();
  auto s = agent->Snapshot("port-2-2");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->counters.drift_repairs, 1u);
  absl::MutexLock lock(&log_mu_);
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("local policies reloaded: 1 (site-hold-64)")));
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("reason=DriftRepaired")));
}

TEST_F(AgentTest, ExperimentAssignmentStopsApplyingAtItsPeriodEnd) {
  auto agent = MakeAgent(AgentMode::kRun);
  ASSERT_NE(agent, nullptr);
  std::thread loop([&] { EXPECT_TRUE(agent->Run().ok()); });
  auto wait_for = [&](uint32_t word) {
    for (int i = 0; i < 500 && chip_->reg(0x6000) != word; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return chip_->reg(0x6000) == word;
  };
  EXPECT_TRUE(wait_for(0x80FF0114));
  ExperimentAssignment arm;
  arm.adapter_id = "port-2-2";
  arm.experiment = "hold-ab";
  arm.arm = "medium";
  arm.settings.hold_us = 64;
  arm.period_end = absl::Now() + absl::Milliseconds(500);
  ASSERT_TRUE(agent->SetServerBundle(Bundle(1, {}, {arm})).ok());
  EXPECT_TRUE(wait_for(0x80FF0214));
  // No new bundle before the period ends: back to the built-in default.
  EXPECT_TRUE(wait_for(0x80FF0114));
  agent->Stop();
  loop.join();
  EXPECT_TRUE(agent->Snapshot("port-2-2")->desired->experiments.empty());
}

// Receives sd_notify datagrams on a socket named by $NOTIFY_SOCKET for the test's lifetime.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
    ::setenv("WATCHDOG_USEC", "200000", 1);
    ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
    ::close(fd_);
  }
  // Messages received within `timeout`, until one contains `until`.
  std::vector<std::string> ReadUntil(const std::string& until, absl::Duration timeout) {
    std::vector<std::string> messages;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[1024];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) continue;
      messages.emplace_back(buffer, static_cast<size_t>(n));
      if (messages.back().find(until) != std::string::npos) break;
    }
    return messages;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST_F(AgentTest, TellsSystemdReadyWatchdogStatusAndStopping) {
  NotifySocket notify(dir_.File("notify.sock"));
  auto agent = MakeAgent(AgentMode::kRun);
  ASSERT_NE(agent, nullptr);
  std::thread loop([&] { EXPECT_TRUE(agent->Run().ok()); });
  const std::vector<std::string> startup = notify.ReadUntil("1 applied", absl::Seconds(10));
  ASSERT_FALSE(startup.empty());
  EXPECT_THAT(startup.front(), ::testing::StartsWith("READY=1\nSTATUS=1 adapter"));
  EXPECT_THAT(startup.back(), HasSubstr("STATUS=1 adapter: 1 applied"));
  // Pings every WATCHDOG_USEC/2 = 100 ms from the loop.
  const std::vector<std::string> pings = notify.ReadUntil("never", absl::Milliseconds(500));
  EXPECT_GE(std::count(pings.begin(), pings.end(), "WATCHDOG=1"), 3);
  agent->ReloadLocalPolicies();
  const std::vector<std::string> reload = notify.ReadUntil("READY=1", absl::Seconds(10));
  EXPECT_THAT(reload, ::testing::Contains("RELOADING=1"));
  agent->Stop();
  loop.join();
  EXPECT_THAT(notify.ReadUntil("STOPPING=1", absl::Seconds(5)), ::testing::Contains("STOPPING=1"));
}

}  // namespace
}  // namespace rxfleet::agent
