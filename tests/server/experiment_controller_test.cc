// ExperimentController with an injected clock over a real SQLite file: lifecycle, period
// boundaries, guardrails, stop, completion, promotion, window validation, retention and a
// restart from the same database.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "prometheus/text_serializer.h"
#include "server/experiments/controller.h"
#include "tests/server/controller_test_util.h"
#include "tests/support/paths.h"

namespace rxfleet::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kName[] = "hold-ab";
const absl::Time kStart = absl::FromUnixSeconds(1800000000);

using ::rxfleet::server::testing::MakeAdapter;
using ::rxfleet::server::testing::MakeHost;

v1::Experiment HoldExperiment(const std::string& name = kName) {
  v1::Experiment e;
  e.mutable_metadata()->set_name(name);
  v1::ExperimentSpec* spec = e.mutable_spec();
  for (auto [arm, hold] : {std::pair<const char*, uint32_t>{"control", 1024}, {"short", 32}}) {
    v1::ExperimentArm* a = spec->add_arms();
    a->set_name(arm);
    a->mutable_settings()->set_hold_us(hold);
    a->set_weight(1);
  }
  spec->set_design(v1::EXPERIMENT_DESIGN_SWITCHBACK);
  spec->mutable_duration()->set_seconds(2 * 3600);
  spec->mutable_window_length()->set_seconds(60);
  spec->mutable_period_length()->set_seconds(600);
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

class ExperimentControllerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(uint64_t max_windows = 2000000) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({dir_.File("server.db")});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    metrics_ = std::make_unique<ServerMetrics>(std::make_shared<prometheus::Registry>());
    registry_ = std::make_unique<Registry>(
        RegistryOptions{},
        std::vector<HostRecord>{MakeHost("x86-1", "x86", 4, v1::USB_SPEED_SUPER),
                                MakeHost("pi1-1", "pi1", 3, v1::USB_SPEED_HIGH)});
    events_ = std::make_unique<EventLog>(EventLogOptions{}, std::vector<v1::Event>{}, 0);
    ExperimentControllerOptions options;
    options.clock = [this] { return now_; };
    options.retention = absl::Hours(24);
    options.max_windows_per_experiment = max_windows;
    absl::StatusOr<std::unique_ptr<ExperimentController>> controller = ExperimentController::Create(
        options,
        ExperimentControllerDeps{
            store_.get(), registry_.get(), events_.get(), metrics_.get(),
            [this] {
              ++bumps_;
              return absl::OkStatus();
            },
            [this](const v1::ApplyPolicyRequest& request, std::string_view /*ended*/,
                   std::string_view actor) -> absl::StatusOr<v1::ApplyPolicyResponse> {
              applied_.push_back(request);
              actors_.emplace_back(actor);
              v1::ApplyPolicyResponse response;
              *response.mutable_policy() = request.policy();
              return response;
            },
            nullptr,
            use_lease_ ? std::function<std::optional<LeaseFence>()>([this] { return fence_; })
                       : nullptr});
    ASSERT_TRUE(controller.ok()) << controller.status();
    controller_ = *std::move(controller);
  }

  void Reopen() {
    controller_.reset();
    store_.reset();
    Open();
  }

  v1::Experiment Create(v1::Experiment e = HoldExperiment()) {
    v1::CreateExperimentRequest request;
    *request.mutable_experiment() = std::move(e);
    absl::StatusOr<v1::CreateExperimentResponse> created = controller_->CreateExperiment(request);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->experiment() : v1::Experiment{};
  }

  v1::Experiment Get(const std::string& name = kName) {
    v1::GetExperimentRequest request;
    request.set_name(name);
    absl::StatusOr<v1::Experiment> e = controller_->GetExperiment(request);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : v1::Experiment{};
  }

  std::map<std::string, std::string> Arms(const std::string& host) {
    std::map<std::string, std::string> arms;
    for (const v1::ExperimentAssignment& a : controller_->Assignments(host)) {
      arms[a.adapter_id()] = a.arm();
    }
    return arms;
  }

  // Reports one window per adapter of both hosts for periods [from, to): the arm of the
  // period, `short` with 50 % more throughput, and a third of the frames dropped on pi1.
  void ReportPeriods(uint32_t from, uint32_t to) {
    for (uint32_t p = from; p < to; ++p) {
      const absl::Time period_start = kStart + p * absl::Minutes(10);
      now_ = period_start + absl::Seconds(1);
      std::vector<std::pair<std::string, v1::ExperimentAssignment>> assigned;
      for (const char* host : {"x86-1", "pi1-1"}) {
        for (const v1::ExperimentAssignment& a : controller_->Assignments(host)) {
          assigned.emplace_back(host, a);
        }
      }
      now_ = period_start + absl::Minutes(10);
      for (const auto& [host, a] : assigned) {
        v1::MetricWindow w;
        w.set_adapter_id(a.adapter_id());
        w.set_experiment(a.experiment());
        w.set_arm(a.arm());
        w.set_period_index(a.period_index());
        *w.mutable_window_start_time() = common::TimeToProto(period_start + absl::Minutes(2));
        w.mutable_window_duration()->set_seconds(60);
        w.set_valid(true);
        const bool treated = a.arm() == "short";
        const double bps =
            100e6 + (treated ? 50e6 + (a.adapter_id().back() - '0') * 1e6 : 0) + (p % 3) * 1e6;
        w.set_rx_bytes(static_cast<uint64_t>(bps * 60 / 8));
        w.set_rx_packets(10000);
        w.set_rx_dropped(treated && std::string(host) == "pi1-1" ? 5000 : 10);
        ASSERT_TRUE(controller_->AcceptWindow(host, w).ok()) << host << " " << a.adapter_id();
      }
      controller_->Tick();
    }
  }

  std::string Exposition() {
    return prometheus::TextSerializer().Serialize(metrics_->registry->Collect());
  }

  std::vector<std::string> EventReasons() {
    v1::ListEventsRequest filter;
    filter.set_involved_object_kind("Experiment");
    bool more = false;
    std::vector<std::string> reasons;
    for (const v1::Event& e : events_->List(filter, 0, 1000, &more)) reasons.push_back(e.reason());
    return reasons;
  }

  rxfleet::testing::TempDir dir_{"rxfleet-experiment-controller"};
  absl::Time now_ = kStart;
  // With use_lease_ (before Open), the scheduler runs only while fence_ is set.
  bool use_lease_ = false;
  std::optional<LeaseFence> fence_;
  int bumps_ = 0;
  std::vector<v1::ApplyPolicyRequest> applied_;
  std::vector<std::string> actors_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<ExperimentController> controller_;
};

