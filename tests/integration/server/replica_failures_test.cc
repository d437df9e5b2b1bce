// Server replicas on one PostgreSQL database when something fails, as real processes with agents
// under rxfleet-emulate: kill -9 of the replica holding the `experiments` lease in the middle of
// an experiment (the other takes the lease, completes the experiment on time and reports every
// replica's windows), and the database unreachable under running agents (no replica exits, the
// agent streams stay up, writes fail with UNAVAILABLE; once it is back a policy reaches every
// agent and both replicas agree again), and kill -9 of the lease holder in the middle of a hold
// tuning's exploration (the other carries on from the stored planner state to the proposals,
// and its approval writes the registers).

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/proto/experiment.h"
#include "common/proto/tuning.h"
#include "common/tuning/hold_tuning.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/integration/server/fleet_processes.h"
#include "tests/support/fast_hold_tuning.h"
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

// The tuning is FastHoldTuningYaml (tests/support/fast_hold_tuning.h).
constexpr size_t kTuningAdaptersPerHost = 8;

std::vector<v1::Adapter> Adapters(ServerProcess& server, const std::string& label_selector) {
  v1::ListAdaptersRequest request;
  request.set_label_selector(label_selector);
  v1::ListAdaptersResponse response;
  grpc::ClientContext context;
  if (!server.fleet().ListAdapters(WithDeadline(&context), request, &response).ok()) return {};
  return {response.adapters().begin(), response.adapters().end()};
}

// Every adapter of the hosts `label_selector` matches (all of the host's) observes `hold_us`,
// as `server` lists them.
bool AllObserve(ServerProcess& server, const std::string& label_selector, uint32_t hold_us) {
  const std::vector<v1::Adapter> adapters = Adapters(server, label_selector);
  if (adapters.size() < kTuningAdaptersPerHost) return false;
  return std::all_of(adapters.begin(), adapters.end(), [&](const v1::Adapter& a) {
    return a.status().has_observed() && a.status().observed().decoded().hold_us() == hold_us;
  });
}

// How many of those adapters observe a hold other than `incumbent_us`.
size_t OffIncumbent(ServerProcess& server, const std::string& label_selector,
                    uint32_t incumbent_us) {
  const std::vector<v1::Adapter> adapters = Adapters(server, label_selector);
  return std::count_if(adapters.begin(), adapters.end(), [&](const v1::Adapter& a) {
    return a.status().has_observed() && a.status().observed().decoded().hold_us() != incumbent_us;
  });
}

// Some device of the emulator's state file had a hold other than `incumbent_us` written to its
// RX aggregation register.
bool RanAnotherHold(const nlohmann::json& state, int64_t incumbent_us) {
  if (!state.contains("devices")) return false;
  for (const nlohmann::json& device : state.at("devices")) {
    nlohmann::json one = {{"devices", nlohmann::json::array({device})}};
    for (int64_t hold : WrittenHolds(one)) {
      if (hold != incumbent_us) return true;
    }
  }
  return false;
}

std::optional<v1::HoldTuning> GetTuning(ServerProcess& server, const std::string& name) {
  v1::GetHoldTuningRequest request;
  request.set_name(name);
  v1::HoldTuning tuning;
  grpc::ClientContext context;
  if (!server.fleet().GetHoldTuning(WithDeadline(&context), request, &tuning).ok()) {
    return std::nullopt;
  }
  return tuning;
}

const v1::HoldTuningSegment* TuningSegment(const v1::HoldTuning& tuning, const std::string& board) {
  for (const v1::HoldTuningSegment& segment : tuning.status().segments()) {
    auto it = segment.segment().find("board");
    if (it != segment.segment().end() && it->second == board) return &segment;
  }
  return nullptr;
}

