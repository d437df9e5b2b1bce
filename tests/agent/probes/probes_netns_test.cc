// libiperf through a real netdev: a veth pair into a throwaway network namespace running
// `iperf3 -s`, rate limited to 50 Mbit/s each way. Needs root and `ip netns`; skips otherwise.
// The kernels this runs on may lack sch_netem ("Specified qdisc kind is unknown"): netem is
// tried first, tbf is the fallback.

#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/probes/iperf_probe.h"
#include "agent/probes/probe_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace rxfleet::agent {
namespace {

using rxfleet::testing::RunProcess;

constexpr double kRateBps = 50e6;

bool Sh(const std::vector<std::string>& argv) {
  return RunProcess(argv, absl::Seconds(20)).exit_code == 0;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, veth, tc)";
    if (RunProcess({"ip", "netns", "list"}, absl::Seconds(10)).exit_code != 0) {
      GTEST_SKIP() << "`ip netns` is not available";
    }
    const std::string tag = std::to_string(::getpid() % 100000);
    ns_ = "rxfp" + tag;
    host_if_ = "rxfh" + tag;
    ns_if_ = "rxfn" + tag;
    ASSERT_TRUE(Sh({"ip", "netns", "add", ns_}));
    created_ = true;
    ASSERT_TRUE(Sh({"ip", "link", "add", host_if_, "type", "veth", "peer", "name", ns_if_}));
    ASSERT_TRUE(Sh({"ip", "link", "set", ns_if_, "netns", ns_}));
    ASSERT_TRUE(Sh({"ip", "addr", "add", "10.213.0.1/24", "dev", host_if_}));
    ASSERT_TRUE(Sh({"ip", "link", "set", host_if_, "up"}));
    ASSERT_TRUE(Sh({"ip", "-n", ns_, "addr", "add", "10.213.0.2/24", "dev", ns_if_}));
    ASSERT_TRUE(Sh({"ip", "-n", ns_, "link", "set", ns_if_, "up"}));
    ASSERT_TRUE(Sh({"ip", "-n", ns_, "link", "set", "lo", "up"}));
    for (const auto& [ns, dev] : {std::pair{std::string(), host_if_}, std::pair{ns_, ns_if_}}) {
      std::vector<std::string> tc = {"tc"};
      if (!ns.empty()) tc.insert(tc.end(), {"-n", ns});
      std::vector<std::string> netem = tc;
      netem.insert(netem.end(), {"qdisc", "add", "dev", dev, "root", "netem", "rate", "50mbit"});
      if (!Sh(netem)) {
        std::vector<std::string> tbf = tc;
        tbf.insert(tbf.end(), {"qdisc", "add", "dev", dev, "root", "tbf", "rate", "50mbit", "burst",
                               "64kb", "latency", "50ms"});
        ASSERT_TRUE(Sh(tbf)) << "neither netem nor tbf";
      }
    }
    absl::StatusOr<std::unique_ptr<testing::ChildProcess>> server =
        testing::ChildProcess::Start({"ip", "netns", "exec", ns_, "iperf3", "-s", "--forceflush",
                                      "-B", "10.213.0.2", "-p", "5201"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(
        server_
            ->WaitForLineContaining(testing::Stream::kStdout, "Server listening", absl::Seconds(10))
            .ok());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Terminate();
    if (created_) {
      RunProcess({"ip", "link", "del", host_if_}, absl::Seconds(10));
      RunProcess({"ip", "netns", "del", ns_}, absl::Seconds(10));
    }
  }
  common::ProbeSpec Spec(common::ProbeProtocol protocol, int seconds = 3) {
    common::ProbeSpec spec;
    spec.server_host = "10.213.0.2";
    spec.protocol = protocol;
    spec.duration = absl::Seconds(seconds);
    if (protocol == common::ProbeProtocol::kUdp) spec.udp_rate_bps = 45'000'000;
    return spec;
  }

  std::string ns_, host_if_, ns_if_;
  bool created_ = false;
  std::unique_ptr<testing::ChildProcess> server_;
};

TEST_F(NetnsTest, TcpReverseMeasuresTheLimit) {
  IperfProbeRunner runner;
  ProbeResult r = runner.Run({"port-1", host_if_, Spec(common::ProbeProtocol::kTcp)});
  ASSERT_TRUE(r.ok) << ProbeFailureName(r.failure) << ": " << r.failure_message;
  EXPECT_NEAR(r.throughput_bps, kRateBps, kRateBps * 0.1);
  EXPECT_GT(r.bytes, 0u);
}

TEST_F(NetnsTest, UdpReverseMeasuresTheRate) {
  IperfProbeRunner runner;
  ProbeResult r = runner.Run({"port-1", host_if_, Spec(common::ProbeProtocol::kUdp)});
  ASSERT_TRUE(r.ok) << ProbeFailureName(r.failure) << ": " << r.failure_message;
  // 45 Mbit/s offered under the 50 Mbit/s limit: all of it arrives.
  EXPECT_NEAR(r.throughput_bps, 45e6, 45e6 * 0.1);
  EXPECT_LT(r.udp_loss_ratio, 0.1);
}

TEST_F(NetnsTest, BusyServerIsRetried) {
  // Another client keeps the server busy for 5 s.
  absl::StatusOr<std::unique_ptr<testing::ChildProcess>> other =
      testing::ChildProcess::Start({"iperf3", "--forceflush", "-c", "10.213.0.2", "-t", "5"});
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)
                  ->WaitForLineContaining(testing::Stream::kStdout, "connected", absl::Seconds(10))
                  .ok());
  IperfProbeRunner runner;
  ProbeSchedulerOptions options;
  std::vector<std::string> lines;
  options.log = [&lines](common::LogLevel, std::string_view line) {
    lines.push_back(std::string(line));
  };
  options.netdev_of = [this](const std::string&) { return host_if_; };
  ProbeScheduler scheduler(&runner, options);
  common::ProbeSpec spec = Spec(common::ProbeProtocol::kTcp, 2);
  scheduler.SetPolicyProbes({{"port-1", {"p", spec, absl::ZeroDuration()}}},
                            absl::FromUnixSeconds(0));
  // Drive it on the real clock: the first attempt is busy, the retries come 2 s and 4 s later.
  absl::Time now = absl::FromUnixSeconds(0);
  while (scheduler.Statuses().empty()) {
    scheduler.RunDue(now);
    std::optional<absl::Time> next = scheduler.NextRun();
    ASSERT_TRUE(next.has_value());
    if (scheduler.Statuses().empty()) {
      absl::SleepFor(*next - now);  // the retry waits are the point of this test
      now = *next;
    }
  }
  const AdapterProbeStatus status = scheduler.Statuses().at("port-1");
  EXPECT_GT(status.last.attempts, 1u);
  EXPECT_TRUE(status.state == "ok" || status.state == "busy") << status.state;
  EXPECT_EQ(lines.size(), 1u);
}