TEST_F(ExperimentControllerTest, CreateStartsAssignsAndPublishes) {
  const v1::Experiment e = Create();
  EXPECT_EQ(e.status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_EQ(common::TimeFromProto(e.status().start_time()), kStart);
  EXPECT_NE(e.status().seed(), 0u);
  EXPECT_EQ(e.status().assigned_adapters(), 7u);
  EXPECT_EQ(e.metadata().generation(), 1);
  EXPECT_EQ(bumps_, 1);
  const std::vector<v1::ExperimentAssignment> a = controller_->Assignments("x86-1");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].period_index(), 0u);
  EXPECT_EQ(common::TimeFromProto(a[0].period_start_time()), kStart);
  EXPECT_EQ(common::TimeFromProto(a[0].period_end_time()), kStart + absl::Minutes(10));
  EXPECT_EQ(a[0].window_length().seconds(), 60);
  EXPECT_THAT(EventReasons(), ElementsAre("Created"));

  v1::CreateExperimentRequest again;
  *again.mutable_experiment() = HoldExperiment();
  EXPECT_EQ(controller_->CreateExperiment(again).status().code(), absl::StatusCode::kAlreadyExists);
  v1::CreateExperimentRequest invalid;
  *invalid.mutable_experiment() = HoldExperiment("other");
  invalid.mutable_experiment()->mutable_spec()->clear_design();
  EXPECT_EQ(controller_->CreateExperiment(invalid).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::CreateExperimentRequest dry;
  *dry.mutable_experiment() = HoldExperiment("dry");
  dry.set_dry_run(true);
  absl::StatusOr<v1::CreateExperimentResponse> dry_run = controller_->CreateExperiment(dry);
  ASSERT_TRUE(dry_run.ok()) << dry_run.status();
  EXPECT_EQ(dry_run->eligible_adapters_size(), 0);  // all taken by the running experiment
  v1::GetExperimentRequest get;
  get.set_name("dry");
  EXPECT_EQ(controller_->GetExperiment(get).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bumps_, 1);
}

