// server/api/fleet_service over loopback: validation, optimistic concurrency, dry runs,
// explain, lists with selectors and pages, events, experiments, HTTP, persistence.
#include "server/api/fleet_service.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/server/test_server.h"
#include "tests/support/process.h"

namespace rxfleet::server {
namespace {

using testing::Deadline;
using ::testing::HasSubstr;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::ToAbsl;
using testing::WaitFor;

v1::AdapterSelector Speeds(std::initializer_list<v1::UsbSpeed> speeds) {
  v1::AdapterSelector selector;
  for (v1::UsbSpeed speed : speeds) selector.add_usb_speeds(speed);
  return selector;
}

// A server with two connected test agents: h1 (board pi5) with a SuperSpeed and a high-speed
// adapter, h2 (board pi1) with a high-speed adapter. Agents report the built-in default holds.
class FleetServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = TestServer::Start();
    ASSERT_NE(server_, nullptr);
    h1_ = std::make_unique<TestAgent>(server_->address());
    ASSERT_TRUE(h1_->Connect("h1",
                             {ReportedAdapter("port-2-2", v1::USB_SPEED_SUPER, 32),
                              ReportedAdapter("port-1-1", v1::USB_SPEED_HIGH, 1024)},
                             "pi5"));
    h2_ = std::make_unique<TestAgent>(server_->address());
    ASSERT_TRUE(h2_->Connect("h2", {ReportedAdapter("port-1-1", v1::USB_SPEED_HIGH, 1024)}, "pi1"));
    ASSERT_TRUE(h1_->WaitForBundle(1).has_value());
    ASSERT_TRUE(h2_->WaitForBundle(1).has_value());
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Host> a = server_->GetHost("h1");
      absl::StatusOr<v1::Host> b = server_->GetHost("h2");
      return a.ok() && b.ok() && a->status().adapter_count() == 2 &&
             b->status().adapter_count() == 1;
    }));
  }

  absl::StatusOr<v1::ExplainAdapterResponse> Explain(const std::string& host,
                                                     const std::string& adapter) {
    v1::ExplainAdapterRequest request;
    request.set_host_id(host);
    request.set_name(adapter);
    v1::ExplainAdapterResponse response;
    grpc::ClientContext context;
    grpc::Status status = server_->fleet().ExplainAdapter(Deadline(&context), request, &response);
    if (!status.ok()) return ToAbsl(status);
    return response;
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<TestAgent> h1_, h2_;
};

TEST_F(FleetServiceTest, ASecondServerCannotShareTheDatabase) {
  // Found by running two servers on one file: both started, each with its own bundle versions.
  FleetServerOptions options = server_->options();
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<FleetServer>> second = FleetServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another rxfleet-server"));
  // Once the first has stopped, the database is free again.
  server_->Stop();
  second = FleetServer::Start(options);
  EXPECT_TRUE(second.ok()) << second.status();
}

