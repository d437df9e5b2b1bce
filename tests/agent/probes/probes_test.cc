#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

// iperf_api.h needs uint64_t declared first.
#include <iperf_api.h>

#include "agent/probes/iperf_errors.h"
#include "agent/probes/iperf_json.h"
#include "agent/probes/iperf_probe.h"
#include "agent/probes/netdev_address.h"
#include "agent/probes/probe_result_proto.h"
#include "agent/probes/probe_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  absl::StatusOr<std::string> text =
      testing::ReadTextFile(testing::SourcePath("tests/fixtures/iperf/" + name));
  EXPECT_TRUE(text.ok()) << name;
  return text.value_or("");
}

TEST(IperfReportTest, TcpReverseUsesTheReceiverSum) {
  absl::StatusOr<IperfReport> r =
      ParseIperfReport(Fixture("tcp_reverse.json"), common::ProbeProtocol::kTcp);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->error.has_value());
  EXPECT_DOUBLE_EQ(r->throughput_bps, 47955905.70497941);
  EXPECT_EQ(r->bytes, 17984160u);
  EXPECT_EQ(r->retransmits, 0u);
}

TEST(IperfReportTest, TcpRetransmitsComeFromTheSenderSum) {
  absl::StatusOr<IperfReport> r =
      ParseIperfReport(Fixture("tcp_reverse_p4.json"), common::ProbeProtocol::kTcp);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->retransmits, 358u);
  EXPECT_DOUBLE_EQ(r->throughput_bps, 47963660.04758486);
}

TEST(IperfReportTest, UdpThroughputIsWhatArrivedLossFromSum) {
  absl::StatusOr<IperfReport> r =
      ParseIperfReport(Fixture("udp_reverse_lossy.json"), common::ProbeProtocol::kUdp);
  ASSERT_TRUE(r.ok()) << r.status();
  // end.sum says 1.74 Gbit/s (sent); end.sum_received 362 Mbit/s (arrived).
  EXPECT_DOUBLE_EQ(r->throughput_bps, 361612272.46409816);
  EXPECT_EQ(r->bytes, 135764480u);
  EXPECT_NEAR(r->udp_loss_ratio, 0.791110963734235, 1e-12);
  EXPECT_NEAR(r->udp_jitter_seconds, 0.3595329057932464e-3, 1e-12);
}

TEST(IperfReportTest, UdpWithoutLoss) {
  absl::StatusOr<IperfReport> r =
      ParseIperfReport(Fixture("udp_reverse.json"), common::ProbeProtocol::kUdp);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->udp_loss_ratio, 0);
  EXPECT_GT(r->throughput_bps, 39e6);
}

TEST(IperfReportTest, ErrorReports) {
  absl::StatusOr<IperfReport> busy =
      ParseIperfReport(Fixture("err_busy.json"), common::ProbeProtocol::kTcp);
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_EQ(busy->error, "the server is busy running a test. try again later");
  absl::StatusOr<IperfReport> refused =
      ParseIperfReport(Fixture("err_refused.json"), common::ProbeProtocol::kUdp);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(*refused->error, HasSubstr("Connection refused"));
}

TEST(IperfReportTest, RejectsBrokenReports) {
  EXPECT_FALSE(ParseIperfReport("not json", common::ProbeProtocol::kTcp).ok());
  EXPECT_FALSE(ParseIperfReport("[]", common::ProbeProtocol::kTcp).ok());
  EXPECT_FALSE(ParseIperfReport(R"({"end": {}})", common::ProbeProtocol::kTcp).ok());
  EXPECT_FALSE(ParseIperfReport(R"({"end": {"sum_received": {"bits_per_second": "x"}}})",
                                common::ProbeProtocol::kTcp)
                   .ok());
  EXPECT_FALSE(ParseIperfReport(R"({"end": {"sum_sent": {}}})", common::ProbeProtocol::kUdp).ok());
}

