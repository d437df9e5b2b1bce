// Every server path that predicts an effect resolves with the precedence the agent applies
// (common/policy/precedence.h), experiments included: with a RUNNING experiment over real gRPC
// on loopback, apply and delete reports and dry runs, ListPolicies' effective counts,
// ExplainAdapter, CreateExperiment's eligibility, PromoteExperiment's affected adapters and the
// bundles' assignments agree with experiment > server policy > built-in default.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using testing::Deadline;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

constexpr char kExperiment[] = "hold-ab";

// Two arms whose holds no policy of this test and no built-in default uses; periods of ten
// minutes, so the arm in effect does not change during the test.
v1::Experiment HoldExperiment(const std::string& name) {
  v1::Experiment e;
  e.mutable_metadata()->set_name(name);
  v1::ExperimentSpec* spec = e.mutable_spec();
  for (auto [arm, hold] : {std::pair<const char*, uint32_t>{"a", 64}, {"b", 96}}) {
    v1::ExperimentArm* a = spec->add_arms();
    a->set_name(arm);
    a->mutable_settings()->set_hold_us(hold);
    a->set_weight(1);
  }
  spec->set_design(v1::EXPERIMENT_DESIGN_SWITCHBACK);
  spec->mutable_duration()->set_seconds(3600);
  spec->mutable_window_length()->set_seconds(60);
  spec->mutable_period_length()->set_seconds(600);
  spec->set_primary_metric("rx_throughput_bps");
  return e;
}

class PrecedenceServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = TestServer::Start();
    ASSERT_NE(server_, nullptr);
    agent_ = std::make_unique<TestAgent>(server_->address());
    ASSERT_TRUE(agent_->Connect("x86-1",
                                {ReportedAdapter("port-1", v1::USB_SPEED_SUPER, 32),
                                 ReportedAdapter("port-2", v1::USB_SPEED_SUPER, 32)},
                                "x86"));
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Host> host = server_->GetHost("x86-1");
      return host.ok() && host->status().adapter_count() == 2;
    }));
    v1::CreateExperimentRequest create;
    *create.mutable_experiment() = HoldExperiment(kExperiment);
    v1::CreateExperimentResponse created;
    grpc::ClientContext context;
    ASSERT_TRUE(server_->fleet().CreateExperiment(Deadline(&context), create, &created).ok());
    ASSERT_EQ(created.experiment().status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
    ASSERT_EQ(created.eligible_adapters_size(), 2);
    // The arm each adapter runs now, from its bundle.
    ASSERT_TRUE(WaitFor([&] {
      std::optional<v1::PolicyBundle> bundle = agent_->last_bundle();
      if (!bundle || bundle->assignments_size() != 2) return false;
      for (const v1::ExperimentAssignment& a : bundle->assignments()) {
        arm_hold_[a.adapter_id()] = a.settings().hold_us();
      }
      return true;
    }));
  }

  absl::StatusOr<v1::ApplyPolicyResponse> Apply(const std::string& name, int priority,
                                                uint32_t hold_us, bool dry_run,
                                                const std::string& adapter = "") {
    v1::ApplyPolicyRequest request;
    v1::Policy* policy = request.mutable_policy();
    policy->mutable_metadata()->set_name(name);
    policy->mutable_spec()->set_priority(priority);
    if (!adapter.empty()) policy->mutable_spec()->mutable_selector()->add_adapters(adapter);
    policy->mutable_spec()->mutable_settings()->set_hold_us(hold_us);
    request.set_dry_run(dry_run);
    v1::ApplyPolicyResponse response;
    grpc::ClientContext context;
    const grpc::Status status =
        server_->fleet().ApplyPolicy(Deadline(&context), request, &response);
    if (!status.ok()) return testing::ToAbsl(status);
    return response;
  }

  v1::ExplainAdapterResponse Explain(const std::string& adapter) {
    v1::ExplainAdapterRequest request;
    request.set_host_id("x86-1");
    request.set_name(adapter);
    v1::ExplainAdapterResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(server_->fleet().ExplainAdapter(Deadline(&context), request, &response).ok());
    return response;
  }

  v1::Policy ListedPolicy(const std::string& name) {
    v1::ListPoliciesResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(server_->fleet().ListPolicies(Deadline(&context), {}, &response).ok());
    for (const v1::Policy& p : response.policies()) {
      if (p.metadata().name() == name) return p;
    }
    ADD_FAILURE() << "policy " << name << " not listed";
    return {};
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<TestAgent> agent_;
  std::map<std::string, uint32_t> arm_hold_;
};

