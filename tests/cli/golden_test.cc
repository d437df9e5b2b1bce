// Golden-output tests of rxfleetctl's printers, driven through the verbs' Run* functions with
// canned FleetService/LocalStatusService responses (tests/fixtures/cli/responses/) and a fixed
// clock. Expected output: tests/fixtures/cli/golden/. Regenerate after an intended change with
//   UPDATE_GOLDEN=1 ctest --test-dir build/release -R cli_golden_test
// and review the diff (docs/CLI.md, "Golden files").
#include <string>

#include "cli/commands/apply.h"
#include "cli/commands/delete.h"
#include "cli/commands/describe.h"
#include "cli/commands/diff.h"
#include "cli/commands/get.h"
#include "cli/commands/status.h"
#include "cli/commands/watch.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/local_status.pb.h"
#include "tests/cli/test_util.h"
#include "tests/support/paths.h"

namespace rxfleet::cli {
namespace {

using ::rxfleet::cli::testing::CapturedRun;
using ::rxfleet::cli::testing::ExpectGolden;
using ::rxfleet::cli::testing::LoadResponse;
using ::rxfleet::cli::testing::MockFleetClient;
using ::rxfleet::cli::testing::MockLocalStatusClient;
using ::testing::_;
using ::testing::Return;
using ::testing::StrictMock;

std::string PolicyFile(std::string_view name) {
  return rxfleet::testing::SourcePath(std::string("tests/fixtures/cli/policies/") +
                                      std::string(name));
}

class GetGoldenTest : public ::testing::Test {
 protected:
  StrictMock<MockFleetClient> client_;
  CapturedRun run_{&client_};

  absl::Status Get(ResourceKind kind, std::string output, std::string name = "") {
    GetOptions options;
    options.kind = kind;
    options.output = std::move(output);
    options.name = std::move(name);
    EXPECT_TRUE(ValidateGetOptions(options).ok());
    return RunGet(options, client_, run_.ctx);
  }
};

TEST_F(GetGoldenTest, AdaptersTable) {
  EXPECT_CALL(client_, ListAdapters(_))
      .WillOnce(Return(LoadResponse<v1::ListAdaptersResponse>("adapters")));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "table").ok());
  EXPECT_EQ(run_.err.str(), "");
  ExpectGolden("get_adapters_table.txt", run_.out.str());
}

TEST_F(GetGoldenTest, AdaptersWide) {
  EXPECT_CALL(client_, ListAdapters(_))
      .WillOnce(Return(LoadResponse<v1::ListAdaptersResponse>("adapters")));
  EXPECT_CALL(client_, ListHosts(_)).WillOnce(Return(LoadResponse<v1::ListHostsResponse>("hosts")));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "wide").ok());
  ExpectGolden("get_adapters_wide.txt", run_.out.str());
}

TEST_F(GetGoldenTest, AdaptersYaml) {
  EXPECT_CALL(client_, ListAdapters(_))
      .WillOnce(Return(LoadResponse<v1::ListAdaptersResponse>("adapters")));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "yaml").ok());
  ExpectGolden("get_adapters.yaml", run_.out.str());
}

TEST_F(GetGoldenTest, AdaptersJsonIsTheApiResource) {
  const auto canned = LoadResponse<v1::ListAdaptersResponse>("adapters");
  EXPECT_CALL(client_, ListAdapters(_)).WillOnce(Return(canned));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "json").ok());
  // The JSON is the protobuf JSON mapping of the list: it parses back to the same message.
  v1::ListAdaptersResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run_.out.str(), &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, canned));
  auto json = nlohmann::json::parse(run_.out.str());
  EXPECT_EQ(json["adapters"][0]["status"]["observed"]["decoded"]["holdUs"], 32);
}

TEST_F(GetGoldenTest, AdaptersNames) {
  EXPECT_CALL(client_, ListAdapters(_))
      .WillOnce(Return(LoadResponse<v1::ListAdaptersResponse>("adapters")));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "name").ok());
  ExpectGolden("get_adapters_name.txt", run_.out.str());
}

TEST_F(GetGoldenTest, EmptyAdaptersSayNoResourcesOnStderr) {
  EXPECT_CALL(client_, ListAdapters(_)).WillOnce(Return(v1::ListAdaptersResponse()));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "table").ok());
  EXPECT_EQ(run_.out.str(), "");
  EXPECT_EQ(run_.err.str(), "No resources found.\n");
}