TEST_F(ExperimentControllerTest, PeriodBoundariesPublishNewAssignmentsAndTheEndCompletes) {
  Create();
  now_ = kStart + absl::Minutes(5);
  EXPECT_LE(controller_->Tick(), kStart + absl::Minutes(6));  // next guardrail check at most
  EXPECT_EQ(bumps_, 1);
  now_ = kStart + absl::Minutes(10);
  controller_->Tick();
  EXPECT_EQ(bumps_, 2);
  for (const v1::ExperimentAssignment& a : controller_->Assignments("x86-1")) {
    EXPECT_EQ(a.period_index(), 1u);
  }
  // Every adapter runs both arms in each block of two periods.
  std::map<std::string, std::set<std::string>> seen;
  for (int p = 0; p < 4; ++p) {
    now_ = kStart + p * absl::Minutes(10);
    for (const auto& [adapter, arm] : Arms("x86-1")) seen[adapter].insert(arm);
  }
  for (const auto& [adapter, arms] : seen) EXPECT_EQ(arms.size(), 2u) << adapter;

  now_ = kStart + absl::Hours(2);
  controller_->Tick();
  const v1::Experiment done = Get();
  EXPECT_EQ(done.status().phase(), v1::EXPERIMENT_PHASE_COMPLETED);
  EXPECT_EQ(common::TimeFromProto(done.status().end_time()), kStart + absl::Hours(2));
  EXPECT_THAT(controller_->Assignments("x86-1"), IsEmpty());
  EXPECT_EQ(bumps_, 3);
  EXPECT_THAT(EventReasons(), ElementsAre("Created", "Completed"));
  EXPECT_THAT(Exposition(), ::testing::HasSubstr("rxfleet_server_experiment_info{experiment="
                                                 "\"hold-ab\",phase=\"completed\"} 1"));
  EXPECT_THAT(Exposition(), ::testing::Not(::testing::HasSubstr("phase=\"running\"")));
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  EXPECT_EQ(controller_->StopExperiment(stop).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Replicas: only the holder of the experiments lease completes experiments, and its write
// carries the fence, so a holder whose epoch is gone changes nothing.
TEST_F(ExperimentControllerTest, OnlyTheLeaseHolderSchedulesAndAStaleFenceChangesNothing) {
  use_lease_ = true;
  Reopen();
  Create();
  now_ = kStart + absl::Hours(2);
  controller_->Tick();
  EXPECT_EQ(Get().status().phase(), v1::EXPERIMENT_PHASE_RUNNING) << "scheduled without the lease";

  absl::StatusOr<Lease> lease = store_->AcquireLease(kExperimentsLease, "me", absl::Minutes(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  fence_ = LeaseFence{kExperimentsLease, "me", lease->epoch + 1};  // an epoch the store has not
  controller_->Tick();
  EXPECT_EQ(Get().status().phase(), v1::EXPERIMENT_PHASE_RUNNING) << "a stale fence wrote";

  fence_->epoch = lease->epoch;
  controller_->Tick();
  EXPECT_EQ(Get().status().phase(), v1::EXPERIMENT_PHASE_COMPLETED);
}

TEST_F(ExperimentControllerTest, GuardrailStopsTheArmInItsSegmentOnly) {
  Create();
  ReportPeriods(0, 4);
  const v1::Experiment e = Get();
  ASSERT_EQ(e.status().stopped_arms_size(), 1);
  EXPECT_EQ(e.status().stopped_arms(0).arm(), "short");
  EXPECT_EQ(e.status().stopped_arms(0).segment().at("board"), "pi1");
  EXPECT_EQ(e.status().stopped_arms(0).reason(), "GuardrailTripped");
  EXPECT_EQ(e.status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_THAT(EventReasons(), ::testing::Contains("GuardrailTripped"));
  // pi1 runs control in every later period; x86 keeps both arms.
  std::set<std::string> x86_arms;
  for (int p = 4; p < 8; ++p) {
    now_ = kStart + p * absl::Minutes(10);
    for (const auto& [adapter, arm] : Arms("pi1-1")) EXPECT_EQ(arm, "control") << adapter;
    for (const auto& [adapter, arm] : Arms("x86-1")) x86_arms.insert(arm);
  }
  EXPECT_EQ(x86_arms.size(), 2u);
  const std::string exposition = Exposition();
  EXPECT_THAT(exposition,
              ::testing::HasSubstr("rxfleet_server_experiment_arm_stopped{arm=\"short\","
                                   "experiment=\"hold-ab\",segment=\"board=pi1\"} 1"));
  EXPECT_THAT(exposition, ::testing::HasSubstr("rxfleet_server_experiment_info{experiment="
                                               "\"hold-ab\",phase=\"running\"} 1"));
  EXPECT_THAT(exposition,
              ::testing::HasSubstr("rxfleet_server_metric_windows_total{result=\"stored\"} 28"));

  // The report: a clear gain on x86 with an interval above zero, the text filled.
  v1::GetExperimentReportRequest request;
  request.set_name(kName);
  (*request.mutable_segment())["board"] = "x86";
  absl::StatusOr<v1::ExperimentReport> report = controller_->GetExperimentReport(request);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->segments_size(), 1);
  ASSERT_GE(report->segments(0).comparisons_size(), 1);
  EXPECT_EQ(report->segments(0).comparisons(0).metric(), "rx_throughput_bps");
  EXPECT_GT(report->segments(0).comparisons(0).ci95_low(), 0);
  EXPECT_NE(report->text().find("board=x86"), std::string::npos);
  (*request.mutable_segment())["site"] = "lab";
  EXPECT_EQ(controller_->GetExperimentReport(request).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Once the experiment ends, its stopped arms are no longer exported (no alert on them).
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  ASSERT_TRUE(controller_->StopExperiment(stop).ok());
  EXPECT_THAT(Exposition(),
              ::testing::Not(::testing::HasSubstr("rxfleet_server_experiment_arm_stopped{")));
  EXPECT_EQ(Get().status().stopped_arms_size(), 1);  // still in the status
}

TEST_F(ExperimentControllerTest, StopEndsAssignmentsAndLateWindowsAreRefused) {
  Create();
  ReportPeriods(0, 1);
  now_ = kStart + absl::Minutes(15);
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  stop.set_resource_version("999");
  EXPECT_EQ(controller_->StopExperiment(stop).status().code(), absl::StatusCode::kAborted);
  stop.clear_resource_version();
  stop.set_reason("enough");
  absl::StatusOr<v1::Experiment> stopped = controller_->StopExperiment(stop);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->status().phase(), v1::EXPERIMENT_PHASE_STOPPED);
  EXPECT_EQ(common::TimeFromProto(stopped->status().end_time()), now_);
  EXPECT_THAT(controller_->Assignments("x86-1"), IsEmpty());
  EXPECT_EQ(bumps_, 3);  // start, the boundary of period 1, the stop

  v1::MetricWindow w;
  w.set_adapter_id("port-1");
  w.set_experiment(kName);
  w.set_arm("control");
  *w.mutable_window_start_time() = common::TimeToProto(now_ - absl::Seconds(60));
  w.mutable_window_duration()->set_seconds(60);
  now_ += absl::Seconds(30);  // less than one window after the stop
  EXPECT_TRUE(controller_->AcceptWindow("x86-1", w).ok());
  now_ += absl::Seconds(60);
  EXPECT_EQ(controller_->AcceptWindow("x86-1", w).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExperimentControllerTest, WindowsAreValidatedAndCounted) {
  Create();
  now_ = kStart + absl::Minutes(3);
  v1::MetricWindow good;
  good.set_adapter_id("port-1");
  good.set_experiment(kName);
  good.set_arm("short");
  *good.mutable_window_start_time() = common::TimeToProto(kStart + absl::Minutes(1));
  good.mutable_window_duration()->set_seconds(60);
  good.set_busiest_core_ratio(0.5);
  ASSERT_TRUE(controller_->AcceptWindow("x86-1", good).ok());
  auto refused = [&](auto edit, absl::StatusCode code = absl::StatusCode::kInvalidArgument,
                     const std::string& host = "x86-1") {
    v1::MetricWindow w = good;
    edit(w);
    const absl::Status s = controller_->AcceptWindow(host, w);
    EXPECT_EQ(s.code(), code) << s;
    return std::string(s.message());
  };
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.set_adapter_id("port-9"); }),
              ::testing::StartsWith("metric_window.adapter_id"));
  EXPECT_THAT(refused([](v1::MetricWindow&) {}, absl::StatusCode::kInvalidArgument, "nohost"),
              ::testing::StartsWith("metric_window.adapter_id"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.set_experiment("other"); }),
              ::testing::StartsWith("metric_window.experiment"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.set_arm("long"); }),
              ::testing::StartsWith("metric_window.arm"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.set_arm(std::string(200, 'a')); }),
              ::testing::StartsWith("metric_window.arm"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) {
                w.set_busiest_core_ratio(std::numeric_limits<double>::quiet_NaN());
              }),
              ::testing::StartsWith("metric_window.busiest_core_ratio"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.mutable_rtt()->set_p99_seconds(-1); }),
              ::testing::StartsWith("metric_window.rtt.p99_seconds"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.mutable_window_duration()->set_seconds(121); }),
              ::testing::StartsWith("metric_window.window_duration"));
  EXPECT_THAT(refused([](v1::MetricWindow& w) { w.mutable_window_duration()->set_seconds(0); }),
              ::testing::StartsWith("metric_window.window_duration"));
  EXPECT_THAT(refused([&](v1::MetricWindow& w) {
                *w.mutable_window_start_time() = common::TimeToProto(now_ + absl::Minutes(5));
              }),
              ::testing::StartsWith("metric_window.window_start_time"));
  EXPECT_EQ(metrics_->metric_windows_stored->Value(), 1);
  EXPECT_EQ(metrics_->metric_windows_rejected->Value(), 10);
  ASSERT_TRUE(controller_->FlushWindows().ok());
  EXPECT_EQ(Get().status().valid_windows(), 0u);  // the agent did not mark it valid
}

