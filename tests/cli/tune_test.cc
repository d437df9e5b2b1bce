// The tune verbs end to end in-process: RunRxfleetctl with the real gRPC client against a fake
// FleetService on loopback (port 0) that records what arrives and answers with the canned
// tunings of tests/fixtures/cli/responses/tunings.textproto. Checks what is sent (the document
// converted to the API with every field explicit, dry-run flags, segments, preconditions),
// what is printed (tables and describe against golden files) and exit codes.
#include "cli/commands/tune.h"

#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TuningFile(std::string_view name) {
  return rxfleet::testing::SourcePath(
      absl::StrCat("tests/fixtures/cli/tunings/", std::string(name)));
}

class FakeFleetService final : public v1::FleetService::Service {
 public:
  FakeFleetService() : stored(testing::LoadResponse<v1::ListHoldTuningsResponse>("tunings")) {}

  grpc::Status CreateHoldTuning(grpc::ServerContext*, const v1::CreateHoldTuningRequest* request,
                                v1::CreateHoldTuningResponse* response) override {
    std::lock_guard lock(mu_);
    creates.push_back(*request);
    if (request->tuning().metadata().name() == "taken") {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          "the name taken is used by an experiment");
    }
    *response->mutable_tuning() = request->tuning();
    v1::HoldTuningStatus& status = *response->mutable_tuning()->mutable_status();
    for (const auto& [speed, board, adapters] :
         {std::tuple<const char*, const char*, uint32_t>{"super", "x86", 10}, {"high", "pi1", 4}}) {
      v1::HoldTuningSegment* segment = status.add_segments();
      (*segment->mutable_segment())["usb_speed"] = speed;
      (*segment->mutable_segment())["board"] = board;
      segment->set_adapters(adapters);
    }
    response->set_eligible_adapters(14);
    return grpc::Status::OK;
  }

  // Two pages: the first tuning, then the rest.
  grpc::Status ListHoldTunings(grpc::ServerContext*, const v1::ListHoldTuningsRequest* request,
                               v1::ListHoldTuningsResponse* response) override {
    std::lock_guard lock(mu_);
    lists.push_back(*request);
    if (empty) return grpc::Status::OK;
    if (request->page_token().empty()) {
      *response->add_tunings() = stored.tunings(0);
      response->set_next_page_token("page-2");
      return grpc::Status::OK;
    }
    for (int i = 1; i < stored.tunings_size(); ++i) *response->add_tunings() = stored.tunings(i);
    return grpc::Status::OK;
  }

  grpc::Status GetHoldTuning(grpc::ServerContext*, const v1::GetHoldTuningRequest* request,
                             v1::HoldTuning* response) override {
    std::lock_guard lock(mu_);
    for (const v1::HoldTuning& tuning : stored.tunings()) {
      if (tuning.metadata().name() == request->name()) {
        *response = tuning;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "hold tuning " + request->name() + " not found");
  }

  grpc::Status ApproveHoldTuning(grpc::ServerContext*, const v1::ApproveHoldTuningRequest* request,
                                 v1::ApproveHoldTuningResponse* response) override {
    std::lock_guard lock(mu_);
    approves.push_back(*request);
    if (request->resource_version() == "1") {
      return grpc::Status(grpc::StatusCode::ABORTED, "resource version 1 is stale (now 12)");
    }
    if (request->name() == "hold-pi") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "hold tuning hold-pi has no proposal to approve");
    }
    *response->mutable_tuning() = stored.tunings(0);
    v1::Policy& policy = *response->add_policies();
    policy.mutable_metadata()->set_name("hold-usb3-super-x86");
    policy.mutable_spec()->mutable_selector()->add_chips("rtl8922au");
    policy.mutable_spec()->mutable_selector()->add_usb_speeds(v1::USB_SPEED_SUPER);
    (*policy.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "x86";
    policy.mutable_spec()->mutable_settings()->set_hold_us(128);
    return grpc::Status::OK;
  }

  grpc::Status StopHoldTuning(grpc::ServerContext*, const v1::StopHoldTuningRequest* request,
                              v1::HoldTuning* response) override {
    std::lock_guard lock(mu_);
    stops.push_back(*request);
    response->mutable_metadata()->set_name(request->name());
    response->mutable_status()->set_phase(v1::HOLD_TUNING_PHASE_STOPPED);
    return grpc::Status::OK;
  }

  grpc::Status DeleteHoldTuning(grpc::ServerContext*, const v1::DeleteHoldTuningRequest* request,
                                v1::HoldTuning* response) override {
    std::lock_guard lock(mu_);
    deletes.push_back(*request);
    if (request->name() == "nope") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "hold tuning nope not found");
    }
    response->mutable_metadata()->set_name(request->name());
    return grpc::Status::OK;
  }

  std::mutex mu_;
  v1::ListHoldTuningsResponse stored;
  bool empty = false;
  std::vector<v1::CreateHoldTuningRequest> creates;
  std::vector<v1::ListHoldTuningsRequest> lists;
  std::vector<v1::ApproveHoldTuningRequest> approves;
  std::vector<v1::StopHoldTuningRequest> stops;
  std::vector<v1::DeleteHoldTuningRequest> deletes;
};

