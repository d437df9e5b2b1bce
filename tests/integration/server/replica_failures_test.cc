// Server replicas on one PostgreSQL database when something fails, as real processes with agents
// under rxfleet-emulate: kill -9 of the replica holding the `experiments` lease in the middle of
// an experiment (the other takes the lease, completes the experiment on time and reports every
// replica's windows), and the database unreachable under running agents (no replica exits, the
// agent streams stay up, writes fail with UNAVAILABLE; once it is back a policy reaches every
// agent and both replicas agree again).

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/proto/experiment.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/integration/server/fleet_processes.h"
#include "tests/support/postgres.h"

namespace rxfleet {
namespace {

using namespace integration;  // NOLINT(google-build-using-namespace): the test's processes

constexpr char kLeaseTaken[] = "took lease experiments";

// Switchback of two holds in four-second periods (one second of burn-in, one-second windows),
// segmented by board so that each replica's agents have a segment of their own.
constexpr char kExperiment[] = R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: lease-failover}
spec:
  selector: {chips: [rtl8922au]}
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  control: control
  design: switchback
  duration: 36s
  windowLength: 1s
  periodLength: 4s
  burnIn: 1s
  primaryMetric: rx_throughput_bps
  segments: [board]
)";

// How often `needle` occurs in `text`.
int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// The host is connected to `viewer` or another replica, as `viewer` lists it.
bool Connected(ServerProcess& viewer, const std::string& host) {
  std::optional<v1::Host> listed = viewer.Host(host);
  return listed.has_value() && listed->status().connected();
}

// The replica holding `host` as `viewer` lists it (status.replica is HOSTNAME:PORT).
bool HeldBy(ServerProcess& viewer, const std::string& host, const ServerProcess& holder) {
  std::optional<v1::Host> listed = viewer.Host(host);
  return listed.has_value() && listed->status().connected() &&
         absl::EndsWith(listed->status().replica(), absl::StrCat(":", holder.port()));
}

std::optional<v1::Experiment> GetExperiment(ServerProcess& server, const std::string& name) {
  v1::GetExperimentRequest request;
  request.set_name(name);
  v1::Experiment experiment;
  grpc::ClientContext context;
  if (!server.fleet().GetExperiment(WithDeadline(&context), request, &experiment).ok()) {
    return std::nullopt;
  }
  return experiment;
}

std::optional<v1::ExperimentReport> GetReport(ServerProcess& server, const std::string& name) {
  v1::GetExperimentReportRequest request;
  request.set_name(name);
  v1::ExperimentReport report;
  grpc::ClientContext context;
  if (!server.fleet().GetExperimentReport(WithDeadline(&context), request, &report).ok()) {
    return std::nullopt;
  }
  return report;
}

// Valid windows of every arm in the report's segment of `board` (0 if it has none).
uint64_t BoardWindows(const v1::ExperimentReport& report, const std::string& board) {
  uint64_t windows = 0;
  for (const v1::SegmentReport& segment : report.segments()) {
    const auto it = segment.segment().find("board");
    if (it == segment.segment().end() || it->second != board) continue;
    for (const v1::ArmReport& arm : segment.arms()) windows += arm.windows();
  }
  return windows;
}

