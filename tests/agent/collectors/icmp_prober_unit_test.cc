// Unit tests of the RTT prober that send no packets: route parsing, option validation and the
// states reached before a socket is needed.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/collectors/icmp_prober.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/collectors/metric_values.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::agent::testing::SeriesCount;
using ::rxfleet::agent::testing::SeriesValue;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using ::testing::HasSubstr;

std::string RouteFixture() {
  return ReadTextFile(SourcePath("tests/fixtures/proc/net-route")).value_or("");
}

TEST(DefaultGatewayTest, FindsTheDefaultRouteOfEachInterface) {
  const std::string routes = RouteFixture();
  EXPECT_EQ(DefaultGatewayFromRoutes(routes, "eth0").value_or(""), "192.168.1.1");
  // Two default routes: the lower metric (300, 10.0.2.1) wins over 192.168.1.254 at 600.
  EXPECT_EQ(DefaultGatewayFromRoutes(routes, "wlan0").value_or(""), "10.0.2.1");
  EXPECT_TRUE(absl::IsNotFound(DefaultGatewayFromRoutes(routes, "wlan1").status()));
  EXPECT_TRUE(absl::IsNotFound(DefaultGatewayFromRoutes(routes, "wlan2").status()));  // not UP
  EXPECT_TRUE(absl::IsNotFound(DefaultGatewayFromRoutes(routes, "wlan").status()));
}

TEST(DefaultGatewayTest, RejectsMalformedTables) {
  EXPECT_TRUE(absl::IsInvalidArgument(DefaultGatewayFromRoutes("", "eth0").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      DefaultGatewayFromRoutes("eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\n", "eth0")
          .status()));
  const std::string header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n";
  EXPECT_TRUE(absl::IsInvalidArgument(
      DefaultGatewayFromRoutes(header + "eth0\t00000000\tZZ01A8C0\t0003\t0\t0\t0\t00000000\n",
                               "eth0")
          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      DefaultGatewayFromRoutes(header + "eth0\t00000000\n", "eth0").status()));
  EXPECT_TRUE(absl::IsNotFound(DefaultGatewayFromRoutes(header, "eth0").status()));
}

TEST(ProbeOptionsTest, ValidatesRanges) {
  EXPECT_TRUE(ValidateIcmpProberOptions({}).ok());
  IcmpProberOptions o;
  o.payload_bytes = 8;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateIcmpProberOptions(o)));
  o = {};
  o.payload_bytes = 1473;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateIcmpProberOptions(o)));
  o = {};
  o.interval = absl::Milliseconds(100);
  o.timeout = absl::Milliseconds(200);  // longer than the interval
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateIcmpProberOptions(o)));
  o = {};
  o.interval = absl::Milliseconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateIcmpProberOptions(o)));
  o = {};
  o.target = "gateway.example";
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateIcmpProberOptions(o)));
  o = {};
  o.unreachable_after = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateIcmpProberOptions(o)));
  prometheus::Registry registry;
  o = {};
  o.payload_bytes = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(IcmpProber::Create(registry, o).status()));
}

TEST(ProbeStateTest, NamesAreDistinctMachineWords) {
  std::set<std::string_view> names;
  for (ProbeState s : kAllProbeStates) names.insert(ProbeStateName(s));
  EXPECT_EQ(names.size(), std::size(kAllProbeStates));
  EXPECT_EQ(ProbeStateName(ProbeState::kNotPermitted), "not_permitted");
}

TEST(RttBucketsTest, CoverATenthOfAMillisecondToATenthOfASecond) {
  const std::vector<double>& b = IcmpProber::RttBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 0.0001);
  EXPECT_DOUBLE_EQ(b.back(), 0.1);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

class ProberStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(procfs_.path() / "net");
    ASSERT_TRUE(WriteTextFile(procfs_.path() / "net/route", RouteFixture()).ok());
    IcmpProberOptions options;
    options.procfs_root = procfs_.path().string();
    options.log = [this](std::string_view line) {
      absl::MutexLock lock(&mu_);
      logs_.emplace_back(line);
    };
    absl::StatusOr<std::unique_ptr<IcmpProber>> prober = IcmpProber::Create(registry_, options);
    ASSERT_TRUE(prober.ok()) << prober.status();
    prober_ = *std::move(prober);
  }
  std::vector<std::string> Logs() {
    absl::MutexLock lock(&mu_);
    return logs_;
  }
  double State(const std::string& adapter, const std::string& state) {
    return SeriesValue(registry_, "rxfleet_adapter_probe_state",
                       {{"adapter", adapter}, {"state", state}})
        .value_or(-1);
  }

  TempDir procfs_;
  prometheus::Registry registry_;
  std::unique_ptr<IcmpProber> prober_;
  absl::Mutex mu_;
  std::vector<std::string> logs_;
};

TEST_F(ProberStateTest, MissingGatewayAndMissingNetdevAreStatesNotErrors) {
  prober_->SetAdapters({{"port-1-1", "wlan1", ""}, {"port-1-2", "", ""}});
  EXPECT_EQ(prober_->State("port-1-1"), ProbeState::kPending);
  EXPECT_EQ(State("port-1-1", "pending"), 1);
  for (int i = 0; i < 5; ++i) prober_->ProbeOnce();
  EXPECT_EQ(prober_->rounds(), 5u);
  EXPECT_EQ(prober_->State("port-1-1"), ProbeState::kNoTarget);
  EXPECT_EQ(prober_->State("port-1-2"), ProbeState::kNoNetdev);
  EXPECT_EQ(State("port-1-1", "no_target"), 1);
  EXPECT_EQ(State("port-1-1", "pending"), 0);
  EXPECT_EQ(State("port-1-2", "no_netdev"), 1);
  // One log line per change, not per round.
  const std::vector<std::string> logs = Logs();
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_THAT(logs[0] + logs[1], HasSubstr("no IPv4 default route via wlan1"));
  // Nothing was sent, nothing is lost, and no target is advertised.
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_adapter_probes_sent_total", {{"adapter", "port-1-1"}}),
            0);
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_adapter_probes_lost_total", {{"adapter", "port-1-1"}}),
            0);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_probe_target_info"), 0u);
  const std::map<std::string, ProbeWindowStats> window = prober_->TakeWindowStats();
  ASSERT_EQ(window.size(), 2u);
  EXPECT_EQ(window.at("port-1-1").sent, 0u);
}

TEST_F(ProberStateTest, InvalidPerAdapterTargetIsAnErrorState) {
  prober_->UpsertAdapter({"port-1-1", "wlan1", "not-an-address"});
  prober_->ProbeOnce();
  EXPECT_EQ(prober_->State("port-1-1"), ProbeState::kError);
}

TEST_F(ProberStateTest, RemoveDeletesEverySeries) {
  prober_->UpsertAdapter({"port-1-1", "wlan1", ""});
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_probe_state"), std::size(kAllProbeStates));
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_rtt_seconds"), 1u);
  prober_->RemoveAdapter("port-1-1");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_probe_state"), 0u);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_rtt_seconds"), 0u);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_probes_sent_total"), 0u);
  EXPECT_FALSE(prober_->State("port-1-1").has_value());
}

TEST_F(ProberStateTest, StartStopIsPromptAndCountsRounds) {
  prober_->UpsertAdapter({"port-1-1", "wlan1", ""});
  const auto start = std::chrono::steady_clock::now();
  prober_->Start();
  EXPECT_TRUE(prober_->WaitForRounds(1, absl::Seconds(10)));
  prober_->Stop();  // the interval is 1 s: Stop must not wait for it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  prober_->Stop();  // idempotent
  // A direct round after Stop() runs normally (the stop signal is for the thread only).
  const uint64_t rounds = prober_->rounds();
  prober_->ProbeOnce();
  EXPECT_EQ(prober_->rounds(), rounds + 1);
}

}  // namespace
}  // namespace rxfleet::agent
