// An experiment on active probe metrics over real gRPC on loopback: only hosts announcing the
// `probes` capability take part, their assignments carry the probe with staggered offsets and
// a rotation (three adapters share one iperf3 server and only one 1 s probe fits in a 3 s
// window), the status says so, and a guardrail on probe_udp_loss_ratio stops the lossy arm
// from probe results alone (the windows carry no passive traffic). Every wait is on a
// condition with a deadline.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

constexpr char kName[] = "probe-loss";

v1::Experiment ProbeExperiment() {
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
  spec->mutable_window_length()->set_seconds(3);
  spec->mutable_period_length()->set_seconds(3);
  spec->set_primary_metric("probe_rx_throughput_bps");
  v1::Guardrail* loss = spec->add_guardrails();
  loss->set_metric("probe_udp_loss_ratio");
  loss->set_comparator(v1::COMPARATOR_GREATER_THAN);
  loss->set_threshold(0.05);
  loss->set_min_adapters(2);
  loss->set_min_windows(2);
  spec->set_min_adapters_per_arm(2);
  spec->set_min_windows_per_arm(2);
  v1::ProbeSpec* probe = spec->mutable_probe();
  probe->set_server("127.0.0.1:5201");
  probe->set_protocol(v1::PROBE_PROTOCOL_UDP);
  probe->set_direction(v1::PROBE_DIRECTION_REVERSE);
  probe->mutable_duration()->set_seconds(1);
  probe->set_udp_rate_bps(10'000'000);
  return e;
}

// A host whose agent runs probes: it ACKs every bundle and, for every finished period of any
// assignment it got, sends one window without passive traffic whose probe ran if the window was the
// adapter's turn; the `short` arm loses half of the datagrams.
class ProbeAgent {
 public:
  ProbeAgent(const std::string& address, std::string host_id, int adapter_count)
      : agent_(address), host_id_(std::move(host_id)) {
    v1::AgentMessage hello;
    hello.mutable_hello()->set_host_id(host_id_);
    (*hello.mutable_hello()->mutable_labels())["board"] = "x86";
    hello.mutable_hello()->set_agent_version("test");
    for (const char* capability : {"experiments", "metric_windows", "probes"}) {
      hello.mutable_hello()->add_capabilities(capability);
    }
    v1::AgentMessage inventory;
    for (int i = 0; i < adapter_count; ++i) {
      *inventory.mutable_inventory()->add_adapters() =
          ReportedAdapter(absl::StrCat("port-", i + 1), v1::USB_SPEED_SUPER, 1024);
    }
    connected_ = agent_.Send(hello) && agent_.Send(inventory);
  }

  bool connected() const { return connected_; }
  TestAgent& agent() { return agent_; }
  int probes() const { return probes_; }

  void Pump() {
    std::optional<v1::PolicyBundle> bundle = agent_.last_bundle();
    if (!bundle.has_value()) return;
    if (bundle->nonce() != acked_nonce_) {
      agent_.Ack(*bundle);
      acked_nonce_ = bundle->nonce();
    }
    // Every assignment the agent got, not only the newest bundle's: the bundle of the next
    // period may arrive the moment a period ends, and the ended period still gets its window.
    std::vector<v1::ExperimentAssignment> assignments;
    for (const v1::ServerMessage& m : agent_.received()) {
      if (!m.has_bundle()) continue;
      for (const v1::ExperimentAssignment& a : m.bundle().assignments()) assignments.push_back(a);
    }
    const absl::Time now = absl::Now();
    for (const v1::ExperimentAssignment& a : assignments) {
      if (now < common::TimeFromProto(a.period_end_time()) ||
          !reported_.insert({a.adapter_id(), a.period_index()}).second) {
        continue;
      }
      v1::AgentMessage message;
      v1::MetricWindow* w = message.mutable_metric_window();
      w->set_adapter_id(a.adapter_id());
      w->set_experiment(a.experiment());
      w->set_arm(a.arm());
      w->set_period_index(a.period_index());
      *w->mutable_window_start_time() = a.period_start_time();
      w->mutable_window_duration()->set_seconds(3);
      w->set_valid(true);
      // The rotation rule of ExperimentAssignment.probe_rounds.
      const int64_t index = absl::ToUnixSeconds(common::TimeFromProto(a.period_start_time())) /
                            a.window_length().seconds();
      const uint32_t rounds = std::max<uint32_t>(1, a.probe_rounds());
      if (a.has_probe() && index % rounds == a.probe_round()) {
        v1::ProbeResult* p = w->mutable_probe();
        p->set_ok(true);
        *p->mutable_spec() = a.probe();
        p->set_throughput_bps(a.arm() == "short" ? 5e6 : 9.9e6);
        p->set_udp_loss_ratio(a.arm() == "short" ? 0.5 + 0.01 * (index % 3) : 0.01);
        p->set_udp_jitter_seconds(0.001);
        ++probes_;
      }
      agent_.Send(message);
    }
  }