TEST(IperfErrorsTest, Mapping) {
  EXPECT_EQ(ClassifyIperfError(IENONE), ProbeFailure::kNone);
  EXPECT_EQ(ClassifyIperfError(IEACCESSDENIED), ProbeFailure::kBusy);
  EXPECT_EQ(ClassifyIperfError(IECONNECT), ProbeFailure::kUnreachable);
  EXPECT_EQ(ClassifyIperfError(IESTREAMCONNECT), ProbeFailure::kUnreachable);
  EXPECT_EQ(ClassifyIperfError(IENOMSG), ProbeFailure::kUnreachable);
  EXPECT_EQ(ClassifyIperfError(IESERVERTERM), ProbeFailure::kRefused);
  EXPECT_EQ(ClassifyIperfError(IECTRLCLOSE), ProbeFailure::kRefused);
  EXPECT_EQ(ClassifyIperfError(IEBINDDEV), ProbeFailure::kError);
  EXPECT_EQ(ClassifyIperfError(IESELECT), ProbeFailure::kError);
  EXPECT_THAT(IperfErrorText(IEACCESSDENIED), HasSubstr("busy"));
}

TEST(ProbeFailureTest, Words) {
  EXPECT_EQ(ProbeFailureName(ProbeFailure::kInterfaceDown), "interface_down");
  EXPECT_EQ(ProbeFailureName(ProbeFailure::kNone), "");
  EXPECT_EQ(BoundedFailureMessage(std::string(2000, 'x')).size(), kMaxProbeFailureMessage);
}

TEST(NetdevAddressTest, Picks) {
  std::vector<InterfaceAddress> list = {{"wlan0", true, ""},
                                        {"wlan0", true, "10.0.0.7"},
                                        {"wlan1", false, "10.1.0.7"},
                                        {"wlan2", true, ""}};
  EXPECT_EQ(PickNetdevIpv4(list, "wlan0").value_or(""), "10.0.0.7");
  EXPECT_EQ(PickNetdevIpv4(list, "wlan1").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PickNetdevIpv4(list, "wlan2").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PickNetdevIpv4(list, "wlan9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(PickNetdevIpv4(list, "").status().code(), absl::StatusCode::kNotFound);
}

common::ProbeSpec Spec(common::ProbeProtocol protocol = common::ProbeProtocol::kTcp) {
  common::ProbeSpec spec;
  spec.server_host = "10.0.0.5";
  spec.protocol = protocol;
  spec.duration = absl::Seconds(10);
  spec.interval = absl::Minutes(10);
  if (protocol == common::ProbeProtocol::kUdp) spec.udp_rate_bps = 50'000'000;
  return spec;
}

TEST(IperfArgumentsTest, ReverseUdp) {
  IperfProbeOptions options;
  std::vector<std::string> args =
      IperfClientArguments(Spec(common::ProbeProtocol::kUdp), "10.0.0.7", "wlan0", options);
  EXPECT_THAT(args, ::testing::IsSupersetOf({"-c", "10.0.0.5", "-B", "10.0.0.7%wlan0", "-R", "-u",
                                             "50000000", "-J", "--rcv-timeout"}));
  common::ProbeSpec forward = Spec();
  forward.direction = common::ProbeDirection::kForward;
  args = IperfClientArguments(forward, "10.0.0.7", "wlan0", options);
  EXPECT_THAT(args, ::testing::Not(::testing::Contains("-R")));
  EXPECT_THAT(args, ::testing::Not(::testing::Contains("--rcv-timeout")));
}

TEST(IperfRunnerTest, MissingNetdevIsInterfaceDownWithoutTraffic) {
  IperfProbeOptions options;
  options.interfaces = [] {
    return absl::StatusOr<std::vector<InterfaceAddress>>(
        std::vector<InterfaceAddress>{{"lo", true, "127.0.0.1"}});
  };
  IperfProbeRunner runner(options);
  ProbeResult r = runner.Run({"port-2-1", "wlan7", Spec()});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, ProbeFailure::kInterfaceDown);
  EXPECT_THAT(r.failure_message, HasSubstr("wlan7"));
  v1::ProbeResult proto = ProbeResultToProto(r);
  EXPECT_EQ(proto.failure_reason(), "interface_down");
  EXPECT_EQ(proto.attempts(), 1u);
  EXPECT_EQ(proto.spec().server(), "10.0.0.5:5201");
}

// A runner whose outcomes the test queues; records every request.
class FakeRunner final : public ProbeRunner {
 public:
  ProbeResult Run(const ProbeRequest& request) override {
    requests.push_back(request);
    ProbeResult r;
    r.spec = request.spec;
    r.attempts = 1;
    if (outcomes.empty()) {
      r.ok = true;
      r.throughput_bps = 48e6;
    } else {
      r.failure = outcomes.front();
      r.ok = r.failure == ProbeFailure::kNone;
      r.failure_message = r.ok ? "" : "Connection refused";
      if (r.ok) r.throughput_bps = 48e6;
      outcomes.pop_front();
    }
    return r;
  }
  void Cancel() override { cancels.fetch_add(1); }
  std::deque<ProbeFailure> outcomes;
  std::vector<ProbeRequest> requests;
  std::atomic<int> cancels{0};
};

struct Logged {
  common::LogLevel level;
  std::string line;
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() {
    ProbeSchedulerOptions options;
    options.host_id = "pi1";
    options.random = [] { return 0.0; };
    options.netdev_of = [](const std::string& id) { return id == "port-1" ? "wlan1" : "wlan2"; };
    options.log = [this](common::LogLevel level, std::string_view line) {
      logs.push_back({level, std::string(line)});
    };
    options.on_result = [this](const std::string& id, ProbeOrigin, const ProbeResult& r) {
      results.push_back({id, r});
    };
    scheduler = std::make_unique<ProbeScheduler>(&runner, options);
  }
  // Steps the fake clock from run to run until `until`.
  void RunUntil(absl::Time until) {
    while (auto next = scheduler->NextRun()) {
      if (*next > until) break;
      now = *next;
      scheduler->RunDue(now);
    }
    now = until;
  }

  FakeRunner runner;
  std::vector<Logged> logs;
  std::vector<std::pair<std::string, ProbeResult>> results;
  std::unique_ptr<ProbeScheduler> scheduler;
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(SchedulerTest, SlotsFollowTheOffsetAndTheInterval) {
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(30)}}}, now);
  // 1'800'000'000 is a multiple of 600 s: runs at +30 s, +630 s, ...
  ASSERT_EQ(scheduler->NextRun(), now + absl::Seconds(30));
  const absl::Time start = now;
  RunUntil(start + absl::Seconds(1300));
  ASSERT_EQ(runner.requests.size(), 3u);
  EXPECT_EQ(runner.requests[0].netdev, "wlan1");
  EXPECT_EQ(scheduler->NextRun(), start + absl::Seconds(1830));
}

