// An experiment end to end over real gRPC on loopback: protocol-level agents (Hello, inventory,
// ACKs, metric windows computed from the arms in their bundles) and FleetService calls against
// an in-process server with its SQLite database. Windows are one second long and so are the
// switchback periods, so the experiment advances in real time; every wait is on a condition
// with a deadline.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using testing::Deadline;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

constexpr char kName[] = "hold-ab";

v1::Experiment HoldExperiment() {
  v1::Experiment e;
  e.mutable_metadata()->set_name(kName);
  v1::ExperimentSpec* spec = e.mutable_spec();
  v1::ExperimentArm* control = spec->add_arms();
  control->set_name("control");
  control->mutable_settings()->set_hold_us(1024);
  control->set_weight(1);
  v1::ExperimentArm* shorter = spec->add_arms();
  shorter->set_name("short");
  shorter->mutable_settings()->set_hold_us(32);
  shorter->set_weight(1);
  spec->set_control_arm("control");
  spec->set_design(v1::EXPERIMENT_DESIGN_SWITCHBACK);
  spec->mutable_duration()->set_seconds(3600);
  spec->mutable_window_length()->set_seconds(1);
  spec->mutable_period_length()->set_seconds(1);
  spec->set_primary_metric("rx_throughput_bps");
  spec->add_secondary_metrics("rx_drop_ratio");
  v1::Guardrail* drops = spec->add_guardrails();
  drops->set_metric("rx_drop_ratio");
  drops->set_comparator(v1::COMPARATOR_GREATER_THAN);
  drops->set_threshold(0.05);
  drops->set_min_adapters(2);
  drops->set_min_windows(2);
  spec->add_segment_label_keys("board");
  spec->set_min_adapters_per_arm(2);
  spec->set_min_windows_per_arm(2);
  return e;
}

// One host: a TestAgent that ACKs every bundle and, for every assignment whose period has
// ended, reports one window covering the period with values that depend on the arm: `short`
// carries 50 % more traffic, and on boards named in `lossy` it drops a third of the frames.
class WindowAgent {
 public:
  WindowAgent(const std::string& address, std::string host_id, std::string board, int adapter_count)
      : agent_(address), host_id_(std::move(host_id)), board_(std::move(board)) {
    std::vector<v1::Adapter> adapters;
    for (int i = 0; i < adapter_count; ++i) {
      adapters.push_back(ReportedAdapter(absl::StrCat("port-", i + 1),
                                         board_ == "pi1" ? v1::USB_SPEED_HIGH : v1::USB_SPEED_SUPER,
                                         1024));
    }
    connected_ = agent_.Connect(host_id_, adapters, board_);
  }

  bool connected() const { return connected_; }
  TestAgent& agent() { return agent_; }

  // ACKs a new bundle and sends the windows of finished periods; returns the bundle.
  std::optional<v1::PolicyBundle> Pump() {
    std::optional<v1::PolicyBundle> bundle = agent_.last_bundle();
    if (!bundle.has_value()) return bundle;
    if (bundle->nonce() != acked_nonce_) {
      agent_.Ack(*bundle);
      acked_nonce_ = bundle->nonce();
    }
    const absl::Time now = absl::Now();
    for (const v1::ExperimentAssignment& a : bundle->assignments()) {
      const absl::Time end = common::TimeFromProto(a.period_end_time());
      if (now < end || !reported_.insert({a.adapter_id(), a.period_index()}).second) continue;
      agent_.Send(Window(a));
      ++sent_;
    }
    return bundle;
  }

  int sent() const { return sent_; }