TEST_F(FleetServiceTest, InvalidPoliciesAreRejectedWithTheField) {
  absl::StatusOr<v1::ApplyPolicyResponse> bad = server_->ApplyHold("too-long", 9000);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("policy 'too-long'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("9000"));
  EXPECT_EQ(server_->ApplyHold("Not_A_Name", 32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server_->ApplyHold("", 32).status().message(), HasSubstr("metadata.name"));
  v1::ApplyPolicyRequest empty;
  v1::ApplyPolicyResponse response;
  grpc::ClientContext context;
  const grpc::Status no_policy = server_->fleet().ApplyPolicy(Deadline(&context), empty, &response);
  EXPECT_EQ(no_policy.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_policy.error_message(), HasSubstr("policy is required"));
}

TEST_F(FleetServiceTest, ConcurrentAppliesWithTheSameResourceVersionOneWins) {
  absl::StatusOr<v1::ApplyPolicyResponse> created = server_->ApplyHold("p", 32);
  ASSERT_TRUE(created.ok()) << created.status();
  std::string version = created->policy().metadata().resource_version();
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> ok = 0, aborted = 0;
    std::string message;
    std::string winner_version;
    absl::Mutex mu;
    std::vector<std::thread> writers;
    for (int i = 0; i < 2; ++i) {
      writers.emplace_back([&, i] {
        absl::StatusOr<v1::ApplyPolicyResponse> r =
            server_->ApplyHold("p", static_cast<uint32_t>(64 + 32 * (2 * round + i)), {}, version);
        absl::MutexLock lock(&mu);
        if (r.ok()) {
          ++ok;
          winner_version = r->policy().metadata().resource_version();
        } else if (r.status().code() == absl::StatusCode::kAborted) {
          ++aborted;
          message = std::string(r.status().message());
        }
      });
    }
    for (std::thread& t : writers) t.join();
    ASSERT_EQ(ok.load(), 1) << "round " << round;
    ASSERT_EQ(aborted.load(), 1) << "round " << round;
    EXPECT_THAT(message,
                HasSubstr(absl::StrCat("policy p was modified (resource version ", winner_version,
                                       ", you have ", version, "); get it again and retry")));
    version = winner_version;
  }
  // Empty resource version: unconditional.
  EXPECT_TRUE(server_->ApplyHold("p", 32).ok());
}

TEST_F(FleetServiceTest, DryRunComputesTheEffectWithoutStoringOrPushing) {
  v1::ApplyPolicyRequest request;
  request.set_dry_run(true);
  v1::Policy* policy = request.mutable_policy();
  policy->mutable_metadata()->set_name("usb2-short");
  *policy->mutable_spec()->mutable_selector() = Speeds({v1::USB_SPEED_HIGH});
  policy->mutable_spec()->mutable_settings()->set_hold_us(64);
  v1::ApplyPolicyResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->fleet().ApplyPolicy(Deadline(&context), request, &response).ok());
  EXPECT_TRUE(response.created());
  EXPECT_EQ(response.bundle_version(), 0u);
  ASSERT_EQ(response.affected_adapters_size(), 2);  // the two high-speed adapters
  for (const v1::AffectedAdapter& affected : response.affected_adapters()) {
    EXPECT_EQ(affected.adapter().name(), "port-1-1");
    EXPECT_EQ(affected.before().hold_us(), 1024u);
    EXPECT_EQ(affected.after().hold_us(), 64u);
  }
  v1::GetPolicyRequest get;
  get.set_name("usb2-short");
  v1::Policy stored;
  grpc::ClientContext get_context;
  EXPECT_EQ(server_->fleet().GetPolicy(Deadline(&get_context), get, &stored).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(h1_->last_bundle().has_value());
  EXPECT_EQ(h1_->last_bundle()->version(), 1u);
}

TEST_F(FleetServiceTest, ApplyGetListDeleteWithStatusAndPages) {
  ASSERT_TRUE(server_->ApplyHold("a-usb3", 64, Speeds({v1::USB_SPEED_SUPER})).ok());
  ASSERT_TRUE(server_->ApplyHold("b-usb2", 2048, Speeds({v1::USB_SPEED_HIGH})).ok());
  v1::AdapterSelector pi1;
  (*pi1.mutable_match_labels())["board"] = "pi1";
  ASSERT_TRUE(server_->ApplyHold("a-pi1", 4096, pi1).ok());

  // Status: b-usb2 matches both high-speed adapters, but on h2 a-pi1 decides the hold (equal
  // priority and layer: the smaller name wins).
  v1::GetPolicyRequest get;
  get.set_name("b-usb2");
  v1::Policy b;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->fleet().GetPolicy(Deadline(&context), get, &b).ok());
  EXPECT_EQ(b.status().matched_adapters(), 2u);
  EXPECT_EQ(b.status().effective_adapters(), 1u);
  EXPECT_EQ(b.metadata().generation(), 1);

  // Pages of one.
  std::vector<std::string> names;
  std::string token;
  do {
    v1::ListPoliciesRequest list;
    list.set_page_size(1);
    list.set_page_token(token);
    v1::ListPoliciesResponse page;
    grpc::ClientContext list_context;
    ASSERT_TRUE(server_->fleet().ListPolicies(Deadline(&list_context), list, &page).ok());
    for (const v1::Policy& p : page.policies()) names.push_back(p.metadata().name());
    token = page.next_page_token();
  } while (!token.empty() && names.size() < 10);
  EXPECT_THAT(names, ::testing::ElementsAre("a-pi1", "a-usb3", "b-usb2"));

  v1::ListPoliciesRequest bad_token;
  bad_token.set_page_token("garbage!");
  v1::ListPoliciesResponse ignored;
  grpc::ClientContext bad_context;
  EXPECT_EQ(server_->fleet().ListPolicies(Deadline(&bad_context), bad_token, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Delete with a stale precondition, then for real.
  v1::DeletePolicyRequest del;
  del.set_name("a-pi1");
  del.set_resource_version("1");
  v1::DeletePolicyResponse deleted;
  grpc::ClientContext del_context;
  EXPECT_EQ(server_->fleet().DeletePolicy(Deadline(&del_context), del, &deleted).error_code(),
            grpc::StatusCode::ABORTED);
  del.clear_resource_version();
  grpc::ClientContext del_context2;
  ASSERT_TRUE(server_->fleet().DeletePolicy(Deadline(&del_context2), del, &deleted).ok());
  EXPECT_EQ(deleted.bundle_version(), 5u);
  ASSERT_EQ(deleted.affected_adapters_size(), 1);
  EXPECT_EQ(deleted.affected_adapters(0).adapter().host_id(), "h2");
  EXPECT_EQ(deleted.affected_adapters(0).after().hold_us(), 2048u);
  ASSERT_TRUE(h2_->WaitForBundle(5).has_value());
  EXPECT_EQ(h2_->last_bundle()->policies_size(), 2);
  grpc::ClientContext del_context3;
  EXPECT_EQ(server_->fleet().DeletePolicy(Deadline(&del_context3), del, &deleted).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(FleetServiceTest, ExplainShowsExpectedProvenanceAndDifferences) {
  // Before any policy: built-in default 32 µs on SuperSpeed, which the agent reports.
  absl::StatusOr<v1::ExplainAdapterResponse> explained = Explain("h1", "port-2-2");
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_EQ(explained->expected().settings().hold_us(), 32u);
  EXPECT_EQ(explained->expected().provenance().at("hold_us").source(),
            v1::SETTING_SOURCE_BUILT_IN_DEFAULT);
  EXPECT_TRUE(explained->in_sync()) << explained->DebugString();

  ASSERT_TRUE(server_->ApplyHold("usb3-64", 64, Speeds({v1::USB_SPEED_SUPER})).ok());
  ASSERT_TRUE(server_->ApplyHold("usb2-only", 2048, Speeds({v1::USB_SPEED_HIGH})).ok());
  explained = Explain("h1", "port-2-2");
  ASSERT_TRUE(explained.ok());
  const v1::Provenance& hold = explained->expected().provenance().at("hold_us");
  EXPECT_EQ(hold.source(), v1::SETTING_SOURCE_SERVER_POLICY);
  EXPECT_EQ(hold.name(), "usb3-64");
  EXPECT_EQ(hold.generation(), 1);
  EXPECT_EQ(hold.bundle_version(), 3u);
  EXPECT_EQ(explained->latest_bundle_version(), 3u);
  EXPECT_FALSE(explained->in_sync());
  ASSERT_EQ(explained->differences_size(), 1);
  EXPECT_EQ(explained->differences(0),
            "hold_us: expected 64 (server policy usb3-64), agent 32 (built-in default)");
  ASSERT_EQ(explained->policies_size(), 2);
  const v1::PolicyMatch& other = explained->policies(0).policy() == "usb2-only"
                                     ? explained->policies(0)
                                     : explained->policies(1);
  EXPECT_FALSE(other.matched());
  EXPECT_EQ(other.reason(), "usb_speeds [high] do not include super");

  // The agent catches up: desired and register 64 -> in sync.
  v1::AgentMessage update;
  *update.mutable_adapter_update()->add_adapters() =
      ReportedAdapter("port-2-2", v1::USB_SPEED_SUPER, 64);
  ASSERT_TRUE(h1_->Send(update));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::ExplainAdapterResponse> e = Explain("h1", "port-2-2");
    return e.ok() && e->in_sync();
  }));

  EXPECT_EQ(Explain("h1", "port-9-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Explain("", "port-9-9").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FleetServiceTest, ListsFilterWithLabelAndFieldSelectors) {
  v1::ListAdaptersRequest request;
  request.set_field_selector("usb_speed=high");
  v1::ListAdaptersResponse adapters;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->fleet().ListAdapters(Deadline(&context), request, &adapters).ok());
  ASSERT_EQ(adapters.adapters_size(), 2);
  EXPECT_EQ(adapters.adapters(0).host_id(), "h1");
  EXPECT_EQ(adapters.adapters(1).host_id(), "h2");

  request.set_label_selector("board=pi1");
  grpc::ClientContext context2;
  ASSERT_TRUE(server_->fleet().ListAdapters(Deadline(&context2), request, &adapters).ok());
  ASSERT_EQ(adapters.adapters_size(), 1);
  EXPECT_EQ(adapters.adapters(0).host_id(), "h2");

  request.set_field_selector("colour=red");
  grpc::ClientContext context3;
  EXPECT_EQ(server_->fleet().ListAdapters(Deadline(&context3), request, &adapters).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::ListHostsRequest hosts_request;
  hosts_request.set_field_selector("connected=true,stale=false");
  v1::ListHostsResponse hosts;
  grpc::ClientContext context4;
  ASSERT_TRUE(server_->fleet().ListHosts(Deadline(&context4), hosts_request, &hosts).ok());
  EXPECT_EQ(hosts.hosts_size(), 2);
  hosts_request.set_field_selector("connected=maybe");
  grpc::ClientContext context5;
  const grpc::Status bad = server_->fleet().ListHosts(Deadline(&context5), hosts_request, &hosts);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("connected must be true or false"));

  h2_.reset();  // disconnects h2
  ASSERT_TRUE(WaitFor([&] { return !server_->GetHost("h2")->status().connected(); }));
  hosts_request.set_field_selector("connected=false");
  grpc::ClientContext context6;
  ASSERT_TRUE(server_->fleet().ListHosts(Deadline(&context6), hosts_request, &hosts).ok());
  ASSERT_EQ(hosts.hosts_size(), 1);
  EXPECT_EQ(hosts.hosts(0).metadata().name(), "h2");
}

TEST_F(FleetServiceTest, CreateExperimentNamesTheMissingField) {
  v1::CreateExperimentRequest request;
  v1::CreateExperimentResponse response;
  grpc::ClientContext context;
  const grpc::Status status =
      server_->fleet().CreateExperiment(Deadline(&context), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "experiment.metadata.name: required");
}

TEST_F(FleetServiceTest, EventsAreListedAndWatchedFromAVersion) {
  ASSERT_TRUE(server_->ApplyHold("usb3-64", 64, Speeds({v1::USB_SPEED_SUPER})).ok());
  v1::ListEventsRequest list;
  list.set_involved_object_kind("Policy");
  v1::ListEventsResponse events;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->fleet().ListEvents(Deadline(&context), list, &events).ok());
  ASSERT_EQ(events.events_size(), 1);
  EXPECT_EQ(events.events(0).reason(), "PolicyCreated");
  const std::string version = events.events(0).metadata().resource_version();

  list.set_audit(true);
  grpc::ClientContext audit_context;
  ASSERT_TRUE(server_->fleet().ListEvents(Deadline(&audit_context), list, &events).ok());
  ASSERT_EQ(events.events_size(), 1);
  EXPECT_EQ(events.events(0).audit().action(), "ApplyPolicy");
  EXPECT_EQ(events.events(0).audit().result_code(), "OK");
  EXPECT_THAT(events.events(0).audit().actor(), HasSubstr("unauthenticated from ipv4:127.0.0.1"));

  // Watch host events from the version of the policy event: the ACK-less pushes to h1/h2 are
  // not events, but a NACK is; a new connection is too.
  v1::WatchEventsRequest watch;
  watch.mutable_filter()->set_host_id("h1");
  watch.set_resource_version(version);
  grpc::ClientContext watch_context;
  std::unique_ptr<grpc::ClientReader<v1::Event>> reader =
      server_->fleet().WatchEvents(&watch_context, watch);
  std::optional<v1::PolicyBundle> bundle = h1_->WaitForBundle(2);
  ASSERT_TRUE(bundle.has_value());
  ASSERT_TRUE(h1_->Nack(*bundle, "policy 'usb3-64': test"));
  v1::Event event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.reason(), "BundleNacked");
  EXPECT_EQ(event.host_id(), "h1");
  EXPECT_THAT(event.message(), HasSubstr("test"));
  watch_context.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  v1::WatchEventsRequest bad;
  bad.set_resource_version("yesterday");
  grpc::ClientContext bad_context;
  std::unique_ptr<grpc::ClientReader<v1::Event>> bad_reader =
      server_->fleet().WatchEvents(&bad_context, bad);
  EXPECT_FALSE(bad_reader->Read(&event));
  EXPECT_EQ(bad_reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(FleetServiceTest, PoliciesHostsAndVersionsSurviveARestart) {
  ASSERT_TRUE(server_->ApplyHold("usb3-64", 64, Speeds({v1::USB_SPEED_SUPER})).ok());
  std::optional<v1::PolicyBundle> bundle = h1_->WaitForBundle(2);
  ASSERT_TRUE(bundle.has_value());
  ASSERT_TRUE(h1_->Ack(*bundle));
  ASSERT_TRUE(WaitFor([&] { return server_->GetHost("h1")->status().last_acked_version() == 2; }));
  h1_.reset();
  h2_.reset();
  ASSERT_TRUE(server_->Restart());
  absl::StatusOr<v1::Host> host = server_->GetHost("h1");
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_FALSE(host->status().connected());
  EXPECT_EQ(host->status().last_acked_version(), 2u);
  EXPECT_EQ(host->status().adapter_count(), 2u);
  absl::StatusOr<v1::ApplyPolicyResponse> next = server_->ApplyHold("usb2", 2048);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->bundle_version(), 3u);
  EXPECT_EQ(next->policy().metadata().resource_version(), "2");
}

TEST_F(FleetServiceTest, AFailedDatabaseWriteIsReportedAndNothingChanges) {
  ASSERT_TRUE(server_->ApplyHold("usb3-64", 64, Speeds({v1::USB_SPEED_SUPER})).ok());
  {
    // Another process holds the database's write lock for longer than the busy timeout.
    SQLite::Database other(server_->db_path(), SQLite::OPEN_READWRITE);
    other.exec("BEGIN EXCLUSIVE");
    absl::StatusOr<v1::ApplyPolicyResponse> blocked =
        server_->ApplyHold("usb3-64", 96, Speeds({v1::USB_SPEED_SUPER}));
    ASSERT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable) << blocked.status();
    EXPECT_THAT(blocked.status().message(), HasSubstr("cannot store policy usb3-64"));
    EXPECT_THAT(blocked.status().message(), HasSubstr("locked"));
    other.exec("ROLLBACK");
  }
  v1::GetPolicyRequest get;
  get.set_name("usb3-64");
  v1::Policy stored;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->fleet().GetPolicy(Deadline(&context), get, &stored).ok());
  EXPECT_EQ(stored.spec().settings().hold_us(), 64u);
  // The server keeps working.
  absl::StatusOr<v1::ApplyPolicyResponse> retried =
      server_->ApplyHold("usb3-64", 96, Speeds({v1::USB_SPEED_SUPER}));
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->bundle_version(), 3u);
}