TEST_F(SchedulerTest, StableOffsetWithoutSlot) {
  const absl::Duration a = StableProbeOffset("pi1", "port-1", absl::Minutes(10));
  EXPECT_EQ(a, StableProbeOffset("pi1", "port-1", absl::Minutes(10)));
  EXPECT_GE(a, absl::ZeroDuration());
  EXPECT_LT(a, absl::Minutes(10));
  EXPECT_NE(a, StableProbeOffset("pi1", "port-2", absl::Minutes(10)));
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), std::nullopt}}}, now);
  EXPECT_EQ(scheduler->NextRun(), NextSlot(now, absl::Minutes(10), a));
}

TEST_F(SchedulerTest, OneAtATimeInOrder) {
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(20)}},
                              {"port-2", {"p", Spec(), absl::Seconds(20)}},
                              {"port-3", {"p", Spec(), absl::Milliseconds(19500)}}},
                             now);
  // All three due by +20 s: RunDue runs them one after another, the earliest first.
  EXPECT_EQ(scheduler->RunDue(now + absl::Seconds(20)), 3);
  ASSERT_EQ(runner.requests.size(), 3u);
  EXPECT_EQ(runner.requests[0].adapter_id, "port-3");
}

TEST_F(SchedulerTest, BusyIsRetriedWithBackoffThenReported) {
  runner.outcomes = {ProbeFailure::kBusy, ProbeFailure::kBusy, ProbeFailure::kBusy};
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(0)}}}, now);
  EXPECT_EQ(scheduler->RunDue(now), 1);
  EXPECT_EQ(scheduler->NextRun(), now + absl::Seconds(2));
  EXPECT_EQ(scheduler->RunDue(now + absl::Seconds(2)), 1);
  EXPECT_EQ(scheduler->NextRun(), now + absl::Seconds(6));
  EXPECT_EQ(scheduler->RunDue(now + absl::Seconds(6)), 1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].second.failure, ProbeFailure::kBusy);
  EXPECT_EQ(results[0].second.attempts, 3u);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].line, "probe port-1 -> 10.0.0.5:5201: busy: Connection refused, 3 attempts");
  EXPECT_EQ(scheduler->NextRun(), now + absl::Minutes(10));
}