 private:
  v1::AgentMessage Window(const v1::ExperimentAssignment& a) const {
    v1::AgentMessage message;
    v1::MetricWindow* w = message.mutable_metric_window();
    w->set_adapter_id(a.adapter_id());
    w->set_experiment(a.experiment());
    w->set_arm(a.arm());
    w->set_period_index(a.period_index());
    *w->mutable_window_start_time() = a.period_start_time();
    w->mutable_window_duration()->set_seconds(1);
    w->set_valid(true);
    const bool treated = a.arm() == "short";
    // Each adapter gains a slightly different amount, so the paired differences vary.
    const double adapter = a.adapter_id().back() - '0';
    const double bps = 100e6 + (treated ? 50e6 + adapter * 2e6 : 0) + (a.period_index() % 3) * 1e6;
    w->set_rx_bytes(static_cast<uint64_t>(bps / 8));
    w->set_rx_packets(10000);
    w->set_rx_dropped(treated && board_ == "pi1" ? 5000 : 10);
    w->set_busiest_core_ratio(0.2);
    w->set_host_cpu_ratio(0.1);
    return message;
  }

  TestAgent agent_;
  const std::string host_id_;
  const std::string board_;
  bool connected_ = false;
  std::string acked_nonce_;
  std::set<std::pair<std::string, uint32_t>> reported_;
  int sent_ = 0;
};

std::map<std::string, std::string> ArmsOf(const v1::PolicyBundle& bundle) {
  std::map<std::string, std::string> arms;
  for (const v1::ExperimentAssignment& a : bundle.assignments()) arms[a.adapter_id()] = a.arm();
  return arms;
}

