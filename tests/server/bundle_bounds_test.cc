// Bundle and metadata bounds at the API, over real gRPC on loopback with a real SQLite file:
// a policy or experiment that would make a host's bundle larger than agents accept is refused
// (naming it and the excess) and stores nothing; annotations stay out of bundles; labels and
// annotations of policies and experiments are bounded; an ended experiment can be deleted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/metadata_bounds.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using testing::Deadline;
using ::testing::HasSubstr;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::ToAbsl;
using testing::WaitFor;

constexpr size_t kLimit = 64 << 10;

std::unique_ptr<TestServer> SmallBundleServer() {
  FleetServerOptions options;
  options.max_bundle_bytes = kLimit;
  return TestServer::Start(options);
}

// A policy of about 1.1 KB in the bundle that matches no adapter of the tests' hosts.
v1::Policy FillerPolicy(const std::string& name, size_t description = 1000) {
  v1::Policy policy;
  policy.mutable_metadata()->set_name(name);
  (*policy.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "none";
  policy.mutable_spec()->mutable_settings()->set_hold_us(64);
  policy.mutable_spec()->set_description(std::string(description, 'd'));
  return policy;
}

absl::StatusOr<v1::ApplyPolicyResponse> Apply(TestServer& server, const v1::Policy& policy,
                                              bool dry_run = false) {
  v1::ApplyPolicyRequest request;
  *request.mutable_policy() = policy;
  request.set_dry_run(dry_run);
  v1::ApplyPolicyResponse response;
  grpc::ClientContext context;
  grpc::Status status = server.fleet().ApplyPolicy(Deadline(&context), request, &response);
  if (!status.ok()) return ToAbsl(status);
  return response;
}

// Applies filler policies f0, f1, ... until one is refused; returns the refusal and how many
// were stored.
absl::Status FillUntilRefused(TestServer& server, int* stored) {
  for (*stored = 0; *stored < 200; ++*stored) {
    absl::StatusOr<v1::ApplyPolicyResponse> applied =
        Apply(server, FillerPolicy(absl::StrCat("f", *stored)));
    if (!applied.ok()) return applied.status();
  }
  return absl::OkStatus();
}

v1::Experiment HoldExperiment(const std::string& name) {
  v1::Experiment e;
  e.mutable_metadata()->set_name(name);
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
  spec->set_design(v1::EXPERIMENT_DESIGN_PARALLEL);
  spec->mutable_duration()->set_seconds(3600);
  spec->mutable_window_length()->set_seconds(60);
  spec->set_primary_metric("rx_throughput_bps");
  return e;
}

absl::StatusOr<v1::CreateExperimentResponse> Create(TestServer& server,
                                                    const v1::Experiment& experiment) {
  v1::CreateExperimentRequest request;
  *request.mutable_experiment() = experiment;
  v1::CreateExperimentResponse response;
  grpc::ClientContext context;
  grpc::Status status = server.fleet().CreateExperiment(Deadline(&context), request, &response);
  if (!status.ok()) return ToAbsl(status);
  return response;
}

TEST(BundleBoundsTest, APolicyThatWouldOverflowTheBundleIsRefusedAndStoresNothing) {
  std::unique_ptr<TestServer> server = SmallBundleServer();
  ASSERT_NE(server, nullptr);
  int stored = 0;
  const absl::Status refused = FillUntilRefused(*server, &stored);
  ASSERT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_GT(stored, 40);
  const std::string name = absl::StrCat("f", stored);
  EXPECT_THAT(refused.message(), HasSubstr(absl::StrCat("policy '", name, "' would make")));
  EXPECT_THAT(refused.message(),
              HasSubstr(absl::StrCat("over their limit of ", kLimit, " bytes by ")));
  EXPECT_THAT(refused.message(), HasSubstr("the change adds "));

  // The dry run says the same; nothing was stored.
  EXPECT_EQ(Apply(*server, FillerPolicy(name), /*dry_run=*/true).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::GetPolicyRequest get;
  get.set_name(name);
  v1::Policy policy;
  grpc::ClientContext context;
  EXPECT_EQ(server->fleet().GetPolicy(Deadline(&context), get, &policy).error_code(),
            grpc::StatusCode::NOT_FOUND);

  // A change that shrinks the bundle is accepted, and annotations do not count: 16 KB of
  // them fit into the room a shorter description made.
  ASSERT_TRUE(Apply(*server, FillerPolicy("f0", 0)).ok());
  v1::Policy noted = FillerPolicy("noted", 0);
  for (int i = 0; i < 4; ++i) {
    (*noted.mutable_metadata()->mutable_annotations())[absl::StrCat("note", i)] =
        std::string(4000, 'n');
  }
  absl::StatusOr<v1::ApplyPolicyResponse> applied = Apply(*server, noted);
  ASSERT_TRUE(applied.ok()) << applied.status();

  // The bundle an agent gets fits the limit and carries no annotations.
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1"));
  std::optional<v1::PolicyBundle> bundle = agent.WaitForBundle(applied->bundle_version());
  ASSERT_TRUE(bundle.has_value());
  v1::ServerMessage message;
  *message.mutable_bundle() = *bundle;
  EXPECT_LE(message.ByteSizeLong(), kLimit);
  bool found = false;
  for (const v1::Policy& p : bundle->policies()) {
    EXPECT_TRUE(p.metadata().annotations().empty()) << p.metadata().name();
    found = found || p.metadata().name() == "noted";
  }
  EXPECT_TRUE(found);
  // The API still returns them.
  get.set_name("noted");
  grpc::ClientContext again;
  ASSERT_TRUE(server->fleet().GetPolicy(Deadline(&again), get, &policy).ok());
  EXPECT_EQ(policy.metadata().annotations_size(), 4);
}

TEST(BundleBoundsTest, AnExperimentWhoseAssignmentsWouldOverflowAHostsBundleIsRefused) {
  std::unique_ptr<TestServer> server = SmallBundleServer();
  ASSERT_NE(server, nullptr);
  std::vector<v1::Adapter> adapters;
  for (int i = 0; i < 60; ++i) {
    adapters.push_back(ReportedAdapter(absl::StrCat("port-2-", i), v1::USB_SPEED_SUPER, 1024));
  }
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1", adapters));
  ASSERT_TRUE(WaitFor([&] {
    v1::ListAdaptersRequest request;
    v1::ListAdaptersResponse response;
    grpc::ClientContext context;
    return server->fleet().ListAdapters(Deadline(&context), request, &response).ok() &&
           response.adapters_size() == 60;
  }));
  // With room for them, the same experiment's dry run is accepted.
  v1::CreateExperimentRequest dry;
  *dry.mutable_experiment() = HoldExperiment("hold-ab");
  dry.set_dry_run(true);
  {
    v1::CreateExperimentResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().CreateExperiment(Deadline(&context), dry, &response).ok());
    EXPECT_EQ(response.eligible_adapters_size(), 60);
  }
  int stored = 0;
  ASSERT_EQ(FillUntilRefused(*server, &stored).code(), absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<v1::CreateExperimentResponse> created = Create(*server, HoldExperiment("hold-ab"));
  ASSERT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition) << created.status();
  EXPECT_THAT(created.status().message(),
              HasSubstr("experiment 'hold-ab' would make the bundle agents receive"));
  EXPECT_THAT(created.status().message(), HasSubstr("(host h1)"));
  EXPECT_THAT(created.status().message(), HasSubstr(absl::StrCat("limit of ", kLimit)));
  v1::GetExperimentRequest get;
  get.set_name("hold-ab");
  v1::Experiment experiment;
  grpc::ClientContext context;
  EXPECT_EQ(server->fleet().GetExperiment(Deadline(&context), get, &experiment).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST(BundleBoundsTest, APolicyWhoseProbeSlotsWouldOverflowAHostsBundleIsRefused) {
  std::unique_ptr<TestServer> server = SmallBundleServer();
  ASSERT_NE(server, nullptr);
  // h1 runs probes (Hello capability `probes`), h2 does not; 60 adapters each.
  TestAgent prober(server->address());
  TestAgent other(server->address());
  v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id("h1");
  hello.mutable_hello()->set_agent_version("test");
  hello.mutable_hello()->add_capabilities("probes");
  v1::AgentMessage inventory;
  std::vector<v1::Adapter> adapters;
  for (int i = 0; i < 60; ++i) {
    adapters.push_back(ReportedAdapter(absl::StrCat("port-2-", i), v1::USB_SPEED_SUPER, 1024));
    *inventory.mutable_inventory()->add_adapters() = adapters.back();
  }
  ASSERT_TRUE(prober.Send(hello) && prober.Send(inventory));
  ASSERT_TRUE(other.Connect("h2", adapters));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> h1 = server->GetHost("h1");
    absl::StatusOr<v1::Host> h2 = server->GetHost("h2");
    return h1.ok() && h1->status().adapter_count() == 60 && h2.ok() &&
           h2->status().adapter_count() == 60;
  }));
  // Fill the bundle, then free about 3.3 KB.
  int stored = 0;
  ASSERT_EQ(FillUntilRefused(*server, &stored).code(), absl::StatusCode::kFailedPrecondition);
  for (int i = 0; i < 3; ++i) {
    v1::DeletePolicyRequest del;
    del.set_name(absl::StrCat("f", i));
    v1::DeletePolicyResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().DeletePolicy(Deadline(&context), del, &response).ok());
  }
  // A small policy whose probe gives each of h1's 60 adapters a slot of about 90 bytes (its
  // long name is in every slot): the body fits, h1's slots do not.
  v1::Policy probe;
  probe.mutable_metadata()->set_name(std::string(60, 'p'));
  probe.mutable_spec()->mutable_probe()->set_server("10.0.0.5");
  absl::StatusOr<v1::ApplyPolicyResponse> refused = Apply(*server, probe, /*dry_run=*/true);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("would make the bundle agents receive"));
  EXPECT_THAT(refused.status().message(), HasSubstr("(host h1)"));
  // Without its probe (no slots) the same policy fits.
  probe.mutable_spec()->clear_probe();
  probe.mutable_spec()->mutable_settings()->set_hold_us(1024);
  (*probe.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "none";
  EXPECT_TRUE(Apply(*server, probe, /*dry_run=*/true).ok());
}