class TuneVerbsTest : public ::testing::Test {
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

TEST_F(TuneVerbsTest, CreateSendsTheDocumentWithItsDefaultsExplicit) {
  ASSERT_EQ(Run({"tune", "create", "-f", TuningFile("hold-usb3.yaml"), "--dry-run"}), 0)
      << err_.str();
  ASSERT_EQ(service_.creates.size(), 1u);
  const v1::CreateHoldTuningRequest& sent = service_.creates[0];
  EXPECT_TRUE(sent.dry_run());
  EXPECT_EQ(sent.tuning().metadata().name(), "hold-usb3");
  EXPECT_EQ(sent.tuning().metadata().labels().at("team"), "edge");
  const v1::HoldTuningSpec& spec = sent.tuning().spec();
  EXPECT_THAT(spec.selector().chips(), ElementsAre("rtl8922au"));
  EXPECT_THAT(spec.segment_label_keys(), ElementsAre("usb_speed", "board"));
  EXPECT_THAT(spec.candidate_hold_us(), ElementsAre(32u, 64u, 128u, 256u, 512u, 1024u));
  EXPECT_EQ(spec.objective_metric(), "rx_throughput_bps");
  EXPECT_EQ(spec.objective_direction(), v1::TUNING_DIRECTION_MAXIMIZE);
  ASSERT_EQ(spec.guardrails_size(), 1);
  EXPECT_EQ(spec.guardrails(0).comparator(), v1::COMPARATOR_GREATER_THAN);  // trips when above
  EXPECT_DOUBLE_EQ(spec.guardrails(0).threshold(), 0.05);
  EXPECT_EQ(spec.max_windows(), 20000u);
  EXPECT_EQ(spec.period_length().seconds(), 1800);
  EXPECT_EQ(spec.burn_in().seconds(), 300);
  // Defaults of the document, sent explicitly (the server takes every field as given).
  EXPECT_DOUBLE_EQ(spec.adapter_share(), 0.2);
  EXPECT_DOUBLE_EQ(spec.min_effect(), 0.02);
  EXPECT_DOUBLE_EQ(spec.recheck_share(), 0.05);
  EXPECT_EQ(spec.window_length().seconds(), 60);
  EXPECT_EQ(spec.min_adapters_per_arm(), 3u);
  EXPECT_EQ(spec.min_windows_per_arm(), 10u);
  EXPECT_FALSE(spec.auto_apply());
  EXPECT_FALSE(sent.tuning().has_status());
  EXPECT_EQ(out_.str(),
            "holdtuning/hold-usb3 created (dry run): 14 eligible adapters in 2 segments\n"
            "  SEGMENT                     ADAPTERS\n"
            "  usb_speed=super,board=x86   10\n"
            "  usb_speed=high,board=pi1    4\n");

  // From standard input, stored for real.
  std::ifstream file(TuningFile("hold-usb3.yaml"));
  std::stringstream text;
  text << file.rdbuf();
  ASSERT_EQ(Run({"tune", "create", "-f", "-"}, text.str()), 0) << err_.str();
  ASSERT_EQ(service_.creates.size(), 2u);
  EXPECT_FALSE(service_.creates[1].dry_run());
  EXPECT_THAT(out_.str(), StartsWith("holdtuning/hold-usb3 created: 14 eligible adapters in 2 "
                                     "segments\n"));
}

TEST_F(TuneVerbsTest, BadDocumentsAreRejectedBeforeAnyCall) {
  EXPECT_EQ(Run({"tune", "create", "-f", TuningFile("bad-hold.yaml")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("bad-hold.yaml:6:"));
  EXPECT_THAT(err_.str(), HasSubstr("33us"));
  EXPECT_EQ(Run({"tune", "create", "-f", TuningFile("wrong-direction.yaml")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("wrong-direction.yaml:7:"));
  EXPECT_THAT(err_.str(), HasSubstr("better when lower"));
  // An Experiment is not a HoldTuning.
  EXPECT_EQ(Run({"tune", "create", "-f",
                 rxfleet::testing::SourcePath("tests/fixtures/cli/experiments/hold-ab.yaml")}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("hold-ab.yaml:4:7: kind: unsupported kind 'Experiment'"));
  EXPECT_EQ(Run({"tune", "create", "-f", TuningFile("missing.yaml")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("missing.yaml: cannot be read: No such file or directory"));
  EXPECT_EQ(Run({"tune", "create"}), 2);  // -f is required
  EXPECT_TRUE(service_.creates.empty());
}

TEST_F(TuneVerbsTest, ANameTakenIsAConflict) {
  std::ifstream file(TuningFile("hold-usb3.yaml"));
  std::stringstream text;
  text << file.rdbuf();
  std::string document = text.str();
  document.replace(document.find("hold-usb3"), 9, "taken");
  EXPECT_EQ(Run({"tune", "create", "-f", "-"}, document), 4);
  EXPECT_THAT(err_.str(), HasSubstr("error: holdtuning/taken (<stdin>:1): the name taken is used "
                                    "by an experiment"));
}

TEST_F(TuneVerbsTest, GetListsEveryPageAsATable) {
  ASSERT_EQ(Run({"tune", "get"}), 0) << err_.str();
  ASSERT_EQ(service_.lists.size(), 2u);
  EXPECT_EQ(service_.lists[1].page_token(), "page-2");
  testing::ExpectGolden("tune_get_table.txt", out_.str());
  ASSERT_EQ(Run({"tune", "get", "-o", "wide"}), 0) << err_.str();
  testing::ExpectGolden("tune_get_wide.txt", out_.str());
  ASSERT_EQ(Run({"tune", "get", "-o", "name"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "holdtuning/hold-pi\nholdtuning/hold-usb3\n");
  ASSERT_EQ(Run({"tune", "get", "-o", "json"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("{\n  \"tunings\": [\n"));
  EXPECT_THAT(out_.str(), HasSubstr("\"policyName\": \"hold-usb3-super-x86\""));
}

TEST_F(TuneVerbsTest, GetOneAndEmptyLists) {
  ASSERT_EQ(Run({"tune", "get", "hold-usb3", "-o", "yaml"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("metadata:\n  name: hold-usb3\n"));
  EXPECT_THAT(out_.str(), HasSubstr("objectiveDirection: TUNING_DIRECTION_MAXIMIZE"));
  ASSERT_EQ(Run({"tune", "get", "hold-pi"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("NAME      PHASE     SEGMENTS   PROPOSED   ADAPTERS   AGE\n"
                                     "hold-pi   Stopped   1          0          0          2d\n"));
  EXPECT_EQ(Run({"tune", "get", "nope"}), 3);
  EXPECT_THAT(err_.str(), HasSubstr("error: holdtuning/nope: hold tuning nope not found"));
  EXPECT_EQ(Run({"tune", "get", "-o", "xml"}), 2);
  EXPECT_EQ(Run({"tune", "get", "Bad_Name"}), 2);

  service_.empty = true;
  ASSERT_EQ(Run({"tune", "get"}), 0);
  EXPECT_EQ(out_.str(), "");
  EXPECT_THAT(err_.str(), HasSubstr("No resources found."));
  ASSERT_EQ(Run({"tune", "get", "-o", "json"}), 0);
  EXPECT_EQ(out_.str(), "{\n  \"tunings\": []\n}\n");
}

TEST_F(TuneVerbsTest, DescribeShowsSpecSegmentsProposalAndEvidence) {
  ASSERT_EQ(Run({"tune", "describe", "hold-usb3"}), 0) << err_.str();
  testing::ExpectGolden("tune_describe.txt", out_.str());
  // The evidence comes last, verbatim.
  EXPECT_THAT(out_.str(),
              ::testing::EndsWith(service_.stored.tunings(0).status().segments(0).evidence_text()));
  ASSERT_EQ(Run({"tune", "describe", "hold-pi"}), 0) << err_.str();
  testing::ExpectGolden("tune_describe_stopped.txt", out_.str());
  EXPECT_EQ(Run({"tune", "describe", "nope"}), 3);
  EXPECT_THAT(err_.str(), HasSubstr("holdtuning/nope: "));
  EXPECT_EQ(Run({"tune", "describe"}), 2);
}

TEST_F(TuneVerbsTest, ApproveSendsTheSegmentAndPrintsThePolicies) {
  ASSERT_EQ(Run({"tune", "approve", "hold-usb3", "--segment", "usb_speed=super", "--segment",
                 "board=x86", "--dry-run", "--resource-version", "12"}),
            0)
      << err_.str();
  ASSERT_EQ(service_.approves.size(), 1u);
  const v1::ApproveHoldTuningRequest& sent = service_.approves[0];
  EXPECT_EQ(sent.name(), "hold-usb3");
  EXPECT_TRUE(sent.dry_run());
  EXPECT_EQ(sent.resource_version(), "12");
  ASSERT_EQ(sent.segment_size(), 2);
  EXPECT_EQ(sent.segment().at("usb_speed"), "super");
  EXPECT_EQ(sent.segment().at("board"), "x86");
  EXPECT_EQ(out_.str(),
            "holdtuning/hold-usb3 approved (dry run): 1 policy would be written\n"
            "  POLICY                HOLD    SELECTOR\n"
            "  hold-usb3-super-x86   128µs   board=x86,usb=super,chip=rtl8922au\n"
            "Dry run: nothing written.\n");

  // Every segment with a proposal, for real; the comma form works too.
  ASSERT_EQ(Run({"tune", "approve", "hold-usb3"}), 0) << err_.str();
  ASSERT_EQ(service_.approves.size(), 2u);
  EXPECT_FALSE(service_.approves[1].dry_run());
  EXPECT_TRUE(service_.approves[1].segment().empty());
  EXPECT_THAT(out_.str(), StartsWith("holdtuning/hold-usb3 approved: 1 policy written\n"));
  ASSERT_EQ(Run({"tune", "approve", "hold-usb3", "--segment", "usb_speed=super,board=x86"}), 0);
  EXPECT_EQ(service_.approves[2].segment_size(), 2);
}

TEST_F(TuneVerbsTest, ApproveErrors) {
  EXPECT_EQ(Run({"tune", "approve", "hold-usb3", "--segment", "usb_speed"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("--segment: 'usb_speed' must be key=value"));
  EXPECT_EQ(Run({"tune", "approve", "hold-usb3", "--segment", "a=1", "--segment", "a=2"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("--segment: key 'a' given twice"));
  EXPECT_TRUE(service_.approves.empty());
  EXPECT_EQ(Run({"tune", "approve", "hold-usb3", "--resource-version", "1"}), 4);
  EXPECT_THAT(err_.str(), HasSubstr("holdtuning/hold-usb3: resource version 1 is stale"));
  EXPECT_EQ(Run({"tune", "approve", "hold-pi"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("holdtuning/hold-pi: hold tuning hold-pi has no proposal"));
}

TEST_F(TuneVerbsTest, StopSendsTheReasonAndDeleteTheVersion) {
  ASSERT_EQ(Run({"tune", "stop", "hold-usb3", "--reason", "pi1 drops frames", "--resource-version",
                 "12"}),
            0)
      << err_.str();
  ASSERT_EQ(service_.stops.size(), 1u);
  EXPECT_EQ(service_.stops[0].name(), "hold-usb3");
  EXPECT_EQ(service_.stops[0].reason(), "pi1 drops frames");
  EXPECT_EQ(service_.stops[0].resource_version(), "12");
  EXPECT_EQ(out_.str(),
            "holdtuning/hold-usb3 stopped (phase Stopped); its adapters return to their "
            "policies\n");

  ASSERT_EQ(Run({"tune", "delete", "hold-pi", "--resource-version", "30"}), 0) << err_.str();
  ASSERT_EQ(service_.deletes.size(), 1u);
  EXPECT_EQ(service_.deletes[0].name(), "hold-pi");
  EXPECT_EQ(service_.deletes[0].resource_version(), "30");
  EXPECT_EQ(out_.str(), "holdtuning/hold-pi deleted\n");
  EXPECT_EQ(Run({"tune", "delete", "nope"}), 3);
  EXPECT_THAT(err_.str(), HasSubstr("error: holdtuning/nope: hold tuning nope not found"));
}

}  // namespace
}  // namespace rxfleet::cli