TEST_F(ExperimentControllerTest, TheCapRefusesWindowsBeyondIt) {
  controller_.reset();
  store_.reset();
  Open(/*max_windows=*/2);
  Create();
  now_ = kStart + absl::Minutes(3);
  v1::MetricWindow w;
  w.set_adapter_id("port-1");
  w.set_experiment(kName);
  w.set_arm("control");
  *w.mutable_window_start_time() = common::TimeToProto(kStart + absl::Minutes(1));
  w.mutable_window_duration()->set_seconds(60);
  EXPECT_TRUE(controller_->AcceptWindow("x86-1", w).ok());
  EXPECT_TRUE(controller_->AcceptWindow("x86-1", w).ok());
  EXPECT_EQ(controller_->AcceptWindow("x86-1", w).code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ExperimentControllerTest, ARestartKeepsTheExperimentItsWindowsAndAssignments) {
  const v1::Experiment created = Create();
  ReportPeriods(0, 2);
  now_ = kStart + absl::Minutes(25);
  const std::map<std::string, std::string> before = Arms("x86-1");
  v1::GetExperimentReportRequest request;
  request.set_name(kName);
  absl::StatusOr<v1::ExperimentReport> report_before = controller_->GetExperimentReport(request);
  ASSERT_TRUE(report_before.ok()) << report_before.status();

  Reopen();
  const v1::Experiment loaded = Get();
  EXPECT_EQ(loaded.status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_EQ(loaded.status().seed(), created.status().seed());
  EXPECT_EQ(loaded.status().valid_windows(), 14u);  // 7 adapters x 2 periods
  EXPECT_EQ(Arms("x86-1"), before);
  absl::StatusOr<v1::ExperimentReport> report_after = controller_->GetExperimentReport(request);
  ASSERT_TRUE(report_after.ok()) << report_after.status();
  report_before->clear_generate_time();
  report_after->clear_generate_time();
  EXPECT_EQ(report_after->SerializeAsString(), report_before->SerializeAsString());
}

// Two servers on one database: the second follows the experiments the first creates, stops
// and deletes (Reload on a configuration change), assigns the same arms, and both report on
// the windows that either stored.
TEST_F(ExperimentControllerTest, ServersOnOneDatabaseShareExperimentsAndWindows) {
  absl::StatusOr<std::unique_ptr<Store>> other_store = Store::Open({dir_.File("server.db")});
  ASSERT_TRUE(other_store.ok()) << other_store.status();
  ServerMetrics other_metrics(std::make_shared<prometheus::Registry>());
  ExperimentControllerOptions options;
  options.clock = [this] { return now_; };
  absl::StatusOr<std::unique_ptr<ExperimentController>> created = ExperimentController::Create(
      options, ExperimentControllerDeps{other_store->get(), registry_.get(), events_.get(),
                                        &other_metrics, [] { return absl::OkStatus(); }, nullptr});
  ASSERT_TRUE(created.ok()) << created.status();
  ExperimentController& other = **created;
  const auto reload_other = [&] {
    absl::StatusOr<ConfigState> config = (*other_store)->LoadConfig();
    ASSERT_TRUE(config.ok()) << config.status();
    ASSERT_TRUE(other.Reload(config->revision).ok());
  };
  v1::GetExperimentRequest get;
  get.set_name(kName);
  EXPECT_EQ(other.GetExperiment(get).status().code(), absl::StatusCode::kNotFound);

  Create();
  reload_other();
  ASSERT_TRUE(other.GetExperiment(get).ok());
  EXPECT_EQ(other.GetExperiment(get)->status().phase(), v1::EXPERIMENT_PHASE_RUNNING);
  for (const char* host : {"x86-1", "pi1-1"}) {
    EXPECT_EQ(other.AssignmentBytes(host), controller_->AssignmentBytes(host)) << host;
  }

  // Period 0: x86-1 streams to this server, pi1-1 to the other.
  now_ = kStart + absl::Minutes(10);
  for (const auto& [host, server] :
       {std::pair<std::string, ExperimentController*>{"x86-1", controller_.get()},
        {"pi1-1", &other}}) {
    now_ = kStart + absl::Seconds(1);
    const std::vector<v1::ExperimentAssignment> assigned = server->Assignments(host);
    now_ = kStart + absl::Minutes(10);
    for (const v1::ExperimentAssignment& a : assigned) {
      v1::MetricWindow w;
      w.set_adapter_id(a.adapter_id());
      w.set_experiment(a.experiment());
      w.set_arm(a.arm());
      *w.mutable_window_start_time() = common::TimeToProto(kStart + absl::Minutes(2));
      w.mutable_window_duration()->set_seconds(60);
      w.set_valid(true);
      w.set_rx_bytes(100000000);
      w.set_rx_packets(1000);
      ASSERT_TRUE(server->AcceptWindow(host, w).ok()) << host;
    }
  }
  // The other server writes its buffered windows with its next tick.
  ASSERT_TRUE(other.FlushWindows().ok());
  v1::GetExperimentReportRequest request;
  request.set_name(kName);
  absl::StatusOr<v1::ExperimentReport> here = controller_->GetExperimentReport(request);
  absl::StatusOr<v1::ExperimentReport> there = other.GetExperimentReport(request);
  ASSERT_TRUE(here.ok()) << here.status();
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_EQ(here->segments_size(), 2) << "both hosts' windows, whichever server stored them";
  here->clear_generate_time();
  there->clear_generate_time();
  EXPECT_EQ(here->SerializeAsString(), there->SerializeAsString());
  // Read again: nothing is counted twice.
  absl::StatusOr<v1::ExperimentReport> again = controller_->GetExperimentReport(request);
  ASSERT_TRUE(again.ok()) << again.status();
  again->clear_generate_time();
  EXPECT_EQ(again->SerializeAsString(), here->SerializeAsString());

  // Stopped here: the other server ends its assignments; deleted here: gone there too.
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  ASSERT_TRUE(controller_->StopExperiment(stop).ok());
  reload_other();
  EXPECT_EQ(other.GetExperiment(get)->status().phase(), v1::EXPERIMENT_PHASE_STOPPED);
  EXPECT_THAT(other.Assignments("x86-1"), IsEmpty());
  v1::DeleteExperimentRequest remove;
  remove.set_name(kName);
  ASSERT_TRUE(controller_->DeleteExperiment(remove).ok());
  reload_other();
  EXPECT_EQ(other.GetExperiment(get).status().code(), absl::StatusCode::kNotFound);
}

// A restarted server keeps probing: the probe plan of a running experiment is rebuilt when
// the experiments are loaded (it used to be lost, and the assignments carried no probe).
TEST_F(ExperimentControllerTest, ARestartKeepsTheProbePlan) {
  v1::Experiment e = HoldExperiment();
  v1::ProbeSpec* probe = e.mutable_spec()->mutable_probe();
  probe->set_server("127.0.0.1:5201");
  probe->set_protocol(v1::PROBE_PROTOCOL_TCP);
  probe->set_direction(v1::PROBE_DIRECTION_REVERSE);
  probe->mutable_duration()->set_seconds(5);
  e.mutable_spec()->add_secondary_metrics("probe_rx_throughput_bps");
  Create(e);
  const auto probing = [&] {
    int n = 0;
    for (const char* host : {"x86-1", "pi1-1"}) {
      for (const v1::ExperimentAssignment& a : controller_->Assignments(host)) {
        n += a.has_probe() ? 1 : 0;
      }
    }
    return n;
  };
  ASSERT_EQ(probing(), 7);
  Reopen();
  EXPECT_EQ(probing(), 7);
}

TEST_F(ExperimentControllerTest, RetentionDeletesWindowsOfLongEndedExperiments) {
  Create();
  ReportPeriods(0, 2);
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  ASSERT_TRUE(controller_->StopExperiment(stop).ok());
  controller_->Tick();
  ASSERT_EQ((*store_->CountWindows())[kName].total, 14u);
  now_ += absl::Hours(23);
  controller_->Tick();  // not yet: within the retention
  EXPECT_EQ((*store_->CountWindows())[kName].total, 14u);
  now_ += absl::Hours(2);
  controller_->Tick();
  EXPECT_THAT(*store_->CountWindows(), IsEmpty());
  EXPECT_EQ(Get().status().phase(), v1::EXPERIMENT_PHASE_STOPPED);  // the experiment stays
}

TEST_F(ExperimentControllerTest, AnAdapterTakesPartInTheOldestExperimentOnly) {
  Create();
  now_ += absl::Seconds(1);
  v1::Experiment pi1_only = HoldExperiment("pi1-only");
  pi1_only.mutable_spec()->mutable_selector()->add_usb_speeds(v1::USB_SPEED_HIGH);
  v1::CreateExperimentRequest request;
  *request.mutable_experiment() = pi1_only;
  absl::StatusOr<v1::CreateExperimentResponse> second = controller_->CreateExperiment(request);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->eligible_adapters_size(), 0);
  for (const v1::ExperimentAssignment& a : controller_->Assignments("pi1-1")) {
    EXPECT_EQ(a.experiment(), kName);
  }
  EXPECT_EQ(Get("pi1-only").status().assigned_adapters(), 0u);
  v1::StopExperimentRequest stop;
  stop.set_name(kName);
  ASSERT_TRUE(controller_->StopExperiment(stop).ok());
  for (const v1::ExperimentAssignment& a : controller_->Assignments("pi1-1")) {
    EXPECT_EQ(a.experiment(), "pi1-only");
  }
  EXPECT_EQ(controller_->Assignments("pi1-1").size(), 3u);
  EXPECT_THAT(controller_->Assignments("x86-1"), IsEmpty());
  v1::ListExperimentsRequest list;
  list.set_page_size(1);
  absl::StatusOr<v1::ListExperimentsResponse> page = controller_->ListExperiments(list);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->experiments_size(), 1);
  EXPECT_EQ(page->experiments(0).metadata().name(), "pi1-only");  // newest first
  list.set_page_token(page->next_page_token());
  page = controller_->ListExperiments(list);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->experiments_size(), 1);
  EXPECT_EQ(page->experiments(0).metadata().name(), kName);
  list.clear_page_token();
  list.set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  EXPECT_EQ(controller_->ListExperiments(list)->experiments_size(), 1);
}