TEST(ExperimentServiceTest, RunsReportsGuardsAndStopsOverGrpc) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  WindowAgent pi5(server->address(), "host-a", "pi5", 3);
  WindowAgent pi1(server->address(), "host-b", "pi1", 2);
  ASSERT_TRUE(pi5.connected() && pi1.connected());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> b = server->GetHost("host-b");
    return b.ok() && b->status().adapter_count() == 2;
  }));

  // A duplicate-free, valid experiment starts at once and every adapter is eligible.
  v1::CreateExperimentRequest create;
  *create.mutable_experiment() = HoldExperiment();
  v1::CreateExperimentResponse created;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().CreateExperiment(Deadline(&context), create, &created).ok());
  }
  EXPECT_EQ(created.experiment().status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_NE(created.experiment().status().seed(), 0u);
  EXPECT_EQ(created.eligible_adapters_size(), 5);
  {
    grpc::ClientContext context;
    v1::CreateExperimentResponse again;
    EXPECT_EQ(server->fleet().CreateExperiment(Deadline(&context), create, &again).error_code(),
              grpc::StatusCode::ALREADY_EXISTS);
  }

  // The bundles carry one assignment per adapter, with the window and period timing.
  ASSERT_TRUE(WaitFor([&] {
    std::optional<v1::PolicyBundle> b = pi5.Pump();
    return b.has_value() && b->assignments_size() == 3;
  }));
  const v1::ExperimentAssignment first = pi5.agent().last_bundle()->assignments(0);
  EXPECT_EQ(first.experiment(), kName);
  EXPECT_EQ(first.window_length().seconds(), 1);
  EXPECT_EQ(common::TimeFromProto(first.period_end_time()) -
                common::TimeFromProto(first.period_start_time()),
            absl::Seconds(1));
  EXPECT_EQ(first.settings().hold_us(), first.arm() == "short" ? 32u : 1024u);

  // Windows flow in; the report shows the throughput gain on pi5 with an interval above zero,
  // and the guardrail stops `short` on pi1, where it drops a third of the frames.
  v1::ExperimentReport report;
  bool gain_shown = false;
  bool guarded = false;
  v1::Experiment experiment;
  ASSERT_TRUE(WaitFor(
      [&] {
        pi5.Pump();
        pi1.Pump();
        if (!gain_shown) {
          grpc::ClientContext context;
          v1::GetExperimentReportRequest request;
          request.set_name(kName);
          if (server->fleet().GetExperimentReport(Deadline(&context), request, &report).ok()) {
            for (const v1::SegmentReport& segment : report.segments()) {
              if (segment.segment().at("board") != "pi5") continue;
              for (const v1::ArmComparison& c : segment.comparisons()) {
                if (c.metric() == "rx_throughput_bps" && c.ci95_low() > 0 && c.conclusive()) {
                  gain_shown = true;
                }
              }
            }
          }
        }
        if (!guarded) {
          grpc::ClientContext context;
          v1::GetExperimentRequest request;
          request.set_name(kName);
          if (server->fleet().GetExperiment(Deadline(&context), request, &experiment).ok()) {
            guarded = experiment.status().stopped_arms_size() > 0;
          }
        }
        return gain_shown && guarded;
      },
      absl::Seconds(60)))
      << "gain shown " << gain_shown << ", guardrail " << guarded << ", windows sent "
      << pi5.sent() + pi1.sent();
  EXPECT_NE(report.text().find("rx_throughput_bps"), std::string::npos);
  EXPECT_EQ(report.phase(), v1::EXPERIMENT_PHASE_RUNNING);
  ASSERT_EQ(experiment.status().stopped_arms_size(), 1);
  const v1::StoppedArm& stopped = experiment.status().stopped_arms(0);
  EXPECT_EQ(stopped.arm(), "short");
  EXPECT_EQ(stopped.reason(), "GuardrailTripped");
  EXPECT_EQ(stopped.segment().at("board"), "pi1");
  EXPECT_EQ(experiment.status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_GT(experiment.status().valid_windows(), 0u);

  // From now on pi1's adapters run control in every period, while pi5 keeps both arms.
  const uint64_t after_stop = pi1.agent().last_bundle()->version();
  std::set<uint64_t> pi1_bundles;
  std::set<std::string> pi5_arms;
  ASSERT_TRUE(WaitFor(
      [&] {
        pi5.Pump();
        std::optional<v1::PolicyBundle> b = pi1.Pump();
        if (b.has_value() && b->version() > after_stop && b->assignments_size() == 2) {
          for (const auto& [adapter, arm] : ArmsOf(*b)) EXPECT_EQ(arm, "control") << adapter;
          pi1_bundles.insert(b->version());
        }
        for (const auto& [adapter, arm] : ArmsOf(*pi5.agent().last_bundle())) {
          pi5_arms.insert(arm);
        }
        return pi1_bundles.size() >= 3 && pi5_arms.size() == 2;
      },
      absl::Seconds(30)));

  // Stop: the experiment is STOPPED and the next bundle has no assignments.
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  stop.set_reason("enough data");
  v1::Experiment stopped_experiment;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().StopExperiment(Deadline(&context), stop, &stopped_experiment).ok());
  }
  EXPECT_EQ(stopped_experiment.status().phase(), v1::EXPERIMENT_PHASE_STOPPED);
  EXPECT_TRUE(stopped_experiment.status().has_end_time());
  ASSERT_TRUE(WaitFor([&] {
    std::optional<v1::PolicyBundle> b = pi5.Pump();
    return b.has_value() && b->assignments_size() == 0;
  }));
  {
    grpc::ClientContext context;
    v1::Experiment again;
    EXPECT_EQ(server->fleet().StopExperiment(Deadline(&context), stop, &again).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext context;
    v1::ListExperimentsRequest request;
    request.set_phase(v1::EXPERIMENT_PHASE_STOPPED);
    v1::ListExperimentsResponse list;
    ASSERT_TRUE(server->fleet().ListExperiments(Deadline(&context), request, &list).ok());
    ASSERT_EQ(list.experiments_size(), 1);
    EXPECT_EQ(list.experiments(0).metadata().name(), kName);
  }
  {
    grpc::ClientContext context;
    v1::ListEventsRequest request;
    request.set_involved_object_kind("Experiment");
    v1::ListEventsResponse events;
    ASSERT_TRUE(server->fleet().ListEvents(Deadline(&context), request, &events).ok());
    std::set<std::string> reasons;
    for (const v1::Event& event : events.events()) reasons.insert(event.reason());
    EXPECT_THAT(reasons, ::testing::IsSupersetOf({"Created", "GuardrailTripped", "Stopped"}));
  }
}