// How many HoldTuning events with `reason` `server` lists (repeats folded into one count).
int TuningEvents(ServerProcess& server, const std::string& reason) {
  v1::ListEventsRequest request;
  request.set_involved_object_kind("HoldTuning");
  request.set_page_size(1000);
  v1::ListEventsResponse response;
  grpc::ClientContext context;
  if (!server.fleet().ListEvents(WithDeadline(&context), request, &response).ok()) return -1;
  int n = 0;
  for (const v1::Event& e : response.events()) {
    if (e.reason() == reason) n += static_cast<int>(std::max<uint32_t>(e.count(), 1));
  }
  return n;
}

// Phase, round and candidates of every segment, for failure messages.
std::string TuningText(const std::optional<v1::HoldTuning>& tuning) {
  if (!tuning.has_value()) return "(no tuning)\n";
  std::string text = absl::StrCat("resource_version ", tuning->metadata().resource_version(),
                                  ", valid windows ", tuning->status().valid_windows(), "\n");
  for (const v1::HoldTuningSegment& s : tuning->status().segments()) {
    absl::StrAppend(&text, "  board=", s.segment().at("board"), " ", s.phase(), " round ",
                    s.round(), " committed ", s.committed_windows(), "/", s.budget_windows(),
                    " adapters ", s.adapters(), " explorers ", s.explorers(), ":");
    for (const v1::HoldTuningCandidate& c : s.candidates()) {
      absl::StrAppend(&text, " ", c.hold_us(), "us=", c.status());
    }
    absl::StrAppend(&text, "\n");
  }
  return text;
}

