// Shaped netdevs with real namespaces (label integration, root only): the tbf rate on a veth
// peer follows the hold in the emulated register, from a timeline `set_register` and from an
// agent's write, and the option fails clearly without the privileges or the namespace.

#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/veth_fleet.h"

namespace rxfleet::emulator {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::VethFleet;
using ::rxfleet::testing::VethFleetOptions;
using ::rxfleet::testing::WriteTextFile;
using ::testing::HasSubstr;

constexpr char kHostDevice[] = "rxfshape0";

// One RTL8922AU at SuperSpeed with the driver's 1024 µs hold, its netdev shaped at 0.1.
std::string ShapedLab(const std::string& netns, const std::string& device) {
  return absl::StrCat(R"(host_class: x86
devices:
  - name: be6500
    vid: 0x0bda
    pid: 0x8912
    speed: 5000
    bus: 2
    port: "1"
    devnum: 11
    serial: 00e04c0001f1
    registers: {0x6000: 0x80FF2014, 0x6004: 0x0000001F}
    netdev: {name: )",
                      kHostDevice, ", driver: rtw89_8922au, shape: {netns: ", netns,
                      ", device: ", device, ", scale: 0.1}}\n");
}

// The tbf rate of `device` in `netns` in bit/s as the kernel reports it, or -1.
int64_t KernelRateBps(const std::string& netns, const std::string& device) {
  const ProcessResult r =
      RunProcess({"tc", "-n", netns, "-j", "qdisc", "show", "dev", device}, absl::Seconds(10));
  if (r.exit_code != 0) return -1;
  const nlohmann::json qdiscs = nlohmann::json::parse(r.stdout_text, nullptr, false);
  if (!qdiscs.is_array()) return -1;
  for (const nlohmann::json& q : qdiscs) {
    if (q.value("kind", "") == "tbf" && q.value("root", false)) {
      return q.at("options").at("rate").get<int64_t>() * 8;  // tc -j prints bytes/s
    }
  }
  return -1;
}

class ShapeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::VethFleetUnavailableReason(); !why.empty()) {
      GTEST_SKIP() << why;
    }
    VethFleetOptions options;
    options.host_devices = {kHostDevice};
    options.subnet = "10.98.7";
    options.iperf_servers = false;
    absl::StatusOr<std::unique_ptr<VethFleet>> fleet = VethFleet::Create(options);
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
    ASSERT_TRUE(
        WriteTextFile(dir_.File("lab.yaml"), ShapedLab(netns(), fleet_->veths()[0].peer_device))
            .ok());
  }

  const std::string& netns() const { return fleet_->veths()[0].netns; }
  const std::string& peer() const { return fleet_->veths()[0].peer_device; }

  ProcessResult Emulate(const std::vector<std::string>& extra,
                        const std::vector<std::string>& command) {
    std::vector<std::string> argv = {EmulatorPath(), "--lab", dir_.File("lab.yaml"), "--state-out",
                                     dir_.File("state.json")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return RunProcess(argv, absl::Seconds(60), {"TMPDIR=" + dir_.path().string()});
  }

  nlohmann::json Shape() {
    absl::StatusOr<nlohmann::json> state = ReadJsonFile(dir_.File("state.json"));
    EXPECT_TRUE(state.ok()) << state.status();
    if (!state.ok()) return nullptr;
    return state->at("devices")[0].at("netdev").at("shape");
  }

  TempDir dir_{"rxfleet-shape"};
  std::unique_ptr<VethFleet> fleet_;
};