TEST_F(GetGoldenTest, EmptyWideAndYaml) {
  EXPECT_CALL(client_, ListAdapters(_)).WillRepeatedly(Return(v1::ListAdaptersResponse()));
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "wide").ok());
  EXPECT_EQ(run_.out.str(), "");
  EXPECT_EQ(run_.err.str(), "No resources found.\n");
  CapturedRun yaml_run(&client_);
  GetOptions options;
  options.kind = ResourceKind::kAdapter;
  options.output = "yaml";
  ASSERT_TRUE(RunGet(options, client_, yaml_run.ctx).ok());
  ExpectGolden("get_adapters_empty.yaml", yaml_run.out.str());
  EXPECT_EQ(yaml_run.err.str(), "No resources found.\n");
}

TEST_F(GetGoldenTest, HostsTable) {
  EXPECT_CALL(client_, ListHosts(_)).WillOnce(Return(LoadResponse<v1::ListHostsResponse>("hosts")));
  ASSERT_TRUE(Get(ResourceKind::kHost, "table").ok());
  ExpectGolden("get_hosts_table.txt", run_.out.str());
}

TEST_F(GetGoldenTest, HostsWide) {
  EXPECT_CALL(client_, ListHosts(_)).WillOnce(Return(LoadResponse<v1::ListHostsResponse>("hosts")));
  ASSERT_TRUE(Get(ResourceKind::kHost, "wide").ok());
  ExpectGolden("get_hosts_wide.txt", run_.out.str());
}

TEST_F(GetGoldenTest, PoliciesTable) {
  EXPECT_CALL(client_, ListPolicies(_))
      .WillOnce(Return(LoadResponse<v1::ListPoliciesResponse>("policies")));
  ASSERT_TRUE(Get(ResourceKind::kPolicy, "table").ok());
  ExpectGolden("get_policies_table.txt", run_.out.str());
}

TEST_F(GetGoldenTest, PoliciesWide) {
  EXPECT_CALL(client_, ListPolicies(_))
      .WillOnce(Return(LoadResponse<v1::ListPoliciesResponse>("policies")));
  ASSERT_TRUE(Get(ResourceKind::kPolicy, "wide").ok());
  ExpectGolden("get_policies_wide.txt", run_.out.str());
}

TEST_F(GetGoldenTest, OnePolicyYaml) {
  const auto policies = LoadResponse<v1::ListPoliciesResponse>("policies");
  EXPECT_CALL(client_, GetPolicy(_)).WillOnce([&](const v1::GetPolicyRequest& request) {
    EXPECT_EQ(request.name(), "pi1-long-hold");
    return policies.policies(1);
  });
  ASSERT_TRUE(Get(ResourceKind::kPolicy, "yaml", "pi1-long-hold").ok());
  ExpectGolden("get_policy.yaml", run_.out.str());
}

TEST_F(GetGoldenTest, OneAdapterByHostAndId) {
  const auto adapters = LoadResponse<v1::ListAdaptersResponse>("adapters");
  EXPECT_CALL(client_, GetAdapter(_)).WillOnce([&](const v1::GetAdapterRequest& request) {
    EXPECT_EQ(request.host_id(), "x86-lab");
    EXPECT_EQ(request.name(), "port-2-2");
    return adapters.adapters(0);
  });
  ASSERT_TRUE(Get(ResourceKind::kAdapter, "table", "x86-lab/port-2-2").ok());
  ExpectGolden("get_adapter_one.txt", run_.out.str());
}