TEST_F(NetnsTest, UnreachableServerIsOneState) {
  IperfProbeOptions probe_options;
  probe_options.connect_timeout = absl::Seconds(2);
  IperfProbeRunner runner(probe_options);
  ProbeSchedulerOptions options;
  std::vector<std::string> lines;
  options.log = [&lines](common::LogLevel, std::string_view line) {
    lines.push_back(std::string(line));
  };
  options.netdev_of = [this](const std::string&) { return host_if_; };
  ProbeScheduler scheduler(&runner, options);
  common::ProbeSpec spec = Spec(common::ProbeProtocol::kTcp, 1);
  spec.server_port = 5999;  // nobody listens
  spec.interval = absl::Minutes(1);
  scheduler.SetPolicyProbes({{"port-1", {"p", spec, absl::ZeroDuration()}}},
                            absl::FromUnixSeconds(0));
  scheduler.RunDue(absl::FromUnixSeconds(0));
  scheduler.RunDue(absl::FromUnixSeconds(60));
  const AdapterProbeStatus status = scheduler.Statuses().at("port-1");
  EXPECT_EQ(status.state, "unreachable");
  EXPECT_EQ(status.last.attempts, 1u);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], ::testing::HasSubstr(
                            "probe port-1 -> 10.213.0.2:5999: unreachable: unable to connect"));
}

TEST_F(NetnsTest, MissingNetdevIsInterfaceDown) {
  IperfProbeRunner runner;
  ProbeResult r = runner.Run({"port-1", host_if_ + "x", Spec(common::ProbeProtocol::kTcp)});
  EXPECT_EQ(r.failure, ProbeFailure::kInterfaceDown);
}

TEST_F(NetnsTest, StalledServerIsTimeout) {
  // libiperf writes to the control connection the watchdog shut down: the agent ignores
  // SIGPIPE (agent/main.cc), so does this test.
  ::signal(SIGPIPE, SIG_IGN);
  IperfProbeOptions options;
  options.timeout_margin = absl::Seconds(2);
  IperfProbeRunner runner(options);
  std::thread stopper([this] {
    absl::SleepFor(absl::Milliseconds(500));  // the test has started
    server_->Signal(SIGSTOP);
  });
  ProbeResult r = runner.Run({"port-1", host_if_, Spec(common::ProbeProtocol::kTcp, 1)});
  stopper.join();
  server_->Signal(SIGCONT);
  EXPECT_EQ(r.failure, ProbeFailure::kTimeout) << r.failure_message;
  EXPECT_THAT(r.failure_message, ::testing::HasSubstr("no result within 3s"));
}

// The agent stops while a probe runs against a server that stopped answering: Cancel ends the
// attempt (long before its 30 s + 10 s limit) and every later attempt fails at once.
TEST_F(NetnsTest, CancelEndsTheAttemptInProgress) {
  ::signal(SIGPIPE, SIG_IGN);
  IperfProbeRunner runner;
  std::thread stopper([this, &runner] {
    absl::SleepFor(absl::Milliseconds(500));  // the test has started
    server_->Signal(SIGSTOP);
    absl::SleepFor(absl::Milliseconds(500));
    runner.Cancel();
  });
  ProbeResult r = runner.Run({"port-1", host_if_, Spec(common::ProbeProtocol::kTcp, 30)});
  stopper.join();
  server_->Signal(SIGCONT);
  EXPECT_EQ(r.failure, ProbeFailure::kError) << r.failure_message;
  EXPECT_EQ(r.failure_message, "cancelled: the agent is stopping");
  EXPECT_LT(r.duration, absl::Seconds(30)) << "ended by Cancel, not by the watchdog";
  ProbeResult later = runner.Run({"port-1", host_if_, Spec(common::ProbeProtocol::kTcp, 1)});
  EXPECT_EQ(later.failure_message, "cancelled: the agent is stopping");
}

}  // namespace
}  // namespace rxfleet::agent