TEST_F(ShapeIntegrationTest, RateFollowsATimelineSetRegister) {
  ASSERT_TRUE(WriteTextFile(dir_.File("timeline.yaml"),
                            "- {at: 0.5, event: set_register, device: be6500, address: 0x6000, "
                            "value: 0x80FF0114}\n")
                  .ok());
  // The child reads the kernel's rate before the event: the start rate is in place before
  // the child runs. It then waits (condition with a deadline) for the 32 µs rate.
  const std::string show = absl::StrCat("tc -n ", netns(), " -j qdisc show dev ", peer());
  const ProcessResult r = Emulate(
      {"--timeline", dir_.File("timeline.yaml")},
      {"sh", "-c",
       absl::StrCat(show, " > ", dir_.File("before.json"), "; for i in $(seq 300); do ", show,
                    " | grep -q '\"rate\":12525000' && exit 0; sleep 0.1; done; ", "exit 3")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;

  absl::StatusOr<nlohmann::json> before = ReadJsonFile(dir_.File("before.json"));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->at(0).at("options").at("rate"), 61'300'000 / 8);  // 613 Mbit/s x 0.1
  EXPECT_EQ(KernelRateBps(netns(), peer()), 100'200'000);             // 1002 Mbit/s x 0.1

  const nlohmann::json shape = Shape();
  EXPECT_EQ(shape.at("netns"), netns());
  EXPECT_EQ(shape.at("device"), peer());
  EXPECT_EQ(shape.at("rate_bps"), 100'200'000);
  ASSERT_EQ(shape.at("rates").size(), 2u) << shape.dump();
  EXPECT_EQ(shape.at("rates")[0].at("hold_us"), 1024);
  EXPECT_EQ(shape.at("rates")[0].at("rate_bps"), 61'300'000);
  EXPECT_EQ(shape.at("rates")[0].at("t"), 0.0);
  EXPECT_EQ(shape.at("rates")[1].at("hold_us"), 32);
  EXPECT_EQ(shape.at("rates")[1].at("rate_bps"), 100'200'000);
  EXPECT_GE(shape.at("rates")[1].at("t").get<double>(), 0.5);
}

TEST_F(ShapeIntegrationTest, RateFollowsTheAgentsWrite) {
  // The built-in policy gives SuperSpeed adapters a 32 µs hold.
  const ProcessResult r = Emulate({}, {BinaryPath("agent/rxfleet-agent"), "--once",
                                       "--status-socket", "none", "--metrics-address", "none"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text;
  EXPECT_EQ(KernelRateBps(netns(), peer()), 100'200'000);
  const nlohmann::json shape = Shape();
  ASSERT_GE(shape.at("rates").size(), 2u) << shape.dump();
  EXPECT_EQ(shape.at("rates")[0].at("rate_bps"), 61'300'000);
  EXPECT_EQ(shape.at("rates").back().at("hold_us"), 32);
  EXPECT_EQ(shape.at("rates").back().at("rate_bps"), 100'200'000);
}

TEST_F(ShapeIntegrationTest, WithoutCapNetAdminTheEmulatorRefuses) {
  if (RunProcess({"setpriv", "--version"}, absl::Seconds(10)).exit_code != 0) {
    GTEST_SKIP() << "needs setpriv (util-linux) to drop CAP_NET_ADMIN";
  }
  const ProcessResult r = RunProcess({"setpriv", "--bounding-set", "-net_admin", "--",
                                      EmulatorPath(), "--lab", dir_.File("lab.yaml"), "--", "true"},
                                     absl::Seconds(60), {"TMPDIR=" + dir_.path().string()});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.stderr_text, HasSubstr("netdev.shape needs CAP_NET_ADMIN"));
  EXPECT_THAT(r.stderr_text, HasSubstr("lacks CAP_NET_ADMIN: run rxfleet-emulate as root"));
}

TEST_F(ShapeIntegrationTest, AMissingNamespaceIsNamed) {
  ASSERT_TRUE(
      WriteTextFile(dir_.File("lab.yaml"), ShapedLab("rxfleet-no-such-netns", "peer")).ok());
  const ProcessResult r = Emulate({}, {"true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.stderr_text, HasSubstr("device be6500: netdev.shape: network namespace "
                                       "rxfleet-no-such-netns: no /run/netns/"
                                       "rxfleet-no-such-netns"));
}

TEST_F(ShapeIntegrationTest, AMissingDeviceIsNamed) {
  ASSERT_TRUE(WriteTextFile(dir_.File("lab.yaml"), ShapedLab(netns(), "nosuchdev")).ok());
  const ProcessResult r = Emulate({}, {"true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.stderr_text,
              HasSubstr(absl::StrCat("no interface nosuchdev in network namespace ", netns())));
}

}  // namespace
}  // namespace rxfleet::emulator