TEST_F(GetGoldenTest, ListsEveryPageAndPassesSelectors) {
  auto all = LoadResponse<v1::ListAdaptersResponse>("adapters");
  v1::ListAdaptersResponse first, second;
  for (int i = 0; i < all.adapters_size(); ++i) {
    *(i < 2 ? first : second).add_adapters() = all.adapters(i);
  }
  first.set_next_page_token("page-2");
  EXPECT_CALL(client_, ListAdapters(_))
      .WillOnce([&](const v1::ListAdaptersRequest& request) {
        EXPECT_EQ(request.label_selector(), "board=pi1");
        EXPECT_EQ(request.field_selector(), "usb_speed=super,chip=rtl8922au");
        EXPECT_EQ(request.page_token(), "");
        return first;
      })
      .WillOnce([&](const v1::ListAdaptersRequest& request) {
        EXPECT_EQ(request.page_token(), "page-2");
        EXPECT_EQ(request.label_selector(), "board=pi1");
        return second;
      });
  GetOptions options;
  options.kind = ResourceKind::kAdapter;
  options.label_selector = "board=pi1";
  options.field_selector = "usb_speed=super,chip=rtl8922au";
  ASSERT_TRUE(ValidateGetOptions(options).ok());
  ASSERT_TRUE(RunGet(options, client_, run_.ctx).ok());
  // Same rows as the single-page table.
  ExpectGolden("get_adapters_table.txt", run_.out.str());
}

TEST_F(GetGoldenTest, ServerRepeatingAPageTokenIsAnError) {
  v1::ListAdaptersResponse page;
  page.set_next_page_token("again");
  EXPECT_CALL(client_, ListAdapters(_)).WillRepeatedly(Return(page));
  absl::Status status = Get(ResourceKind::kAdapter, "table");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
}

class DescribeGoldenTest : public GetGoldenTest {};