TEST_F(PrecedenceServiceTest, PolicyTheExperimentOutranksAffectsNothingWhileItRuns) {
  // Priority 0 ties with the experiment's priority 0: the experiment layer wins the tie.
  absl::StatusOr<v1::ApplyPolicyResponse> dry = Apply("long", 0, 512, /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_THAT(dry->affected_adapters(), IsEmpty());
  absl::StatusOr<v1::ApplyPolicyResponse> applied = Apply("long", 0, 512, /*dry_run=*/false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_THAT(applied->affected_adapters(), IsEmpty());
  EXPECT_EQ(applied->policy().status().matched_adapters(), 2u);
  EXPECT_EQ(applied->policy().status().effective_adapters(), 0u);

  // get policies: matched 2, effective 0, shadowed by the experiment.
  const v1::Policy listed = ListedPolicy("long");
  EXPECT_EQ(listed.status().matched_adapters(), 2u);
  EXPECT_EQ(listed.status().effective_adapters(), 0u);
  bool shadowed = false;
  for (const v1::Condition& c : listed.status().conditions()) {
    if (c.type() == "Shadowed") shadowed = c.status() == v1::CONDITION_STATUS_TRUE;
  }
  EXPECT_TRUE(shadowed);

  // Explain: the experiment decides the hold, with its assignment; the policy matches and
  // decides nothing.
  const v1::ExplainAdapterResponse explained = Explain("port-1");
  EXPECT_EQ(explained.expected().settings().hold_us(), arm_hold_["port-1"]);
  const v1::Provenance& from = explained.expected().provenance().at("hold_us");
  EXPECT_EQ(from.source(), v1::SETTING_SOURCE_EXPERIMENT);
  EXPECT_EQ(from.name(), kExperiment);
  EXPECT_EQ(from.arm(), explained.assignment().arm());
  EXPECT_EQ(explained.assignment().experiment(), kExperiment);
  ASSERT_EQ(explained.policies_size(), 1);
  EXPECT_TRUE(explained.policies(0).matched());
  EXPECT_THAT(explained.policies(0).decided_fields(), IsEmpty());

  // Deleting it would change nothing either.
  v1::DeletePolicyRequest remove;
  remove.set_name("long");
  remove.set_dry_run(true);
  v1::DeletePolicyResponse removed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server_->fleet().DeletePolicy(Deadline(&context), remove, &removed).ok());
  }
  EXPECT_THAT(removed.affected_adapters(), IsEmpty());
}