TEST(MetadataBoundsTest, PolicyAnnotationsAndLabelsAreBounded) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  v1::Policy many = FillerPolicy("many", 0);
  for (size_t i = 0; i <= kMaxAnnotations; ++i) {
    (*many.mutable_metadata()->mutable_annotations())[absl::StrCat("k", i)] = "v";
  }
  absl::Status refused = Apply(*server, many).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(),
              HasSubstr("policy 'many': metadata.annotations: 65 entries, at most 64 allowed"));

  v1::Policy one_long = FillerPolicy("one-long", 0);
  (*one_long.mutable_metadata()->mutable_annotations())["why"] = std::string(4097, 'x');
  refused = Apply(*server, one_long).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("metadata.annotations.why is 4097 characters long, "
                                           "at most 4096 allowed"));

  v1::Policy large = FillerPolicy("large", 0);
  for (int i = 0; i < 5; ++i) {
    (*large.mutable_metadata()->mutable_annotations())[absl::StrCat("k", i)] =
        std::string(4000, 'x');
  }
  refused = Apply(*server, large).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("bytes of keys and values, at most 16384 allowed"));

  v1::Policy bad_label = FillerPolicy("bad-label", 0);
  (*bad_label.mutable_metadata()->mutable_labels())["team"] = std::string(64, 'x');
  EXPECT_EQ(Apply(*server, bad_label).status().code(), absl::StatusCode::kInvalidArgument);

  v1::ListPoliciesRequest list;
  v1::ListPoliciesResponse policies;
  grpc::ClientContext context;
  ASSERT_TRUE(server->fleet().ListPolicies(Deadline(&context), list, &policies).ok());
  EXPECT_EQ(policies.policies_size(), 0);
}

