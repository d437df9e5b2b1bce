// The experiment verbs end to end in-process: RunRxfleetctl with the real gRPC client against
// a fake FleetService on loopback (port 0) that records what arrives and answers with canned
// experiments, reports and promotions. Checks what is sent (documents converted to the API,
// dry-run flags, segments), what is printed, the confirmation rules of promote and exit codes.
#include "cli/commands/experiment.h"

#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "cli/client/grpc_clients.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/cli/test_util.h"
#include "tests/support/paths.h"

namespace rxfleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string ExperimentFile(std::string_view name) {
  return rxfleet::testing::SourcePath(
      absl::StrCat("tests/fixtures/cli/experiments/", std::string(name)));
}

class FakeFleetService final : public v1::FleetService::Service {
 public:
  grpc::Status CreateExperiment(grpc::ServerContext*, const v1::CreateExperimentRequest* request,
                                v1::CreateExperimentResponse* response) override {
    std::lock_guard lock(mu_);
    creates.push_back(*request);
    if (request->experiment().metadata().name() == "taken") {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "experiment taken already exists");
    }
    *response->mutable_experiment() = request->experiment();
    for (const char* adapter : {"port-2-2", "port-1-1.3"}) {
      v1::ObjectReference* ref = response->add_eligible_adapters();
      ref->set_kind("Adapter");
      ref->set_host_id(adapter[5] == '2' ? "x86-lab" : "pi1");
      ref->set_name(adapter);
    }
    v1::IneligibleAdapter* kept = response->add_ineligible_adapters();
    kept->mutable_adapter()->set_kind("Adapter");
    kept->mutable_adapter()->set_host_id("pi1");
    kept->mutable_adapter()->set_name("port-1-1.4");
    kept->set_reason("server policy pin-long (priority 100) decides hold_us");
    return grpc::Status::OK;
  }

  grpc::Status GetExperimentReport(grpc::ServerContext*,
                                   const v1::GetExperimentReportRequest* request,
                                   v1::ExperimentReport* response) override {
    std::lock_guard lock(mu_);
    reports.push_back(*request);
    if (request->name() != "hold-ab") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "experiment nope not found");
    }
    response->set_experiment("hold-ab");
    response->set_primary_metric("rx_throughput_bps");
    response->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
    response->set_text("SEGMENT usb_speed=super\n  rx_throughput_bps   control 310 Mbit/s\n");
    return grpc::Status::OK;
  }

  grpc::Status StopExperiment(grpc::ServerContext*, const v1::StopExperimentRequest* request,
                              v1::Experiment* response) override {
    std::lock_guard lock(mu_);
    stops.push_back(*request);
    response->mutable_metadata()->set_name(request->name());
    response->mutable_status()->set_phase(v1::EXPERIMENT_PHASE_STOPPED);
    return grpc::Status::OK;
  }

  grpc::Status PromoteExperiment(grpc::ServerContext*, const v1::PromoteExperimentRequest* request,
                                 v1::PromoteExperimentResponse* response) override {
    std::lock_guard lock(mu_);
    promotes.push_back(*request);
    v1::Policy& policy = *response->mutable_policy();
    policy.mutable_metadata()->set_name(request->policy_name().empty() ? "hold-ab-short"
                                                                       : request->policy_name());
    (*policy.mutable_metadata()->mutable_labels())["rxfleet.io/experiment"] = "hold-ab";
    policy.mutable_spec()->set_priority(10);
    policy.mutable_spec()->mutable_selector()->add_usb_speeds(v1::USB_SPEED_SUPER);
    policy.mutable_spec()->mutable_settings()->set_hold_us(32);
    if (!request->dry_run()) policy.mutable_metadata()->set_generation(1);
    v1::AffectedAdapter* affected = response->add_affected_adapters();
    affected->mutable_adapter()->set_kind("Adapter");
    affected->mutable_adapter()->set_host_id("x86-lab");
    affected->mutable_adapter()->set_name("port-2-2");
    affected->mutable_before()->set_hold_us(1024);
    affected->mutable_after()->set_hold_us(32);
    return grpc::Status::OK;
  }

  grpc::Status GetPolicy(grpc::ServerContext*, const v1::GetPolicyRequest* request,
                         v1::Policy*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "policy " + request->name() + " not found");
  }

  std::mutex mu_;
  std::vector<v1::CreateExperimentRequest> creates;
  std::vector<v1::GetExperimentReportRequest> reports;
  std::vector<v1::StopExperimentRequest> stops;
  std::vector<v1::PromoteExperimentRequest> promotes;
};

class ExperimentVerbsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    env_.streams = Streams{&in_, &out_, &err_};
    env_.getenv = [](std::string_view name) -> std::optional<std::string> {
      if (name == "HOME") return std::string("/nonexistent-rxfleet-home");
      return std::nullopt;
    };
    env_.now = [] { return testing::kGoldenNow; };
    env_.stop = stop_.get_token();
    env_.connect_fleet = [](const ConnectionSettings& settings, std::stop_token stop) {
      return ConnectFleet(settings, std::move(stop));
    };
  }
  void TearDown() override { server_->Shutdown(); }

  int Run(std::vector<std::string> args, std::string stdin_text = "") {
    out_.str("");
    err_.str("");
    in_.clear();
    in_.str(std::move(stdin_text));
    args.insert(args.begin(),
                {"--insecure", "--server", absl::StrCat("127.0.0.1:", port_), "--timeout", "10s"});
    return RunRxfleetctl(args, env_);
  }

  FakeFleetService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::stop_source stop_;
  std::istringstream in_;
  std::ostringstream out_;
  std::ostringstream err_;
  Environment env_;
};

TEST_F(ExperimentVerbsTest, CreateSendsTheDocumentAndListsEligibleAdapters) {
  ASSERT_EQ(Run({"experiment", "create", "-f", ExperimentFile("hold-ab.yaml"), "--dry-run"}), 0)
      << err_.str();
  ASSERT_EQ(service_.creates.size(), 1u);
  const v1::CreateExperimentRequest& sent = service_.creates[0];
  EXPECT_TRUE(sent.dry_run());
  const v1::ExperimentSpec& spec = sent.experiment().spec();
  EXPECT_EQ(sent.experiment().metadata().name(), "hold-ab");
  EXPECT_EQ(spec.design(), v1::EXPERIMENT_DESIGN_SWITCHBACK);
  ASSERT_EQ(spec.arms_size(), 2);
  EXPECT_EQ(spec.arms(0).settings().hold_us(), 1024u);
  EXPECT_EQ(spec.arms(1).settings().hold_us(), 32u);
  EXPECT_EQ(spec.control_arm(), "control");
  EXPECT_EQ(spec.period_length().seconds(), 30 * 60);
  EXPECT_EQ(spec.duration().seconds(), 24 * 3600);
  EXPECT_EQ(spec.primary_metric(), "rx_throughput_bps");
  ASSERT_EQ(spec.guardrails_size(), 1);
  EXPECT_EQ(spec.guardrails(0).metric(), "rx_drop_ratio");
  EXPECT_EQ(spec.guardrails(0).comparator(), v1::COMPARATOR_GREATER_THAN);  // trips when above
  EXPECT_DOUBLE_EQ(spec.guardrails(0).threshold(), 0.05);
  EXPECT_THAT(spec.segment_label_keys(), ::testing::ElementsAre("usb_speed", "board"));
  EXPECT_EQ(out_.str(),
            "experiment/hold-ab created (dry run): 2 eligible adapters\n"
            "  HOST      ADAPTER\n"
            "  pi1       port-1-1.3\n"
            "  x86-lab   port-2-2\n"
            "1 adapter matched but not eligible:\n"
            "  HOST   ADAPTER      REASON\n"
            "  pi1    port-1-1.4   server policy pin-long (priority 100) decides hold_us\n");

  // From standard input, stored for real.
  std::ifstream file(ExperimentFile("hold-ab.yaml"));
  std::stringstream text;
  text << file.rdbuf();
  ASSERT_EQ(Run({"experiment", "create", "-f", "-"}, text.str()), 0) << err_.str();
  ASSERT_EQ(service_.creates.size(), 2u);
  EXPECT_FALSE(service_.creates[1].dry_run());
  EXPECT_THAT(out_.str(), StartsWith("experiment/hold-ab created: 2 eligible adapters\n"));
}