TEST_F(DescribeGoldenTest, AdapterShowsProvenanceAndEvents) {
  EXPECT_CALL(client_, ExplainAdapter(_)).WillOnce([](const v1::ExplainAdapterRequest& request) {
    EXPECT_EQ(request.host_id(), "x86-lab");
    EXPECT_EQ(request.name(), "port-2-2");
    return LoadResponse<v1::ExplainAdapterResponse>("explain_adapter");
  });
  EXPECT_CALL(client_, ListPolicies(_))
      .WillOnce(Return(LoadResponse<v1::ListPoliciesResponse>("policies")));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce([](const v1::ListEventsRequest& request) {
    EXPECT_EQ(request.involved_object_kind(), "Adapter");
    EXPECT_EQ(request.involved_object_name(), "port-2-2");
    EXPECT_EQ(request.host_id(), "x86-lab");
    return LoadResponse<v1::ListEventsResponse>("adapter_events");
  });
  DescribeOptions options{ResourceKind::kAdapter, "x86-lab/port-2-2"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  EXPECT_THAT(run_.out.str(), ::testing::HasSubstr("server policy usb3-short"));
  ExpectGolden("describe_adapter.txt", run_.out.str());
}

// A probe-only policy decides the adapter's probe: DECIDES says so and the adapter shows the
// probe; lab-udp-probe sets one too but does not match port-2-2.
TEST_F(DescribeGoldenTest, AdapterShowsTheProbeItsPolicyDecides) {
  EXPECT_CALL(client_, ExplainAdapter(_))
      .WillOnce(Return(LoadResponse<v1::ExplainAdapterResponse>("explain_adapter")));
  EXPECT_CALL(client_, ListPolicies(_))
      .WillOnce(Return(LoadResponse<v1::ListPoliciesResponse>("policies")));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kAdapter, "x86-lab/port-2-2"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  const std::string out = run_.out.str();
  EXPECT_THAT(out, ::testing::ContainsRegex("lab-probe +50 +yes +probe +-"));
  EXPECT_THAT(out, ::testing::ContainsRegex("lab-udp-probe +10 +no +- "));
  EXPECT_THAT(out, ::testing::ContainsRegex("usb3-short +100 +yes +hold_us +-"));
  EXPECT_THAT(out,
              ::testing::HasSubstr("Probe:                TCP download, 1 stream, 10s, against "
                                   "10.0.0.1:5201, every 1h (server policy lab-probe)\n"));
}

TEST_F(DescribeGoldenTest, AdapterWithoutProbePolicySaysNone) {
  EXPECT_CALL(client_, ExplainAdapter(_))
      .WillOnce(Return(LoadResponse<v1::ExplainAdapterResponse>("explain_adapter")));
  v1::ListPoliciesResponse policies = LoadResponse<v1::ListPoliciesResponse>("policies");
  policies.mutable_policies()->DeleteSubrange(3, 2);  // keep the settings-only policies
  EXPECT_CALL(client_, ListPolicies(_)).WillOnce(Return(policies));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kAdapter, "x86-lab/port-2-2"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  EXPECT_THAT(run_.out.str(), ::testing::HasSubstr("Probe:                <none>\n"));
  EXPECT_THAT(run_.out.str(), ::testing::ContainsRegex("lab-probe +50 +yes +- +-"));
}

// The end of the current switchback period lies ahead: "(in 26s)", never "(0s ago)".
TEST_F(DescribeGoldenTest, AdapterPeriodEndInTheFutureSaysIn) {
  v1::ExplainAdapterResponse explain = LoadResponse<v1::ExplainAdapterResponse>("explain_adapter");
  v1::ExperimentAssignment* assignment = explain.mutable_assignment();
  assignment->set_experiment("hold-sweep");
  assignment->set_arm("hold-64");
  assignment->mutable_settings()->set_hold_us(64);
  assignment->set_period_index(2);
  assignment->mutable_period_end_time()->set_seconds(
      absl::ToUnixSeconds(::rxfleet::cli::testing::kGoldenNow) + 26);
  EXPECT_CALL(client_, ExplainAdapter(_)).WillOnce(Return(explain));
  EXPECT_CALL(client_, ListPolicies(_)).WillOnce(Return(v1::ListPoliciesResponse()));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kAdapter, "x86-lab/port-2-2"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  EXPECT_THAT(run_.out.str(), ::testing::HasSubstr(
                                  "Experiment:           hold-sweep arm hold-64 (hold=64\xC2\xB5s, "
                                  "period 2 ends 2026-04-12T12:00:26Z (in 26s))\n"));
  EXPECT_THAT(run_.out.str(), ::testing::Not(::testing::HasSubstr("(0s ago)")));
}

TEST_F(DescribeGoldenTest, Host) {
  const auto hosts = LoadResponse<v1::ListHostsResponse>("hosts");
  const auto adapters = LoadResponse<v1::ListAdaptersResponse>("adapters");
  EXPECT_CALL(client_, GetHost(_)).WillOnce(Return(hosts.hosts(0)));
  EXPECT_CALL(client_, ListAdapters(_)).WillOnce([&](const v1::ListAdaptersRequest& request) {
    EXPECT_EQ(request.field_selector(), "host=x86-lab");
    v1::ListAdaptersResponse response;
    for (const auto& adapter : adapters.adapters()) {
      if (adapter.host_id() == "x86-lab") *response.add_adapters() = adapter;
    }
    return response;
  });
  EXPECT_CALL(client_, ListEvents(_)).WillOnce([](const v1::ListEventsRequest& request) {
    EXPECT_EQ(request.host_id(), "x86-lab");
    return LoadResponse<v1::ListEventsResponse>("adapter_events");
  });
  DescribeOptions options{ResourceKind::kHost, "x86-lab"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  ExpectGolden("describe_host.txt", run_.out.str());
}

TEST_F(DescribeGoldenTest, PolicyWithoutEvents) {
  const auto policies = LoadResponse<v1::ListPoliciesResponse>("policies");
  EXPECT_CALL(client_, GetPolicy(_)).WillOnce(Return(policies.policies(1)));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kPolicy, "pi1-long-hold"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  ExpectGolden("describe_policy.txt", run_.out.str());
}

TEST_F(DescribeGoldenTest, ProbeOnlyPolicyShowsItsProbe) {
  const auto policies = LoadResponse<v1::ListPoliciesResponse>("policies");
  EXPECT_CALL(client_, GetPolicy(_)).WillOnce(Return(policies.policies(3)));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kPolicy, "lab-probe"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  ExpectGolden("describe_policy_probe.txt", run_.out.str());
}

TEST_F(DescribeGoldenTest, UdpProbeShowsRateAndStreams) {
  const auto policies = LoadResponse<v1::ListPoliciesResponse>("policies");
  EXPECT_CALL(client_, GetPolicy(_)).WillOnce(Return(policies.policies(4)));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kPolicy, "lab-udp-probe"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  const std::string out = run_.out.str();
  EXPECT_THAT(out, ::testing::HasSubstr("  hold_us:            64\xC2\xB5s\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  Server:             iperf.lab:5201\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  Protocol:           UDP\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  Direction:          forward (upload)\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  Streams:            4\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  Duration:           20s\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  UDP rate:           50Mbit/s per stream\n"));
  EXPECT_THAT(out, ::testing::HasSubstr("  Interval:           30m\n"));
}

TEST_F(DescribeGoldenTest, MissingPolicyIsNotFound) {
  EXPECT_CALL(client_, GetPolicy(_))
      .WillOnce(Return(absl::NotFoundError("policy 'nope' not found")));
  DescribeOptions options{ResourceKind::kPolicy, "nope"};
  EXPECT_EQ(RunDescribe(options, client_, run_.ctx).code(), absl::StatusCode::kNotFound);
}

TEST_F(GetGoldenTest, ExperimentsTableAndWide) {
  EXPECT_CALL(client_, ListExperiments(_))
      .Times(2)
      .WillRepeatedly(Return(LoadResponse<v1::ListExperimentsResponse>("experiments")));
  ASSERT_TRUE(Get(ResourceKind::kExperiment, "table").ok());
  EXPECT_EQ(run_.err.str(), "");
  ExpectGolden("get_experiments_table.txt", run_.out.str());
  run_.out.str("");
  ASSERT_TRUE(Get(ResourceKind::kExperiment, "wide").ok());
  ExpectGolden("get_experiments_wide.txt", run_.out.str());
}

TEST_F(GetGoldenTest, NoExperimentsSaysNoResourcesFound) {
  EXPECT_CALL(client_, ListExperiments(_)).WillOnce(Return(v1::ListExperimentsResponse()));
  ASSERT_TRUE(Get(ResourceKind::kExperiment, "table").ok());
  EXPECT_EQ(run_.out.str(), "");
  EXPECT_EQ(run_.err.str(), "No resources found.\n");
}

TEST_F(GetGoldenTest, OneExperimentYamlAndNames) {
  const auto experiments = LoadResponse<v1::ListExperimentsResponse>("experiments");
  EXPECT_CALL(client_, GetExperiment(_)).WillOnce([&](const v1::GetExperimentRequest& request) {
    EXPECT_EQ(request.name(), "hold-ab");
    return experiments.experiments(0);
  });
  ASSERT_TRUE(Get(ResourceKind::kExperiment, "yaml", "hold-ab").ok());
  EXPECT_THAT(run_.out.str(), ::testing::HasSubstr("design: EXPERIMENT_DESIGN_SWITCHBACK"));
  run_.out.str("");
  EXPECT_CALL(client_, ListExperiments(_)).WillOnce(Return(experiments));
  ASSERT_TRUE(Get(ResourceKind::kExperiment, "name").ok());
  EXPECT_EQ(run_.out.str(), "experiment/buffer-pi\nexperiment/early-stop\nexperiment/hold-ab\n");
}

TEST_F(GetGoldenTest, EventsTableWithFilters) {
  EXPECT_CALL(client_, ListEvents(_)).WillOnce([](const v1::ListEventsRequest& request) {
    EXPECT_EQ(request.host_id(), "x86-lab");
    EXPECT_EQ(request.involved_object_kind(), "Adapter");
    EXPECT_EQ(request.type(), v1::EVENT_TYPE_WARNING);
    EXPECT_FALSE(request.audit());
    return LoadResponse<v1::ListEventsResponse>("adapter_events");
  });
  GetOptions options;
  options.kind = ResourceKind::kEvent;
  options.event_host = "x86-lab";
  options.event_kind = "adapter";
  options.event_type = "warning";
  ASSERT_TRUE(ValidateGetOptions(options).ok());
  ASSERT_TRUE(RunGet(options, client_, run_.ctx).ok());
  ExpectGolden("get_events_table.txt", run_.out.str());
}

TEST_F(DescribeGoldenTest, ExperimentShowsSpecStatusStoppedArmsAndEvents) {
  const auto experiments = LoadResponse<v1::ListExperimentsResponse>("experiments");
  EXPECT_CALL(client_, GetExperiment(_)).WillOnce(Return(experiments.experiments(0)));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce([](const v1::ListEventsRequest& request) {
    EXPECT_EQ(request.involved_object_kind(), "Experiment");
    EXPECT_EQ(request.involved_object_name(), "hold-ab");
    return LoadResponse<v1::ListEventsResponse>("experiment_events");
  });
  DescribeOptions options{ResourceKind::kExperiment, "hold-ab"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  EXPECT_THAT(run_.out.str(), ::testing::HasSubstr("GuardrailTripped"));
  ExpectGolden("describe_experiment.txt", run_.out.str());
}

TEST_F(DescribeGoldenTest, PendingExperimentWithoutEvents) {
  const auto experiments = LoadResponse<v1::ListExperimentsResponse>("experiments");
  EXPECT_CALL(client_, GetExperiment(_)).WillOnce(Return(experiments.experiments(1)));
  EXPECT_CALL(client_, ListEvents(_)).WillOnce(Return(v1::ListEventsResponse()));
  DescribeOptions options{ResourceKind::kExperiment, "buffer-pi"};
  ASSERT_TRUE(RunDescribe(options, client_, run_.ctx).ok());
  ExpectGolden("describe_experiment_pending.txt", run_.out.str());
}

TEST(StatusGoldenTest, LocalStatusTableAndYaml) {
  StrictMock<MockLocalStatusClient> local;
  EXPECT_CALL(local, GetStatus(_))
      .Times(2)
      .WillRepeatedly(Return(LoadResponse<v1::GetStatusResponse>("local_status")));
  CapturedRun table_run(nullptr, &local);
  ASSERT_TRUE(RunStatus(StatusOptions{}, local, table_run.ctx).ok());
  ExpectGolden("local_status.txt", table_run.out.str());
  CapturedRun yaml_run(nullptr, &local);
  StatusOptions yaml;
  yaml.output = "yaml";
  ASSERT_TRUE(RunStatus(yaml, local, yaml_run.ctx).ok());
  ExpectGolden("local_status.yaml", yaml_run.out.str());
}

v1::AffectedAdapter Affected(const std::string& host, const std::string& adapter,
                             uint32_t before_hold, uint32_t after_hold) {
  v1::AffectedAdapter a;
  a.mutable_adapter()->set_kind("Adapter");
  a.mutable_adapter()->set_host_id(host);
  a.mutable_adapter()->set_name(adapter);
  a.mutable_before()->set_hold_us(before_hold);
  a.mutable_after()->set_hold_us(after_hold);
  return a;
}

TEST_F(GetGoldenTest, ApplySendsParsedPoliciesAndPrintsTheEffect) {
  EXPECT_CALL(client_, ApplyPolicy(_))
      .WillOnce([](const v1::ApplyPolicyRequest& request) {
        EXPECT_EQ(request.policy().metadata().name(), "usb3-short");
        EXPECT_EQ(request.policy().spec().settings().hold_us(), 32u);
        EXPECT_EQ(request.policy().spec().priority(), 100);
        EXPECT_FALSE(request.dry_run());
        v1::ApplyPolicyResponse response;
        *response.mutable_policy() = request.policy();
        response.set_created(false);
        *response.add_affected_adapters() = Affected("x86-lab", "port-2-1", 1024, 32);
        *response.add_affected_adapters() = Affected("lab2", "port-4-1", 1024, 32);
        response.set_bundle_version(8);
        return response;
      })
      .WillOnce([](const v1::ApplyPolicyRequest& request) {
        EXPECT_EQ(request.policy().metadata().name(), "lab-count");
        EXPECT_EQ(request.policy().metadata().labels().at("team"), "lab");
        EXPECT_EQ(request.policy().spec().settings().count_threshold(), 255u);
        EXPECT_FALSE(request.policy().spec().settings().has_hold_us());
        v1::ApplyPolicyResponse response;
        *response.mutable_policy() = request.policy();
        response.set_created(true);
        return response;
      });
  ApplyOptions options;
  options.files = {PolicyFile("two-policies.yaml")};
  ASSERT_TRUE(ValidateApplyOptions(options).ok());
  ASSERT_TRUE(RunApply(options, client_, run_.ctx).ok());
  ExpectGolden("apply.txt", run_.out.str());
}

TEST_F(GetGoldenTest, ApplyReadsStandardInputAndDryRuns) {
  auto text = rxfleet::testing::ReadTextFile(PolicyFile("pi1-long-hold.yaml"));
  ASSERT_TRUE(text.ok());
  CapturedRun stdin_run(&client_, nullptr, *text);
  EXPECT_CALL(client_, ApplyPolicy(_)).WillOnce([](const v1::ApplyPolicyRequest& request) {
    EXPECT_TRUE(request.dry_run());
    EXPECT_EQ(request.policy().spec().settings().hold_us(), 1024u);
    EXPECT_EQ(request.policy().spec().selector().match_labels().at("board"), "pi1");
    v1::ApplyPolicyResponse response;
    *response.mutable_policy() = request.policy();
    response.set_created(true);
    *response.add_affected_adapters() = Affected("pi1", "port-1-1.2", 32, 1024);
    return response;
  });
  ApplyOptions options;
  options.files = {"-"};
  options.dry_run = true;
  ASSERT_TRUE(RunApply(options, client_, stdin_run.ctx).ok());
  EXPECT_EQ(stdin_run.out.str(),
            "policy/pi1-long-hold created (dry run): 1 adapter affected\n"
            "  HOST   ADAPTER      CHANGE\n"
            "  pi1    port-1-1.2   hold_us 32\xC2\xB5s -> 1024\xC2\xB5s\n");
}

TEST_F(GetGoldenTest, DeletePrintsTheAdaptersThatFallBack) {
  EXPECT_CALL(client_, DeletePolicy(_)).WillOnce([](const v1::DeletePolicyRequest& request) {
    EXPECT_EQ(request.name(), "pi1-long-hold");
    EXPECT_EQ(request.resource_version(), "9");
    v1::DeletePolicyResponse response;
    *response.add_affected_adapters() = Affected("pi1", "port-1-1.3", 1024, 32);
    response.set_bundle_version(9);
    return response;
  });
  DeleteOptions options{"pi1-long-hold", "9", false};
  ASSERT_TRUE(RunDelete(options, client_, run_.ctx).ok());
  ExpectGolden("delete.txt", run_.out.str());
}

TEST_F(GetGoldenTest, DiffShowsDocumentChangesAndAffectedAdapters) {
  const auto policies = LoadResponse<v1::ListPoliciesResponse>("policies");
  EXPECT_CALL(client_, GetPolicy(_))
      .WillOnce(Return(policies.policies(0)))                      // usb3-short exists
      .WillOnce(Return(absl::NotFoundError("policy not found")));  // lab-count is new
  EXPECT_CALL(client_, ApplyPolicy(_))
      .WillOnce([](const v1::ApplyPolicyRequest& request) {
        EXPECT_TRUE(request.dry_run());
        v1::ApplyPolicyResponse response;
        *response.mutable_policy() = request.policy();
        response.mutable_policy()->mutable_metadata()->set_resource_version("13");
        return response;
      })
      .WillOnce([](const v1::ApplyPolicyRequest& request) {
        EXPECT_TRUE(request.dry_run());
        v1::ApplyPolicyResponse response;
        *response.mutable_policy() = request.policy();
        response.set_created(true);
        v1::AffectedAdapter a = Affected("x86-lab", "port-2-1", 32, 32);
        a.mutable_after()->set_count_threshold(255);
        *response.add_affected_adapters() = a;
        return response;
      });
  DiffOptions options;
  options.files = {PolicyFile("two-policies.yaml")};
  ASSERT_TRUE(RunDiff(options, client_, run_.ctx).ok());
  ExpectGolden("diff.txt", run_.out.str());
}

TEST_F(GetGoldenTest, WatchPrintsOneLinePerEvent) {
  const auto events = LoadResponse<v1::ListEventsResponse>("adapter_events");
  EXPECT_CALL(client_, WatchEvents(_, _, _))
      .Times(2)
      .WillRepeatedly([&](const v1::WatchEventsRequest& request,
                          const std::function<void(const v1::Event&)>& on_event, std::stop_token) {
        EXPECT_EQ(request.filter().type(), v1::EVENT_TYPE_WARNING);
        EXPECT_EQ(request.filter().host_id(), "x86-lab");
        for (const auto& event : events.events()) on_event(event);
        return absl::OkStatus();
      });
  WatchOptions options;
  options.type = "warning";
  options.host = "x86-lab";
  ASSERT_TRUE(ValidateWatchOptions(options).ok());
  ASSERT_TRUE(RunWatch(options, client_, run_.ctx).ok());
  ExpectGolden("watch.txt", run_.out.str());
  CapturedRun json_run(&client_);
  options.output = "json";
  ASSERT_TRUE(RunWatch(options, client_, json_run.ctx).ok());
  ExpectGolden("watch.jsonl", json_run.out.str());
}

}  // namespace
}  // namespace rxfleet::cli