TEST(ReplicaFailuresTest, KillingTheLeaseHolderMidExperimentHandsTheExperimentToTheOther) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  TempDir dir("rxfleet-replica-lease-test");
  rxfleet::testing::TestDatabase db;
  const std::vector<std::string> flags = {"--lease-ttl", "3s"};
  ServerProcess a(db.uri());
  ServerProcess b(db.uri());
  ASSERT_TRUE(a.Start(flags));
  ASSERT_TRUE(b.Start(flags)) << b.log();

  // Four RTL8922AU on each host; the Pi 5 streams to A only, the x86 host to B only.
  AgentProcess pi5(dir, "pi5-1", "experiment-pi5-usb3", "pi5");
  AgentProcess x86(dir, "x86-1", "experiment-x86-usb3", "x86");
  ASSERT_TRUE(pi5.Start(a.address(), {"--probe-target", "none"}));
  ASSERT_TRUE(x86.Start(b.address(), {"--probe-target", "none"}));
  ASSERT_TRUE(WaitFor(
      [&] {
        return HeldBy(a, "pi5-1", a) && HeldBy(b, "pi5-1", a) && HeldBy(a, "x86-1", b) &&
               HeldBy(b, "x86-1", b);
      },
      absl::Seconds(30)))
      << a.log() << b.log() << pi5.log() << x86.log();

  // Exactly one replica holds the lease.
  ASSERT_TRUE(WaitFor(
      [&] {
        return absl::StrContains(a.log(), kLeaseTaken) != absl::StrContains(b.log(), kLeaseTaken);
      },
      absl::Seconds(10)))
      << a.log() << b.log();
  const bool a_holds = absl::StrContains(a.log(), kLeaseTaken);
  ServerProcess& holder = a_holds ? a : b;
  ServerProcess& survivor = a_holds ? b : a;
  const std::string holder_board = a_holds ? "pi5" : "x86";
  const std::string survivor_board = a_holds ? "x86" : "pi5";

  // Created through the holder: the survivor knows the experiment from the database only.
  absl::StatusOr<experiments::Experiment> parsed =
      experiments::ParseExperiment(kExperiment, "lease-failover.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  v1::CreateExperimentRequest create;
  *create.mutable_experiment() = experiments::ExperimentToProto(*parsed);
  v1::CreateExperimentResponse created;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        holder.fleet().CreateExperiment(WithDeadline(&context), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_EQ(created.experiment().status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  const absl::Time start =
      absl::FromUnixSeconds(created.experiment().status().start_time().seconds()) +
      absl::Nanoseconds(created.experiment().status().start_time().nanos());
  const absl::Time end = start + absl::Seconds(36);

  // The survivor's report counts windows of both replicas' agents before the kill.
  uint64_t holder_windows_before = 0;
  uint64_t survivor_windows_before = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::ExperimentReport> report = GetReport(survivor, "lease-failover");
        if (!report.has_value()) return false;
        holder_windows_before = BoardWindows(*report, holder_board);
        survivor_windows_before = BoardWindows(*report, survivor_board);
        return holder_windows_before >= 8 && survivor_windows_before >= 8;
      },
      absl::Seconds(20)))
      << "windows on the survivor: " << holder_board << " " << holder_windows_before << ", "
      << survivor_board << " " << survivor_windows_before << "\n"
      << a.log() << b.log() << pi5.log() << x86.log();
  // Mid-experiment, between the switchback boundaries at 12 s and 16 s (the holder pushed the
  // earlier ones), with the windows the survivor counts by then.
  absl::SleepFor(start + absl::Seconds(14) - absl::Now());
  ASSERT_LT(absl::Now(), start + absl::Seconds(15)) << "too late to kill mid-experiment";
  std::optional<v1::ExperimentReport> before = GetReport(survivor, "lease-failover");
  ASSERT_TRUE(before.has_value());
  holder_windows_before = BoardWindows(*before, holder_board);
  survivor_windows_before = BoardWindows(*before, survivor_board);
  EXPECT_FALSE(absl::StrContains(survivor.log(), kLeaseTaken));

  const absl::Time killed = absl::Now();
  holder.Kill();
  // The survivor takes the lease within about 1.33 x TTL (4 s) of the death.
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains(survivor.log(), kLeaseTaken); }, absl::Seconds(10)))
      << survivor.log();
  EXPECT_LT(absl::Now() - killed, absl::Seconds(6));

  // It completes the experiment at start + duration.
  std::optional<v1::Experiment> done;
  ASSERT_TRUE(WaitFor(
      [&] {
        done = GetExperiment(survivor, "lease-failover");
        return done.has_value() && done->status().phase() == v1::EXPERIMENT_PHASE_COMPLETED;
      },
      end - absl::Now() + absl::Seconds(15)))
      << survivor.log();
  const absl::Time ended = absl::FromUnixSeconds(done->status().end_time().seconds()) +
                           absl::Nanoseconds(done->status().end_time().nanos());
  EXPECT_GE(ended, end - absl::Milliseconds(100)) << absl::FormatTime(ended);
  EXPECT_LE(ended, end + absl::Seconds(3))
      << "ended " << absl::FormatDuration(ended - end) << " after start + duration";

  // Its report counts the killed replica's windows stored before the kill and its own agents'
  // windows of the whole run.
  std::optional<v1::ExperimentReport> report = GetReport(survivor, "lease-failover");
  ASSERT_TRUE(report.has_value());
  SCOPED_TRACE(report->text());
  EXPECT_EQ(report->phase(), v1::EXPERIMENT_PHASE_COMPLETED);
  EXPECT_GE(BoardWindows(*report, holder_board), holder_windows_before);
  EXPECT_GT(BoardWindows(*report, survivor_board), survivor_windows_before);

  (a_holds ? x86 : pi5).Stop();
  (a_holds ? pi5 : x86).Stop();
  EXPECT_EQ(survivor.Stop(), 0);
}