TEST_F(ExperimentVerbsTest, BadDocumentsAreRejectedBeforeAnyCall) {
  EXPECT_EQ(Run({"experiment", "create", "-f", ExperimentFile("unknown-field.yaml")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("unknown-field.yaml:12:"));
  EXPECT_THAT(err_.str(), HasSubstr("guardrail"));
  EXPECT_EQ(Run({"experiment", "create", "-f", ExperimentFile("wrong-kind.yaml")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("wrong-kind.yaml:2:"));
  EXPECT_THAT(err_.str(), HasSubstr("RxAggPolicy"));
  EXPECT_EQ(Run({"experiment", "create", "-f", ExperimentFile("missing.yaml")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("missing.yaml: cannot be read: No such file or directory"));
  EXPECT_TRUE(service_.creates.empty());
}

TEST_F(ExperimentVerbsTest, ANameTakenIsAConflict) {
  EXPECT_EQ(Run({"experiment", "create", "-f", "-"},
                "apiVersion: rxfleet/v1\nkind: Experiment\nmetadata: {name: taken}\nspec:\n"
                "  arms:\n    - {name: a, settings: {hold: 1024us}}\n"
                "    - {name: b, settings: {hold: 32us}}\n"
                "  design: parallel\n  duration: 1h\n  primaryMetric: rx_throughput_bps\n"),
            4);
  EXPECT_THAT(err_.str(), HasSubstr("experiment/taken (<stdin>"));
  EXPECT_THAT(err_.str(), HasSubstr("already exists"));
}

TEST_F(ExperimentVerbsTest, ReportPrintsTheServersTextOrTheMessage) {
  ASSERT_EQ(Run({"experiment", "report", "hold-ab", "--segment", "usb_speed=super"}), 0)
      << err_.str();
  EXPECT_EQ(out_.str(), "SEGMENT usb_speed=super\n  rx_throughput_bps   control 310 Mbit/s\n");
  ASSERT_EQ(service_.reports.size(), 1u);
  EXPECT_EQ(service_.reports[0].segment().at("usb_speed"), "super");

  ASSERT_EQ(Run({"experiment", "report", "hold-ab", "-o", "json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"primaryMetric\": \"rx_throughput_bps\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"phase\": \"EXPERIMENT_PHASE_RUNNING\""));
  ASSERT_EQ(Run({"experiment", "report", "hold-ab", "-o", "yaml"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("primaryMetric: rx_throughput_bps"));

  EXPECT_EQ(Run({"experiment", "report", "nope"}), 3);
  EXPECT_THAT(err_.str(), HasSubstr("experiment/nope: "));
  EXPECT_EQ(Run({"experiment", "report", "hold-ab", "--segment", "usb_speed"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("--segment: 'usb_speed' must be key=value"));
}

TEST_F(ExperimentVerbsTest, StopSendsTheReason) {
  ASSERT_EQ(Run({"experiment", "stop", "hold-ab", "--reason", "pi1 drops frames"}), 0);
  ASSERT_EQ(service_.stops.size(), 1u);
  EXPECT_EQ(service_.stops[0].reason(), "pi1 drops frames");
  EXPECT_EQ(out_.str(),
            "experiment/hold-ab stopped (phase Stopped); its adapters return to their policies\n");
}

TEST_F(ExperimentVerbsTest, PromoteShowsTheDiffAndWritesOnlyWhenConfirmed) {
  // Dry run: one dry-run call, the diff, nothing written.
  ASSERT_EQ(Run({"experiment", "promote", "hold-ab", "short", "--segment", "usb_speed=super",
                 "--dry-run"}),
            0)
      << err_.str();
  ASSERT_EQ(service_.promotes.size(), 1u);
  EXPECT_TRUE(service_.promotes[0].dry_run());
  EXPECT_EQ(service_.promotes[0].arm(), "short");
  EXPECT_EQ(service_.promotes[0].segment().at("usb_speed"), "super");
  const std::string preview = out_.str();
  EXPECT_THAT(preview, StartsWith("experiment/hold-ab arm short -> policy/hold-ab-short (new): 1 "
                                  "adapter affected once the experiment ends\n"));
  EXPECT_THAT(preview, HasSubstr("+ kind: RxAggPolicy"));
  EXPECT_THAT(preview, HasSubstr("x86-lab   port-2-2"));
  EXPECT_THAT(preview, HasSubstr("hold_us 1024µs -> 32µs"));
  EXPECT_THAT(preview, HasSubstr("Dry run: nothing written."));

  // Not a terminal and no --yes: the diff, then exit 1 saying to pass --yes.
  env_.stdin_is_terminal = false;
  EXPECT_EQ(Run({"experiment", "promote", "hold-ab", "short"}), 1);
  ASSERT_EQ(service_.promotes.size(), 2u);
  EXPECT_TRUE(service_.promotes[1].dry_run());
  EXPECT_THAT(out_.str(), HasSubstr("+ kind: RxAggPolicy"));
  EXPECT_THAT(err_.str(), HasSubstr("pass --yes"));

  // A terminal answering no: nothing written.
  env_.stdin_is_terminal = true;
  EXPECT_EQ(Run({"experiment", "promote", "hold-ab", "short"}, "n\n"), 1);
  EXPECT_EQ(service_.promotes.size(), 3u);
  EXPECT_THAT(err_.str(), HasSubstr("Write policy/hold-ab-short? [y/N]: "));
  EXPECT_THAT(err_.str(), HasSubstr("not confirmed"));

  // A terminal answering yes: dry run, then the write.
  ASSERT_EQ(Run({"experiment", "promote", "hold-ab", "short", "--name", "usb3-short"}, "y\n"), 0)
      << err_.str();
  ASSERT_EQ(service_.promotes.size(), 5u);
  EXPECT_TRUE(service_.promotes[3].dry_run());
  EXPECT_FALSE(service_.promotes[4].dry_run());
  EXPECT_EQ(service_.promotes[4].policy_name(), "usb3-short");
  EXPECT_FALSE(service_.promotes[4].has_priority());
  EXPECT_THAT(out_.str(), HasSubstr("policy/usb3-short written from experiment/hold-ab arm short "
                                    "(generation 1)\n"));

  // --yes writes without asking, even without a terminal.
  env_.stdin_is_terminal = false;
  ASSERT_EQ(Run({"experiment", "promote", "hold-ab", "short", "--yes", "--priority", "50"}), 0);
  ASSERT_EQ(service_.promotes.size(), 7u);
  EXPECT_FALSE(service_.promotes[6].dry_run());
  EXPECT_EQ(service_.promotes[6].priority(), 50);
  EXPECT_THAT(err_.str(), Not(HasSubstr("[y/N]")));
}

TEST(ParseSegmentTest, KeyValuePairs) {
  auto segment = ParseSegment("usb_speed=high, board=pi1");
  ASSERT_TRUE(segment.ok());
  EXPECT_EQ(segment->at("usb_speed"), "high");
  EXPECT_EQ(segment->at("board"), "pi1");
  EXPECT_TRUE(ParseSegment("")->empty());
  EXPECT_FALSE(ParseSegment("a=1,a=2").ok());
  EXPECT_FALSE(ParseSegment("=x").ok());
  EXPECT_FALSE(ParseSegment("a=").ok());
}

}  // namespace
}  // namespace rxfleet::cli