TEST(FleetServerHttpTest, MetricsAndServiceDiscovery) {
  FleetServerOptions options;
  options.http_listen = "127.0.0.1:0";
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1", {}, "pi1"));
  std::optional<v1::PolicyBundle> bundle = agent.WaitForBundle(1);
  ASSERT_TRUE(bundle.has_value());
  ASSERT_TRUE(agent.Ack(*bundle));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().last_acked_version() == 1; }));
  const std::string base = absl::StrCat("http://127.0.0.1:", server->server().http_port());

  rxfleet::testing::ProcessResult sd = rxfleet::testing::RunProcess(
      {"curl", "-sS", "--fail", base + "/sd/agents"}, absl::Seconds(20));
  ASSERT_EQ(sd.exit_code, 0) << sd.stderr_text;
  const nlohmann::json groups = nlohmann::json::parse(sd.stdout_text);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["targets"][0], "h1:9477");
  EXPECT_EQ(groups[0]["labels"]["board"], "pi1");
  EXPECT_EQ(groups[0]["labels"]["host"], "h1");
  EXPECT_EQ(groups[0]["labels"]["__meta_rxfleet_connected"], "true");

  ASSERT_TRUE(WaitFor([&] {
    rxfleet::testing::ProcessResult metrics = rxfleet::testing::RunProcess(
        {"curl", "-sS", "--fail", base + "/metrics"}, absl::Seconds(20));
    return metrics.exit_code == 0 &&
           metrics.stdout_text.find("rxfleet_server_acks_total 1") != std::string::npos &&
           metrics.stdout_text.find("rxfleet_server_connected_agents 1") != std::string::npos &&
           metrics.stdout_text.find("rxfleet_server_push_to_ack_seconds_count 1") !=
               std::string::npos;
  }));
  rxfleet::testing::ProcessResult health =
      rxfleet::testing::RunProcess({"curl", "-sS", "--fail", base + "/healthz"}, absl::Seconds(20));
  EXPECT_EQ(health.stdout_text, "ok\n");
}

}  // namespace
}  // namespace rxfleet::server