TEST(ReplicaFailuresTest, TheDatabaseGoneUnderRunningAgentsAndBack) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  TempDir dir("rxfleet-replica-outage-test");
  // A server of the test's own, so that stopping it leaves the other tests' databases alone.
  rxfleet::testing::PrivatePostgres pg;
  ServerProcess a(pg.Uri("postgres"));
  ServerProcess b(pg.Uri("postgres"));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start()) << b.log();

  AgentProcess on_a(dir, "pi5-a", "rtl8922au-superspeed", "pi5");
  AgentProcess on_b(dir, "pi5-b", "rtl8922au-superspeed", "pi5");
  AgentProcess either(dir, "pi5-c", "rtl8922au-superspeed", "pi5");
  ASSERT_TRUE(on_a.Start(a.address()));
  ASSERT_TRUE(on_b.Start(b.address()));
  ASSERT_TRUE(either.Start(absl::StrCat(a.address(), ",", b.address())));
  std::vector<AgentProcess*> agents = {&on_a, &on_b, &either};
  const std::vector<std::string> hosts = {"pi5-a", "pi5-b", "pi5-c"};
  const auto all_acked = [&](ServerProcess& viewer, uint64_t version) {
    for (const std::string& host : hosts) {
      if (!viewer.Acked(host, version)) return false;
    }
    return true;
  };
  const auto logs = [&] {
    std::string text = absl::StrCat("--- A\n", a.log(), "--- B\n", b.log());
    for (AgentProcess* agent : agents)
      absl::StrAppend(&text, "--- ", agent->host_id(), "\n", agent->log());
    return text;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return all_acked(a, 1) && all_acked(b, 1) && HeldBy(b, "pi5-a", a) && HeldBy(a, "pi5-b", b);
      },
      absl::Seconds(30)))
      << logs();
  absl::StatusOr<v1::ApplyPolicyResponse> applied =
      a.Apply(HoldPolicy("pi5-usb3", 64, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_TRUE(WaitFor([&] { return all_acked(a, 2) && all_acked(b, 2); }, absl::Seconds(30)))
      << logs();
  std::map<std::string, int> connects;
  for (AgentProcess* agent : agents) {
    connects[agent->host_id()] = Occurrences(agent->log(), "connected to ");
  }

  ASSERT_TRUE(pg.Halt());
  const absl::Time halted = absl::Now();
  // Writes fail with UNAVAILABLE naming the database, through either replica.
  for (ServerProcess* server : {&a, &b}) {
    absl::StatusOr<v1::ApplyPolicyResponse> down =
        server->Apply(HoldPolicy("pi5-usb3", 128, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}));
    EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
    EXPECT_THAT(down.status().message(),
                ::testing::AllOf(::testing::HasSubstr("cannot store policy pi5-usb3"),
                                 ::testing::HasSubstr(":5432/postgres")))
        << down.status();
  }
  // Ten seconds down (several registry flushes and lease renewals fail) under queries: every
  // replica and agent keeps running, each replica still answers for the agents it holds, and
  // no agent stream ends.
  int queries = 0;
  while (absl::Now() - halted < absl::Seconds(10)) {
    ASSERT_TRUE(a.Alive()) << a.log();
    ASSERT_TRUE(b.Alive()) << b.log();
    for (AgentProcess* agent : agents) {
      ASSERT_TRUE(agent->child().running()) << agent->log();
    }
    EXPECT_TRUE(HeldBy(a, "pi5-a", a));
    EXPECT_TRUE(HeldBy(b, "pi5-b", b));
    for (int i = 0; i < 20; ++i) {
      for (ServerProcess* server : {&a, &b}) {
        for (const std::string& host : hosts) queries += server->Host(host).has_value() ? 1 : 0;
      }
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_GT(queries, 0);
  for (AgentProcess* agent : agents) {
    EXPECT_EQ(Occurrences(agent->log(), "connected to "), connects[agent->host_id()])
        << agent->log();
  }

  // Back: a policy applied through B reaches every agent; both replicas list every host with
  // the same bundle version ACKed.
  ASSERT_TRUE(pg.Resume());
  applied = b.Apply(HoldPolicy("pi5-usb3", 96, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}));
  ASSERT_TRUE(applied.ok()) << applied.status() << "\n" << logs();
  const uint64_t version = applied->bundle_version();
  EXPECT_EQ(version, 3u);
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!all_acked(a, version) || !all_acked(b, version)) return false;
        for (const std::string& host : hosts) {
          if (ObservedHold(a, host, "port-2-2") != 96u ||
              ObservedHold(b, host, "port-2-2") != 96u) {
            return false;
          }
        }
        return HeldBy(b, "pi5-a", a) && HeldBy(a, "pi5-b", b) && Connected(a, "pi5-c") &&
               Connected(b, "pi5-c");
      },
      absl::Seconds(30)))
      << logs();
  for (AgentProcess* agent : agents) {
    EXPECT_EQ(Occurrences(agent->log(), "connected to "), connects[agent->host_id()])
        << agent->log();
  }

  for (AgentProcess* agent : agents) EXPECT_EQ(RegisterHold(agent->Stop()), 96);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

}  // namespace
}  // namespace rxfleet