TEST(ReplicaFailuresTest, KillingTheLeaseHolderMidTuningHandsTheTuningToTheOther) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  TempDir dir("rxfleet-replica-tuning-test");
  rxfleet::testing::TestDatabase db;
  const std::vector<std::string> flags = {"--lease-ttl", "3s"};
  ServerProcess a(db.uri());
  ServerProcess b(db.uri());
  ASSERT_TRUE(a.Start(flags));
  ASSERT_TRUE(b.Start(flags)) << b.log();

  // SYNTHETIC traffic curves (tests/labs/tuning-*.yaml), eight RTL8922AU per host, each host a
  // segment of its own: x86 over USB 3 (incumbent 32 µs, optimum 128 µs) streams to A only,
  // Pi 1 over USB 2 (incumbent 1024 µs, 512 µs the best hold without drops) to B only.
  AgentProcess x86(dir, "x86-1", "tuning-x86-usb3", "x86");
  AgentProcess pi1(dir, "pi1-1", "tuning-pi1-usb2", "pi1");
  ASSERT_TRUE(x86.Start(a.address(), {"--probe-target", "none"}));
  ASSERT_TRUE(pi1.Start(b.address(), {"--probe-target", "none"}));
  const auto logs = [&] {
    return absl::StrCat("--- A\n", a.log(), "--- B\n", b.log(), "--- x86-1\n", x86.log(),
                        "--- pi1-1\n", pi1.log());
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return HeldBy(a, "x86-1", a) && HeldBy(b, "x86-1", a) && HeldBy(a, "pi1-1", b) &&
               HeldBy(b, "pi1-1", b) && AllObserve(a, "board=x86", 32) &&
               AllObserve(a, "board=pi1", 1024) && AllObserve(b, "board=x86", 32) &&
               AllObserve(b, "board=pi1", 1024);
      },
      absl::Seconds(60)))
      << logs();

  ASSERT_TRUE(WaitFor(
      [&] {
        return absl::StrContains(a.log(), kLeaseTaken) != absl::StrContains(b.log(), kLeaseTaken);
      },
      absl::Seconds(10)))
      << logs();
  const bool a_holds = absl::StrContains(a.log(), kLeaseTaken);
  ServerProcess& holder = a_holds ? a : b;
  ServerProcess& survivor = a_holds ? b : a;
  AgentProcess& holder_agent = a_holds ? x86 : pi1;

  // Created through the holder: the survivor knows the tuning from the database only.
  absl::StatusOr<tuning::HoldTuning> parsed = tuning::ParseHoldTuning(
      rxfleet::testing::FastHoldTuningYaml("lease-tuning"), "lease-tuning.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  v1::CreateHoldTuningRequest create;
  *create.mutable_tuning() = tuning::HoldTuningToProto(*parsed);
  v1::CreateHoldTuningResponse created;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        holder.fleet().CreateHoldTuning(WithDeadline(&context), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Both replicas give their own agents' adapters the explorers' holds: the non-holder computes
  // them from the stored planner state. Mid-exploration (both segments exploring, 40 valid
  // windows stored, about five periods of both segments' explorers, and the segments' start
  // recorded) the holder is killed.
  size_t x86_off = 0;
  size_t pi1_off = 0;
  std::optional<v1::HoldTuning> before;
  ASSERT_TRUE(WaitFor(
      [&] {
        x86_off = std::max(x86_off, OffIncumbent(a, "board=x86", 32));
        pi1_off = std::max(pi1_off, OffIncumbent(b, "board=pi1", 1024));
        before = GetTuning(survivor, "lease-tuning");
        if (x86_off == 0 || pi1_off == 0 || !before.has_value() ||
            before->status().segments_size() != 2 || before->status().valid_windows() < 40) {
          return false;
        }
        for (const v1::HoldTuningSegment& s : before->status().segments()) {
          if (s.phase() != "exploring") return false;
        }
        return TuningEvents(survivor, "SegmentStarted") == 2;
      },
      absl::Seconds(60)))
      << "off the incumbent: x86 " << x86_off << ", pi1 " << pi1_off << "\n"
      << TuningText(before) << logs();
  for (const v1::HoldTuningSegment& s : before->status().segments()) {
    ASSERT_EQ(s.phase(), "exploring") << TuningText(before);
  }
  std::cout << "killed the holder at:\n" << TuningText(before) << std::flush;
  EXPECT_FALSE(absl::StrContains(survivor.log(), kLeaseTaken));
  holder.Kill();

  // The survivor takes the lease and steps the tuning from the stored state: the status moves
  // on, no segment starts again, and what was decided stays decided.
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains(survivor.log(), kLeaseTaken); }, absl::Seconds(10)))
      << survivor.log();
  uint64_t version_before = 0;
  ASSERT_TRUE(absl::SimpleAtoi(before->metadata().resource_version(), &version_before));
  std::optional<v1::HoldTuning> resumed;
  ASSERT_TRUE(WaitFor(
      [&] {
        resumed = GetTuning(survivor, "lease-tuning");
        uint64_t version = 0;
        return resumed.has_value() &&
               absl::SimpleAtoi(resumed->metadata().resource_version(), &version) &&
               version > version_before;
      },
      absl::Seconds(20)))
      << survivor.log();
  // A segment still exploring is in the same exploration since the same time.
  for (const v1::HoldTuningSegment& s : resumed->status().segments()) {
    const v1::HoldTuningSegment* was = TuningSegment(*before, s.segment().at("board"));
    ASSERT_NE(was, nullptr) << TuningText(resumed);
    if (s.phase() != "exploring") continue;
    EXPECT_EQ(s.exploration(), was->exploration()) << TuningText(resumed);
    EXPECT_GE(s.round(), was->round()) << TuningText(resumed);
    EXPECT_EQ(s.last_transition_time().seconds(), was->last_transition_time().seconds())
        << TuningText(before) << TuningText(resumed);
  }
  // The killed replica's agent, given that replica's address only, ran challengers there; it
  // is restarted on the survivor.
  EXPECT_TRUE(RanAnotherHold(holder_agent.Stop(), a_holds ? 32 : 1024))
      << "no adapter of the holder's agent ran a challenger";
  ASSERT_TRUE(holder_agent.Start(survivor.address(), {"--probe-target", "none"}));

  std::optional<v1::HoldTuning> proposed;
  ASSERT_TRUE(WaitFor(
      [&] {
        proposed = GetTuning(survivor, "lease-tuning");
        if (!proposed.has_value() || proposed->status().segments_size() != 2) return false;
        for (const v1::HoldTuningSegment& s : proposed->status().segments()) {
          if (s.phase() == "exploring") return false;
        }
        return true;
      },
      absl::Seconds(150)))
      << TuningText(proposed) << logs();
  SCOPED_TRACE(TuningText(proposed));
  EXPECT_EQ(TuningEvents(survivor, "SegmentStarted"), 2);
  EXPECT_EQ(TuningEvents(survivor, "IncumbentChanged"), 0);
  for (const std::string board : {"x86", "pi1"}) {
    const v1::HoldTuningSegment* was = TuningSegment(*before, board);
    const v1::HoldTuningSegment* now = TuningSegment(*proposed, board);
    ASSERT_NE(was, nullptr) << board;
    ASSERT_NE(now, nullptr) << board;
    EXPECT_EQ(now->phase(), "proposed") << board << ": " << now->message();
    EXPECT_GE(now->round(), was->round()) << board;
    EXPECT_GE(now->committed_windows(), was->committed_windows()) << board;
    EXPECT_LE(now->committed_windows(), 240u) << board;
    EXPECT_EQ(now->budget_windows(), was->budget_windows()) << board;
    // A candidate dropped before the kill stays dropped, at the time it was.
    for (const v1::HoldTuningCandidate& c : was->candidates()) {
      if (c.status() == "active") continue;
      for (const v1::HoldTuningCandidate& d : now->candidates()) {
        if (d.hold_us() != c.hold_us()) continue;
        EXPECT_EQ(d.status(), c.status()) << board << " " << c.hold_us();
        EXPECT_EQ(d.change_time().seconds(), c.change_time().seconds())
            << board << " " << c.hold_us();
      }
    }
  }
  // One replica steps at a time: a guardrail drop is recorded at most once, and the survivor
  // records those it decided (events of the holder's last second before the kill may be lost
  // with it: they are written behind).
  size_t dropped_before = 0;
  size_t dropped = 0;
  for (const v1::HoldTuningSegment& s : before->status().segments()) {
    dropped_before += std::count_if(s.candidates().begin(), s.candidates().end(),
                                    [](const auto& c) { return c.status() == "guardrail"; });
  }
  for (const v1::HoldTuningSegment& s : proposed->status().segments()) {
    dropped += std::count_if(s.candidates().begin(), s.candidates().end(),
                             [](const auto& c) { return c.status() == "guardrail"; });
  }
  EXPECT_EQ(dropped, 2u);
  const int guardrail_events = TuningEvents(survivor, "GuardrailBroken");
  EXPECT_LE(guardrail_events, static_cast<int>(dropped));
  EXPECT_GE(guardrail_events, static_cast<int>(dropped - dropped_before));
  EXPECT_EQ(TuningSegment(*proposed, "x86")->proposal().hold_us(), 128u)
      << TuningSegment(*proposed, "x86")->evidence_text();
  EXPECT_EQ(TuningSegment(*proposed, "pi1")->proposal().hold_us(), 512u)
      << TuningSegment(*proposed, "pi1")->evidence_text();

  // Approved through the survivor: the policies put the proposed holds into every register.
  v1::ApproveHoldTuningRequest approve;
  approve.set_name("lease-tuning");
  v1::ApproveHoldTuningResponse approved;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        survivor.fleet().ApproveHoldTuning(WithDeadline(&context), approve, &approved);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return AllObserve(survivor, "board=x86", 128) && AllObserve(survivor, "board=pi1", 512);
      },
      absl::Seconds(30)))
      << logs();
  for (AgentProcess* agent : {&x86, &pi1}) {
    const nlohmann::json state = agent->Stop();
    ASSERT_TRUE(state.contains("devices")) << agent->host_id();
    ASSERT_EQ(state.at("devices").size(), kTuningAdaptersPerHost) << agent->host_id();
    for (const nlohmann::json& device : state.at("devices")) {
      EXPECT_EQ(device.at("hold_us").get<int64_t>(), agent == &x86 ? 128 : 512)
          << agent->host_id() << " " << device.at("name");
    }
  }
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