TEST_F(SchedulerTest, BusyThenOk) {
  runner.outcomes = {ProbeFailure::kBusy, ProbeFailure::kNone};
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(0)}}}, now);
  RunUntil(now + absl::Seconds(5));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].second.ok);
  EXPECT_EQ(results[0].second.attempts, 2u);
}

TEST_F(SchedulerTest, OneLogLinePerStateChange) {
  runner.outcomes = {ProbeFailure::kUnreachable, ProbeFailure::kUnreachable,
                     ProbeFailure::kUnreachable, ProbeFailure::kNone, ProbeFailure::kNone};
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(0)}}}, now);
  RunUntil(now + absl::Minutes(45));
  EXPECT_EQ(runner.requests.size(), 5u);  // unreachable is final: no retry
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].level, common::LogLevel::kWarning);
  EXPECT_EQ(logs[0].line,
            "probe port-1 -> 10.0.0.5:5201: unreachable: Connection refused, 1 attempt");
  EXPECT_EQ(logs[1].level, common::LogLevel::kInfo);
  EXPECT_THAT(logs[1].line, HasSubstr(": ok: 48.0 Mbit/s TCP download"));
  EXPECT_EQ(scheduler->Statuses().at("port-1").state, "ok");
}

// A probe that overran (here: the runner took 13 s, a watchdog timeout) must not start the
// next adapter's probe 7 s late, in the slot of a third adapter at the iperf3 server: that run
// moves to its next slot, with one warning line.
TEST_F(SchedulerTest, ALateFirstAttemptWaitsForItsNextSlot) {
  scheduler->SetPolicyProbes(
      {{"port-1", {"p", Spec(), absl::Seconds(1)}}, {"port-2", {"p", Spec(), absl::Seconds(6)}}},
      now);
  const absl::Time start = now;
  EXPECT_EQ(scheduler->RunDue(start + absl::Seconds(1)), 1);  // port-1
  // port-1 ended at +14 s; port-2's slot was +6 s.
  EXPECT_EQ(scheduler->RunDue(start + absl::Seconds(14)), 0);
  ASSERT_EQ(runner.requests.size(), 1u);
  ASSERT_EQ(logs.size(), 2u) << "the ok line of port-1 and the skip";
  EXPECT_EQ(logs[1].level, common::LogLevel::kWarning);
  EXPECT_THAT(logs[1].line, HasSubstr("probe port-2 -> 10.0.0.5:5201: slot at "));
  EXPECT_THAT(logs[1].line, HasSubstr("skipped: the host's previous probe ran 8s past it"));
  EXPECT_EQ(scheduler->NextRun(), start + absl::Seconds(601));  // port-1's next slot
  RunUntil(start + absl::Seconds(700));
  ASSERT_EQ(runner.requests.size(), 3u);
  EXPECT_EQ(runner.requests[2].adapter_id, "port-2");  // at +606 s, in its slot
}

// A retry after `busy` is late by design and still runs.
TEST_F(SchedulerTest, BusyRetriesAreNotLate) {
  runner.outcomes = {ProbeFailure::kBusy, ProbeFailure::kNone};
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(0)}}}, now);
  EXPECT_EQ(scheduler->RunDue(now), 1);
  EXPECT_EQ(scheduler->RunDue(now + absl::Seconds(10)), 1);  // due at +2 s
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].second.ok);
}