TEST_F(ExperimentControllerTest, PromoteDryRunAndApply) {
  Create();
  v1::PromoteExperimentRequest request;
  request.set_name(kName);
  request.set_arm("short");
  (*request.mutable_segment())["board"] = "x86";
  request.set_dry_run(true);
  absl::StatusOr<v1::PromoteExperimentResponse> dry = controller_->PromoteExperiment(request);
  ASSERT_TRUE(dry.ok()) << dry.status();
  ASSERT_EQ(applied_.size(), 1u);
  EXPECT_TRUE(applied_[0].dry_run());
  EXPECT_EQ(dry->policy().metadata().name(), "hold-ab-short");
  EXPECT_EQ(dry->policy().spec().settings().hold_us(), 32u);
  EXPECT_EQ(dry->policy().spec().selector().match_labels().at("board"), "x86");
  EXPECT_THAT(EventReasons(), ElementsAre("Created"));
  request.set_dry_run(false);
  ASSERT_TRUE(controller_->PromoteExperiment(request).ok());
  ASSERT_EQ(applied_.size(), 2u);
  EXPECT_FALSE(applied_[1].dry_run());
  EXPECT_THAT(EventReasons(), ElementsAre("Created", "Promoted"));
  request.set_arm("long");
  EXPECT_EQ(controller_->PromoteExperiment(request).status().code(), absl::StatusCode::kNotFound);
  request.set_arm("short");
  request.mutable_segment()->clear();
  (*request.mutable_segment())["site"] = "lab";
  EXPECT_EQ(controller_->PromoteExperiment(request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ExperimentControllerTest, PromoteNamesASubsetOfTheSegmentKeysAsTheOperator) {
  v1::Experiment e = HoldExperiment();
  e.mutable_spec()->add_segment_label_keys("site");  // segments by board and site
  Create(e);
  v1::PromoteExperimentRequest request;
  request.set_name(kName);
  request.set_arm("short");
  (*request.mutable_segment())["board"] = "x86";  // site left out
  absl::StatusOr<v1::PromoteExperimentResponse> promoted =
      controller_->PromoteExperiment(request, "token:alice");
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  const auto& labels = promoted->policy().spec().selector().match_labels();
  EXPECT_EQ(labels.at("board"), "x86");
  EXPECT_FALSE(labels.contains("site"));
  ASSERT_EQ(actors_.size(), 1u);
  EXPECT_EQ(actors_[0], "token:alice");
  (*request.mutable_segment())["chip"] = "rtl8922au";  // not a segment key of this experiment
  EXPECT_THAT(controller_->PromoteExperiment(request, "token:alice").status().message(),
              ::testing::HasSubstr("'chip' is not a segment key"));
}

}  // namespace
}  // namespace rxfleet::server