TEST(ExperimentServiceTest, BadWindowsAreDroppedWithoutEndingTheStream) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("host-a", {ReportedAdapter("port-1", v1::USB_SPEED_SUPER, 1024)}));
  ASSERT_TRUE(agent.WaitForBundle(1).has_value());
  v1::AgentMessage message;
  v1::MetricWindow* w = message.mutable_metric_window();
  w->set_adapter_id("port-1");
  w->set_experiment("no-such-experiment");
  w->set_arm("control");
  w->mutable_window_duration()->set_seconds(1);
  ASSERT_TRUE(agent.Send(message));
  w->set_adapter_id("port-9");
  ASSERT_TRUE(agent.Send(message));
  // The stream stays open: a later inventory is still processed.
  v1::AgentMessage inventory;
  *inventory.mutable_inventory()->add_adapters() =
      ReportedAdapter("port-2", v1::USB_SPEED_SUPER, 1024);
  ASSERT_TRUE(agent.Send(inventory));
  // The host keeps one adapter throughout (port-1, then port-2), so the wait is for port-2
  // itself: the inventory is applied on the server's own thread, after Send returns.
  v1::GetAdapterRequest request;
  request.set_host_id("host-a");
  request.set_name("port-2");
  EXPECT_TRUE(WaitFor([&] {
    v1::Adapter adapter;
    grpc::ClientContext context;
    return server->fleet().GetAdapter(Deadline(&context), request, &adapter).ok();
  }));
  EXPECT_FALSE(agent.ended());
}

// An adapter an agent reports for an observe-only chip family.
v1::Adapter ObservedAdapter(const std::string& id, const std::string& family,
                            const std::string& chip, uint32_t vid, uint32_t pid) {
  v1::Adapter adapter = ReportedAdapter(id, v1::USB_SPEED_SUPER, 0, false);
  adapter.mutable_status()->set_vid(vid);
  adapter.mutable_status()->set_pid(pid);
  adapter.mutable_status()->clear_layout();
  adapter.mutable_status()->set_family(family);
  adapter.mutable_status()->set_chip(chip);
  adapter.mutable_status()->set_managed(false);
  adapter.mutable_status()->clear_desired();
  adapter.mutable_status()->set_state(v1::ADAPTER_STATE_OBSERVED);
  return adapter;
}