TEST_F(SchedulerTest, RemovedAdapterStopsProbing) {
  scheduler->SetPolicyProbes({{"port-1", {"p", Spec(), absl::Seconds(5)}}}, now);
  scheduler->SetPolicyProbes({}, now);
  EXPECT_FALSE(scheduler->NextRun().has_value());
}

TEST_F(SchedulerTest, ExperimentProbeOncePerWindowAfterBurnIn) {
  ExperimentAssignment a;
  a.adapter_id = "port-2";
  a.experiment = "hold-ab";
  a.arm = "short";
  a.period_start = now;
  a.period_end = now + absl::Minutes(5);
  a.window_length = absl::Seconds(60);
  a.burn_in = absl::Seconds(90);
  a.probe = Spec();
  a.probe_offset = absl::Seconds(20);
  scheduler->SetAssignments({a}, now);
  // Window 0 ends at 60 s (inside burn-in): no probe. Window 1 ends at 120 s > 90 s: at 80 s.
  ASSERT_EQ(scheduler->NextRun(), now + absl::Seconds(80));
  const absl::Time start = now;
  RunUntil(start + absl::Minutes(6));
  // Windows 1..4 (the period ends at 300 s).
  ASSERT_EQ(runner.requests.size(), 4u);
  EXPECT_EQ(runner.requests[0].netdev, "wlan2");
  std::optional<ProbeResult> r =
      scheduler->TakeWindowResult("port-2", "hold-ab", start + absl::Seconds(60));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok);
  EXPECT_FALSE(scheduler->TakeWindowResult("port-2", "hold-ab", start + absl::Seconds(60)));
  EXPECT_FALSE(scheduler->TakeWindowResult("port-2", "hold-ab", start));
  EXPECT_TRUE(scheduler->TakeWindowResult("port-2", "hold-ab", start + absl::Seconds(240)));
}

// More adapters share the iperf3 server than slots fit in a window: each probes only in the
// windows of its round (window index from the Unix epoch, modulo probe_rounds).
TEST_F(SchedulerTest, ExperimentProbeOnlyInItsRound) {
  ExperimentAssignment a;
  a.adapter_id = "port-2";
  a.experiment = "hold-ab";
  a.arm = "short";
  a.period_start = now;  // 1'800'000'000 s = window 30'000'000 of 60 s: an even index
  a.period_end = now + absl::Minutes(6);
  a.window_length = absl::Seconds(60);
  a.probe = Spec();
  a.probe_offset = absl::Seconds(20);
  a.probe_rounds = 3;
  a.probe_round = 2;
  scheduler->SetAssignments({a}, now);
  // Index 30'000'000 is 0 modulo 3: round 2 is the window at +120 s, then +300 s.
  ASSERT_EQ(scheduler->NextRun(), now + absl::Seconds(140));
  const absl::Time start = now;
  RunUntil(start + absl::Minutes(7));
  ASSERT_EQ(runner.requests.size(), 2u);
  EXPECT_TRUE(scheduler->TakeWindowResult("port-2", "hold-ab", start + absl::Seconds(120)));
  EXPECT_TRUE(scheduler->TakeWindowResult("port-2", "hold-ab", start + absl::Seconds(300)));
}

TEST_F(SchedulerTest, WorkerThreadRunsDueProbes) {
  ProbeSchedulerOptions options;
  FakeRunner fake;
  options.log = [](common::LogLevel, std::string_view) {};
  ProbeScheduler threaded(&fake, options);
  common::ProbeSpec spec = Spec();
  // The slot just passed at most a second ago at an offset equal to now's phase.
  const absl::Time t = absl::Now();
  const absl::Duration phase = absl::Seconds(absl::ToInt64Seconds(t - absl::UnixEpoch()) % 600 + 1);
  threaded.SetPolicyProbes({{"port-1", {"p", spec, phase}}}, t);
  threaded.Start();
  EXPECT_TRUE(testing::WaitFor([&] { return threaded.Statuses().count("port-1") == 1; },
                               absl::Seconds(10)));
  threaded.Stop();
  EXPECT_EQ(fake.cancels.load(), 1) << "Stop cancels the attempt in progress";
}

}  // namespace
}  // namespace rxfleet::agent