TEST(MetadataBoundsTest, ExperimentAnnotationsAndLabelsAreBounded) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  v1::Experiment large = HoldExperiment("large");
  for (int i = 0; i < 5; ++i) {
    (*large.mutable_metadata()->mutable_annotations())[absl::StrCat("k", i)] =
        std::string(4000, 'x');
  }
  absl::Status refused = Create(*server, large).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("experiment 'large': metadata.annotations: "));

  v1::Experiment many_labels = HoldExperiment("many-labels");
  for (size_t i = 0; i <= kMaxObjectLabels; ++i) {
    (*many_labels.mutable_metadata()->mutable_labels())[absl::StrCat("k", i)] = "v";
  }
  refused = Create(*server, many_labels).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("experiment 'many-labels': metadata.labels: 65 "
                                           "entries, at most 64 allowed"));

  v1::Experiment noted = HoldExperiment("noted");
  (*noted.mutable_metadata()->mutable_annotations())["why"] = "short arm on pi5";
  ASSERT_TRUE(Create(*server, noted).ok());
}

TEST(DeleteExperimentTest, AnEndedExperimentIsDeletedForGoodAndItsNameIsFree) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(Create(*server, HoldExperiment("hold-ab")).ok());

  v1::DeleteExperimentRequest del;
  del.set_name("hold-ab");
  v1::Experiment deleted;
  {
    grpc::ClientContext context;
    grpc::Status running = server->fleet().DeleteExperiment(Deadline(&context), del, &deleted);
    EXPECT_EQ(running.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(running.error_message(), HasSubstr("stop it first"));
  }
  {
    v1::StopExperimentRequest stop;
    stop.set_name("hold-ab");
    v1::Experiment stopped;
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().StopExperiment(Deadline(&context), stop, &stopped).ok());
  }
  {
    del.set_resource_version("1");
    grpc::ClientContext context;
    EXPECT_EQ(server->fleet().DeleteExperiment(Deadline(&context), del, &deleted).error_code(),
              grpc::StatusCode::ABORTED);
    del.clear_resource_version();
  }
  {
    grpc::ClientContext context;
    grpc::Status status = server->fleet().DeleteExperiment(Deadline(&context), del, &deleted);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(deleted.status().phase(), v1::EXPERIMENT_PHASE_STOPPED);
  }
  {
    grpc::ClientContext context;
    EXPECT_EQ(server->fleet().DeleteExperiment(Deadline(&context), del, &deleted).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // Gone after a restart too, audited, and the name can be used again.
  server->Stop();
  ASSERT_TRUE(server->Restart());
  {
    v1::ListExperimentsRequest list;
    v1::ListExperimentsResponse experiments;
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().ListExperiments(Deadline(&context), list, &experiments).ok());
    EXPECT_EQ(experiments.experiments_size(), 0);
  }
  {
    v1::ListEventsRequest audit;
    audit.set_audit(true);
    v1::ListEventsResponse events;
    grpc::ClientContext context;
    ASSERT_TRUE(server->fleet().ListEvents(Deadline(&context), audit, &events).ok());
    int deletes = 0;
    for (const v1::Event& event : events.events()) {
      if (event.audit().action() == "DeleteExperiment") ++deletes;
    }
    EXPECT_EQ(deletes, 4);  // refused while running, stale version, deleted, not found
  }
  EXPECT_TRUE(Create(*server, HoldExperiment("hold-ab")).ok());
}

}  // namespace
}  // namespace rxfleet::server