TEST(ExperimentServiceTest, HoldsOnObserveOnlyFamiliesAreRefusedWithTheAdaptersNamed) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  v1::Adapter rtw89 = ReportedAdapter("port-2-5", v1::USB_SPEED_SUPER, 1024);
  rtw89.mutable_status()->set_family("rtw89");
  rtw89.mutable_status()->set_managed(true);
  ASSERT_TRUE(agent.Connect(
      "host-a", {ObservedAdapter("port-2-4", "mt76", "mt7921au", 0x0e8d, 0x7961),
                 ObservedAdapter("port-2-2", "rtw88", "rtl8822bu", 0x0bda, 0xb812), rtw89}));
  ASSERT_TRUE(agent.WaitForBundle(1).has_value());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("host-a");
    return host.ok() && host->status().adapter_count() == 3;
  }));

  // A policy selecting family mt76 with a hold: refused, the adapter named.
  v1::AdapterSelector mt76;
  mt76.add_families("mt76");
  absl::StatusOr<v1::ApplyPolicyResponse> refused = server->ApplyHold("mt-hold", 32, mt76);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("policy 'mt-hold'"));
  EXPECT_THAT(refused.status().message(), HasSubstr("host-a/port-2-4 (mt76 mt7921au)"));
  EXPECT_THAT(refused.status().message(), HasSubstr("families lists mt76"));
  EXPECT_THAT(refused.status().message(), Not(HasSubstr("port-2-5")));
  // A policy for every adapter names both observe-only ones; one for rtw89 is accepted.
  absl::StatusOr<v1::ApplyPolicyResponse> all = server->ApplyHold("all", 32);
  ASSERT_EQ(all.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(all.status().message(), HasSubstr("host-a/port-2-2 (rtw88 rtl8822bu)"));
  EXPECT_THAT(all.status().message(), HasSubstr("host-a/port-2-4"));
  v1::AdapterSelector managed;
  managed.add_families("rtw89");
  EXPECT_TRUE(server->ApplyHold("rtw89-only", 32, managed).ok());
  v1::AdapterSelector bad;
  bad.add_families("ath9k");
  EXPECT_EQ(server->ApplyHold("bad", 32, bad).status().code(), absl::StatusCode::kInvalidArgument);

  // An experiment over every adapter: a dry run lists the observe-only ones as ineligible with
  // the reason; the real create is refused naming them.
  v1::CreateExperimentRequest request;
  *request.mutable_experiment() = HoldExperiment();
  request.set_dry_run(true);
  v1::CreateExperimentResponse dry;
  {
    grpc::ClientContext context;
    const grpc::Status status = server->fleet().CreateExperiment(Deadline(&context), request, &dry);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_EQ(dry.eligible_adapters_size(), 1);
  EXPECT_EQ(dry.eligible_adapters(0).name(), "port-2-5");
  ASSERT_EQ(dry.ineligible_adapters_size(), 2);
  std::set<std::string> ineligible;
  for (const auto& entry : dry.ineligible_adapters()) {
    ineligible.insert(entry.adapter().name());
    EXPECT_THAT(entry.reason(), HasSubstr("observe-only chip family"));
  }
  EXPECT_EQ(ineligible, (std::set<std::string>{"port-2-2", "port-2-4"}));
  request.set_dry_run(false);
  v1::CreateExperimentResponse created;
  grpc::ClientContext context;
  const grpc::Status status =
      server->fleet().CreateExperiment(Deadline(&context), request, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("host-a/port-2-4 (mt76 mt7921au)"));
  EXPECT_THAT(status.error_message(), HasSubstr("families: [rtw89]"));
}

// Regression: an adapter quarantined for re-enumerating too often (the agent writes nothing to
// it) was counted as eligible, so its windows measured the hold it already had.
TEST(ExperimentServiceTest, QuarantinedAdaptersAreIneligibleWithTheReason) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  v1::Adapter stable = ReportedAdapter("port-2-5", v1::USB_SPEED_SUPER, 1024);
  v1::Adapter looping = ReportedAdapter("port-2-6", v1::USB_SPEED_SUPER, 1024);
  looping.mutable_status()->set_quarantined(true);
  ASSERT_TRUE(agent.Connect("host-a", {stable, looping}));
  ASSERT_TRUE(agent.WaitForBundle(1).has_value());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("host-a");
    return host.ok() && host->status().adapter_count() == 2;
  }));
  v1::CreateExperimentRequest request;
  *request.mutable_experiment() = HoldExperiment();
  request.set_dry_run(true);
  v1::CreateExperimentResponse dry;
  grpc::ClientContext context;
  const grpc::Status status = server->fleet().CreateExperiment(Deadline(&context), request, &dry);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(dry.eligible_adapters_size(), 1);
  EXPECT_EQ(dry.eligible_adapters(0).name(), "port-2-5");
  ASSERT_EQ(dry.ineligible_adapters_size(), 1);
  EXPECT_EQ(dry.ineligible_adapters(0).adapter().name(), "port-2-6");
  EXPECT_THAT(dry.ineligible_adapters(0).reason(), HasSubstr("quarantined"));
}

}  // namespace
}  // namespace rxfleet::server