TEST_F(PrecedenceServiceTest, PolicyOutrankingTheExperimentTakesTheAdapterOut) {
  // Priority 100 on port-2 outranks the experiment: port-2 leaves it for the policy's hold.
  absl::StatusOr<v1::ApplyPolicyResponse> dry = Apply("pin", 100, 512, true, "port-2");
  ASSERT_TRUE(dry.ok()) << dry.status();
  ASSERT_EQ(dry->affected_adapters_size(), 1);
  EXPECT_EQ(dry->affected_adapters(0).adapter().name(), "port-2");
  EXPECT_EQ(dry->affected_adapters(0).before().hold_us(), arm_hold_["port-2"]);
  EXPECT_EQ(dry->affected_adapters(0).after().hold_us(), 512u);
  ASSERT_TRUE(Apply("pin", 100, 512, false, "port-2").ok());

  // The bundle no longer enrols port-2, the status counts one assigned adapter.
  ASSERT_TRUE(WaitFor([&] {
    std::optional<v1::PolicyBundle> bundle = agent_->last_bundle();
    return bundle && bundle->policies_size() == 1 && bundle->assignments_size() == 1 &&
           bundle->assignments(0).adapter_id() == "port-1";
  }));
  v1::GetExperimentRequest get;
  get.set_name(kExperiment);
  v1::Experiment experiment;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server_->fleet().GetExperiment(Deadline(&context), get, &experiment).ok());
  }
  EXPECT_EQ(experiment.status().assigned_adapters(), 1u);
  EXPECT_EQ(ListedPolicy("pin").status().effective_adapters(), 1u);

  const v1::ExplainAdapterResponse explained = Explain("port-2");
  EXPECT_EQ(explained.expected().settings().hold_us(), 512u);
  EXPECT_EQ(explained.expected().provenance().at("hold_us").source(),
            v1::SETTING_SOURCE_SERVER_POLICY);
  EXPECT_EQ(explained.expected().provenance().at("hold_us").priority(), 100);
  EXPECT_FALSE(explained.has_assignment());

  // A second experiment over the same adapters: none eligible, each with its reason.
  v1::CreateExperimentRequest create;
  *create.mutable_experiment() = HoldExperiment("hold-cd");
  create.set_dry_run(true);
  v1::CreateExperimentResponse created;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server_->fleet().CreateExperiment(Deadline(&context), create, &created).ok());
  }
  EXPECT_THAT(created.eligible_adapters(), IsEmpty());
  std::map<std::string, std::string> reasons;
  for (const v1::IneligibleAdapter& a : created.ineligible_adapters()) {
    reasons[a.adapter().name()] = a.reason();
  }
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_THAT(reasons["port-1"], HasSubstr("older experiment hold-ab"));
  EXPECT_EQ(reasons["port-2"], "server policy pin (priority 100) decides hold_us");
}

TEST_F(PrecedenceServiceTest, PromotionPredictsTheStateAfterTheExperiment) {
  ASSERT_TRUE(Apply("long", 0, 512, false).ok());
  // While the experiment runs, `long` decides nothing; once it ends, the promoted policy
  // (priority 0, name "hold-ab-a" before "long") replaces `long`'s 512 µs on both adapters.
  v1::PromoteExperimentRequest promote;
  promote.set_name(kExperiment);
  promote.set_arm("a");
  promote.set_dry_run(true);
  v1::PromoteExperimentResponse promoted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server_->fleet().PromoteExperiment(Deadline(&context), promote, &promoted).ok());
  }
  ASSERT_EQ(promoted.affected_adapters_size(), 2);
  for (const v1::AffectedAdapter& a : promoted.affected_adapters()) {
    EXPECT_EQ(a.before().hold_us(), 512u) << a.adapter().name();
    EXPECT_EQ(a.after().hold_us(), 64u) << a.adapter().name();
  }
}

TEST_F(PrecedenceServiceTest, AProbeOnlyPolicyDecidesTheProbeAndIsNotShadowed) {
  v1::ApplyPolicyRequest request;
  v1::Policy* policy = request.mutable_policy();
  policy->mutable_metadata()->set_name("probe-lab");
  policy->mutable_spec()->mutable_probe()->set_server("10.0.0.5");
  v1::ApplyPolicyResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        server_->fleet().ApplyPolicy(Deadline(&context), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // No settings: no register changes; the probe is the policy's whole effect.
  EXPECT_THAT(response.affected_adapters(), IsEmpty());
  const v1::Policy listed = ListedPolicy("probe-lab");
  EXPECT_EQ(listed.status().matched_adapters(), 2u);
  EXPECT_EQ(listed.status().effective_adapters(), 2u);
  for (const v1::Condition& c : listed.status().conditions()) {
    if (c.type() == "Shadowed") {
      EXPECT_EQ(c.status(), v1::CONDITION_STATUS_FALSE);
    }
  }
  EXPECT_EQ(listed.spec().probe().server(), "10.0.0.5");  // stored as written

  // A probe the agents could not run is refused with the field named.
  policy->mutable_spec()->mutable_probe()->set_protocol(v1::PROBE_PROTOCOL_UDP);
  grpc::ClientContext context;
  const grpc::Status refused = server_->fleet().ApplyPolicy(Deadline(&context), request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("spec.probe: probe.udpRate"));
}

}  // namespace
}  // namespace rxfleet::server