 private:
  TestAgent agent_;
  const std::string host_id_;
  bool connected_ = false;
  std::string acked_nonce_;
  std::set<std::pair<std::string, uint32_t>> reported_;
  int probes_ = 0;
};

TEST(ProbeExperimentServiceTest, StaggeredProbesAndAProbeGuardrailOverGrpc) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  ProbeAgent prober(server->address(), "host-a", 3);
  TestAgent old_agent(server->address());  // no `probes` capability
  ASSERT_TRUE(prober.connected());
  ASSERT_TRUE(old_agent.Connect("host-b",
                                {ReportedAdapter("port-1", v1::USB_SPEED_SUPER, 1024),
                                 ReportedAdapter("port-2", v1::USB_SPEED_SUPER, 1024)},
                                "x86"));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> a = server->GetHost("host-a");
    absl::StatusOr<v1::Host> b = server->GetHost("host-b");
    return a.ok() && a->status().adapter_count() == 3 && b.ok() && b->status().adapter_count() == 2;
  }));

  v1::CreateExperimentRequest create;
  *create.mutable_experiment() = ProbeExperiment();
  v1::CreateExperimentResponse created;
  {
    grpc::ClientContext context;
    grpc::Status status = server->fleet().CreateExperiment(Deadline(&context), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(created.eligible_adapters_size(), 3);
  ASSERT_EQ(created.ineligible_adapters_size(), 2);
  for (const v1::IneligibleAdapter& i : created.ineligible_adapters()) {
    EXPECT_EQ(i.adapter().host_id(), "host-b");
    EXPECT_THAT(i.reason(), HasSubstr("does not run probes"));
  }

  // A second experiment on the same iperf3 server is refused.
  {
    v1::CreateExperimentRequest second = create;
    second.mutable_experiment()->mutable_metadata()->set_name("probe-loss-2");
    v1::CreateExperimentResponse response;
    grpc::ClientContext context;
    grpc::Status status = server->fleet().CreateExperiment(Deadline(&context), second, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("already probes against 127.0.0.1:5201"));
  }

  // One 1 s probe (+2 s margin) fits in a 3 s window: three adapters rotate in three rounds,
  // each starting 1 s into the window.
  ASSERT_TRUE(WaitFor([&] {
    prober.Pump();
    std::optional<v1::PolicyBundle> b = prober.agent().last_bundle();
    return b.has_value() && b->assignments_size() == 3;
  }));
  std::set<uint32_t> rounds;
  const std::optional<v1::PolicyBundle> bundle = prober.agent().last_bundle();
  ASSERT_TRUE(bundle.has_value());
  for (const v1::ExperimentAssignment& a : bundle->assignments()) {
    ASSERT_TRUE(a.has_probe()) << a.adapter_id();
    EXPECT_EQ(a.probe().server(), "127.0.0.1:5201");
    EXPECT_EQ(a.probe().protocol(), v1::PROBE_PROTOCOL_UDP);
    EXPECT_EQ(a.probe().udp_rate_bps(), 10'000'000u);
    EXPECT_EQ(common::DurationFromProto(a.probe_offset()), absl::Seconds(1));
    EXPECT_EQ(a.probe_rounds(), 3u);
    rounds.insert(a.probe_round());
  }
  EXPECT_EQ(rounds, (std::set<uint32_t>{0, 1, 2}));
  ASSERT_TRUE(WaitFor([&] {
    std::optional<v1::PolicyBundle> b = old_agent.last_bundle();
    return b.has_value();
  }));
  EXPECT_EQ(old_agent.last_bundle()->assignments_size(), 0);

  v1::Experiment experiment;
  {
    grpc::ClientContext context;
    v1::GetExperimentRequest request;
    request.set_name(kName);
    ASSERT_TRUE(server->fleet().GetExperiment(Deadline(&context), request, &experiment).ok());
  }
  bool condition = false;
  for (const v1::Condition& c : experiment.status().conditions()) {
    if (c.type() != "ProbeSchedule") continue;
    condition = true;
    EXPECT_EQ(c.reason(), "Rotating");
    EXPECT_THAT(c.message(), HasSubstr("1 probe of 1s (slots of 3s) fit in a 3s window"));
    EXPECT_THAT(c.message(), HasSubstr("3 adapters probe in 3 rounds"));
  }
  EXPECT_TRUE(condition);

  // The guardrail trips on the probes' UDP loss of `short`.
  bool guarded = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        prober.Pump();
        grpc::ClientContext context;
        v1::GetExperimentRequest request;
        request.set_name(kName);
        if (server->fleet().GetExperiment(Deadline(&context), request, &experiment).ok()) {
          guarded = experiment.status().stopped_arms_size() > 0;
        }
        return guarded;
      },
      absl::Seconds(90)))
      << "probes sent " << prober.probes();
  const v1::StoppedArm& stopped = experiment.status().stopped_arms(0);
  EXPECT_EQ(stopped.arm(), "short");
  EXPECT_EQ(stopped.reason(), "GuardrailTripped");
  EXPECT_THAT(stopped.message(), HasSubstr("probe_udp_loss_ratio"));
}

}  // namespace
}  // namespace rxfleet::server
