// Hold tunings in the ExperimentController with an injected clock over a real SQLite file and a
// real policy set: segments found from the registry, only explorers assigned, windows reported
// by simulated adapters whose metrics follow a SYNTHETIC hold model (throughput peaking at
// 128 µs on SuperSpeed; half the frames dropped below 512 µs on a Pi 1 over USB 2), the
// proposal, approval through the policy path, guardrail eliminations, stop, delete, the shared
// name space with experiments and a restart from the same database.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "common/proto/tuning.h"
#include "common/tuning/hold_tuning.h"
#include "common/units.h"
#include "server/experiments/controller.h"
#include "server/registry/policy_set.h"
#include "tests/server/controller_test_util.h"
#include "tests/support/paths.h"

namespace rxfleet::server {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr char kName[] = "hold-tune";
const absl::Time kStart = absl::FromUnixSeconds(1800000000);

// Six candidates, one segment per USB speed and board; 10-minute periods of 1-minute windows.
constexpr char kTuning[] = R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: hold-tune}
spec:
  selector: {chips: [rtl8922au]}
  segments: [usb_speed, board]
  candidates: [32us, 64us, 128us, 256us, 512us, 1024us]
  objective: {metric: rx_throughput_bps, direction: maximize}
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
  budget: {adapterShare: 0.5, maxWindows: 2400}
  minEffect: 0.02
  windowLength: 60s
  periodLength: 10m
  burnIn: 1m
  recheckShare: 0.25
)";

using ::rxfleet::server::testing::MakeAdapter;
using ::rxfleet::server::testing::MakeHost;

// SYNTHETIC throughput (bit/s) and drop ratio of an adapter running `hold_us`.
struct Synthetic {
  double bps = 0;
  double drop_ratio = 0;
};
Synthetic Model(const std::string& host, uint32_t hold_us) {
  if (host == "x86-1") {  // peaks at 128 µs
    const std::map<uint32_t, double> mbps = {{32, 800},  {64, 900},  {128, 1000},
                                             {256, 850}, {512, 700}, {1024, 600}};
    return {mbps.at(hold_us) * 1e6, 0};
  }
  // Pi 1 over USB 2: shorter holds deliver a little more but drop half the frames below 512 µs.
  return {(hold_us >= 512 ? 48e6 - (hold_us - 512) * 8e3 : 50e6), hold_us < 512 ? 0.5 : 0.001};
}

tuning::HoldTuning MustParse(const std::string& text) {
  absl::StatusOr<tuning::HoldTuning> t = tuning::ParseHoldTuning(text, "tuning.yaml");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : tuning::HoldTuning{};
}

class TuningControllerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({dir_.File("server.db")});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    metrics_ = std::make_unique<ServerMetrics>(std::make_shared<prometheus::Registry>());
    registry_ = std::make_unique<Registry>(
        RegistryOptions{},
        std::vector<HostRecord>{MakeHost("x86-1", "x86", 8, v1::USB_SPEED_SUPER),
                                MakeHost("pi1-1", "pi1", 8, v1::USB_SPEED_HIGH)});
    events_ = std::make_unique<EventLog>(EventLogOptions{}, std::vector<v1::Event>{}, 0);
    ExperimentControllerOptions options;
    options.clock = [this] { return now_; };
    options.max_hold_tunings = max_hold_tunings_;
    options.max_tuning_segments = max_tuning_segments_;
    absl::StatusOr<std::unique_ptr<ExperimentController>> controller = ExperimentController::Create(
        options, ExperimentControllerDeps{
                     store_.get(), registry_.get(), events_.get(), metrics_.get(),
                     [this] {
                       ++bumps_;
                       return absl::OkStatus();
                     },
                     [this](const v1::ApplyPolicyRequest& request, std::string_view ended,
                            std::string_view actor) -> absl::StatusOr<v1::ApplyPolicyResponse> {
                       applied_.push_back(request);
                       actors_.emplace_back(actor);
                       EXPECT_EQ(ended, kName);
                       v1::ApplyPolicyResponse response;
                       *response.mutable_policy() = request.policy();
                       if (!request.dry_run()) {
                         v1::Policy stored = request.policy();
                         stored.mutable_metadata()->set_resource_version(absl::StrCat(++version_));
                         stored.mutable_metadata()->set_generation(1);
                         policies_.Put(stored, version_);
                       }
                       return response;
                     },
                     &policies_, nullptr});
    ASSERT_TRUE(controller.ok()) << controller.status();
    controller_ = *std::move(controller);
  }

  void Reopen() {
    controller_.reset();
    store_.reset();
    Open();
  }

  absl::StatusOr<v1::CreateHoldTuningResponse> Create(const std::string& text = kTuning,
                                                      bool dry_run = false) {
    v1::CreateHoldTuningRequest request;
    *request.mutable_tuning() = tuning::HoldTuningToProto(MustParse(text));
    request.set_dry_run(dry_run);
    return controller_->CreateHoldTuning(request);
  }

  v1::HoldTuning Get() {
    v1::GetHoldTuningRequest request;
    request.set_name(kName);
    absl::StatusOr<v1::HoldTuning> t = controller_->GetHoldTuning(request);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : v1::HoldTuning{};
  }

  const v1::HoldTuningSegment* Segment(const v1::HoldTuning& t, const std::string& board) {
    for (const v1::HoldTuningSegment& s : t.status().segments()) {
      if (s.segment().at("board") == board) return &s;
    }
    return nullptr;
  }

  // One simulated minute: the assignments in effect over the minute, then each assigned
  // adapter's window for it (invalid in burn-in), then a scheduler tick. Also records what ran.
  void Minute() {
    std::vector<std::pair<std::string, v1::ExperimentAssignment>> assigned;
    for (const char* host : {"x86-1", "pi1-1"}) {
      for (const v1::ExperimentAssignment& a : controller_->Assignments(host)) {
        assigned.emplace_back(host, a);
      }
    }
    const absl::Time start = now_;
    now_ += absl::Minutes(1);
    const v1::HoldTuning t = Get();
    std::map<std::string, size_t> on_challenger;  // host -> adapters off the incumbent
    for (const auto& [host, a] : assigned) {
      ran_[host].insert(a.settings().hold_us());
      const v1::HoldTuningSegment* seg = Segment(t, host == "x86-1" ? "x86" : "pi1");
      if (seg != nullptr && a.settings().hold_us() != seg->incumbent_hold_us()) {
        ++on_challenger[host];
        last_run_[host][a.settings().hold_us()] = start;
      }
      v1::MetricWindow w;
      w.set_adapter_id(a.adapter_id());
      w.set_experiment(a.experiment());
      w.set_arm(a.arm());
      w.set_period_index(a.period_index());
      *w.mutable_window_start_time() = common::TimeToProto(start);
      w.mutable_window_duration()->set_seconds(60);
      const bool burn_in = start < common::TimeFromProto(a.period_start_time()) +
                                       common::DurationFromProto(a.burn_in());
      w.set_valid(!burn_in);
      if (burn_in) w.set_invalid_reason("burn_in");
      const Synthetic m = Model(host, a.settings().hold_us());
      const double level = 1 + 0.01 * (a.adapter_id().back() - '0') + noise_(rng_);
      w.set_rx_bytes(static_cast<uint64_t>(m.bps * level * 60 / 8));
      w.set_rx_packets(static_cast<uint64_t>(m.bps * level * 60 / 8 / 1500));
      w.set_rx_dropped(static_cast<uint64_t>(w.rx_packets() * m.drop_ratio / (1 - m.drop_ratio)));
      ASSERT_TRUE(controller_->AcceptWindow(host, w).ok()) << host << " " << a.adapter_id();
    }
    for (const auto& [host, n] : on_challenger) {
      max_on_challenger_[host] = std::max(max_on_challenger_[host], n);
    }
    controller_->Tick();
  }

  // Runs minutes until both segments have left exploring, at most `limit` minutes.
  void RunUntilDecided(int limit) {
    for (int i = 0; i < limit; ++i) {
      Minute();
      const v1::HoldTuning t = Get();
      const v1::HoldTuningSegment* x86 = Segment(t, "x86");
      const v1::HoldTuningSegment* pi1 = Segment(t, "pi1");
      if (x86 != nullptr && pi1 != nullptr && x86->phase() != "exploring" &&
          pi1->phase() != "exploring") {
        return;
      }
    }
  }

  std::vector<std::string> EventReasons() {
    v1::ListEventsRequest filter;
    filter.set_involved_object_kind("HoldTuning");
    bool more = false;
    std::vector<std::string> reasons;
    for (const v1::Event& e : events_->List(filter, 0, 1000, &more)) reasons.push_back(e.reason());
    return reasons;
  }

  rxfleet::testing::TempDir dir_{"rxfleet-tuning-controller"};
  absl::Time now_ = kStart;
  int bumps_ = 0;
  size_t max_hold_tunings_ = 100;
  size_t max_tuning_segments_ = 64;
  uint64_t version_ = 1;
  PolicySet policies_{{}, 1};
  std::vector<v1::ApplyPolicyRequest> applied_;
  std::vector<std::string> actors_;
  std::mt19937 rng_{11};
  std::normal_distribution<double> noise_{0, 0.02};
  std::map<std::string, std::set<uint32_t>> ran_;
  std::map<std::string, size_t> max_on_challenger_;
  std::map<std::string, std::map<uint32_t, absl::Time>> last_run_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<ExperimentController> controller_;
};

TEST_F(TuningControllerTest, CreateFindsSegmentsAndAssignsOnlyExplorers) {
  absl::StatusOr<v1::CreateHoldTuningResponse> created = Create();
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->eligible_adapters(), 16u);
  EXPECT_EQ(created->tuning().status().phase(), v1::HOLD_TUNING_PHASE_RUNNING);
  EXPECT_EQ(created->tuning().status().segments_size(), 2);
  controller_->Tick();
  const v1::HoldTuning t = Get();
  ASSERT_EQ(t.status().segments_size(), 2);
  const v1::HoldTuningSegment* x86 = Segment(t, "x86");
  ASSERT_NE(x86, nullptr);
  EXPECT_EQ(x86->phase(), "exploring");
  EXPECT_EQ(x86->incumbent_hold_us(), 32u);  // the built-in default on SuperSpeed
  EXPECT_EQ(x86->candidates_size(), 5);
  EXPECT_EQ(x86->adapters(), 8u);
  EXPECT_EQ(x86->explorers(), 4u);
  EXPECT_EQ(x86->round(), 1u);
  EXPECT_FALSE(x86->has_planner_state());  // stored, never shown
  EXPECT_EQ(Segment(t, "pi1")->incumbent_hold_us(), 1024u);
  // Half of each segment explores in a block; the rest runs its policy with no assignment.
  const std::vector<v1::ExperimentAssignment> a = controller_->Assignments("x86-1");
  EXPECT_EQ(a.size(), 4u);
  for (const v1::ExperimentAssignment& one : a) {
    EXPECT_EQ(one.experiment(), kName);
    EXPECT_EQ(one.priority(), kTuningPriority);
    EXPECT_EQ(one.arm(), absl::StrCat("hold-", one.settings().hold_us(), "us"));
    EXPECT_EQ(one.window_length().seconds(), 60);
  }
  EXPECT_THAT(EventReasons(), Contains("SegmentStarted"));
  EXPECT_GE(bumps_, 1);
}

TEST_F(TuningControllerTest, ProposesTheBestHoldPerSegmentWithinBudgetAndApproveAdoptsIt) {
  ASSERT_TRUE(Create().ok());
  RunUntilDecided(7 * 24 * 60);
  const v1::HoldTuning t = Get();
  const v1::HoldTuningSegment* x86 = Segment(t, "x86");
  const v1::HoldTuningSegment* pi1 = Segment(t, "pi1");
  ASSERT_NE(x86, nullptr);
  ASSERT_NE(pi1, nullptr);
  ASSERT_EQ(x86->phase(), "proposed") << x86->message() << "\n" << x86->evidence_text();
  EXPECT_EQ(x86->proposal().hold_us(), 128u);
  EXPECT_EQ(x86->proposal().incumbent_hold_us(), 32u);
  EXPECT_GT(x86->proposal().confirmation().always_valid_ci95_low(), 0.02);
  EXPECT_FALSE(x86->evidence_text().empty());
  EXPECT_EQ(x86->comparisons_size(), 5);
  ASSERT_EQ(pi1->phase(), "proposed") << pi1->message() << "\n" << pi1->evidence_text();
  EXPECT_EQ(pi1->proposal().hold_us(), 512u);
  for (const v1::HoldTuningCandidate& c : pi1->candidates()) {
    if (c.hold_us() < 512) {
      EXPECT_EQ(c.status(), "guardrail") << c.hold_us();
    }
  }
  // Within budget, and never more than adapterShare of a segment off its incumbent.
  for (const v1::HoldTuningSegment* s : {x86, pi1}) {
    EXPECT_LE(s->committed_windows(), s->budget_windows());
  }
  EXPECT_LE(max_on_challenger_["x86-1"], 4u);
  EXPECT_LE(max_on_challenger_["pi1-1"], 4u);
  EXPECT_THAT(EventReasons(), Contains("ChallengerWon"));
  EXPECT_THAT(EventReasons(), Contains("GuardrailBroken"));
  EXPECT_TRUE(applied_.empty());  // autoApply is off: nothing is written until approval

  v1::ApproveHoldTuningRequest approve;
  approve.set_name(kName);
  (*approve.mutable_segment())["usb_speed"] = "super";
  (*approve.mutable_segment())["board"] = "x86";
  approve.set_dry_run(true);
  absl::StatusOr<v1::ApproveHoldTuningResponse> dry =
      controller_->ApproveHoldTuning(approve, "alice");
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(Segment(Get(), "x86")->phase(), "proposed");
  approve.set_dry_run(false);
  absl::StatusOr<v1::ApproveHoldTuningResponse> approved =
      controller_->ApproveHoldTuning(approve, "alice");
  ASSERT_TRUE(approved.ok()) << approved.status();
  ASSERT_EQ(approved->policies_size(), 1);
  const v1::Policy& policy = approved->policies(0);
  EXPECT_EQ(policy.spec().settings().hold_us(), 128u);
  EXPECT_EQ(policy.metadata().labels().at(std::string(kTunedByLabel)), kName);
  EXPECT_EQ(policy.spec().selector().chips(0), "rtl8922au");
  EXPECT_EQ(policy.spec().selector().usb_speeds(0), v1::USB_SPEED_SUPER);
  EXPECT_EQ(policy.spec().selector().match_labels().at("board"), "x86");
  EXPECT_EQ(actors_.back(), "alice");
  const v1::HoldTuningSegment* adopted = Segment(approved->tuning(), "x86");
  EXPECT_EQ(adopted->phase(), "rechecking");
  EXPECT_EQ(adopted->incumbent_hold_us(), 128u);
  EXPECT_EQ(adopted->previous_hold_us(), 32u);
  EXPECT_EQ(adopted->applied_policy(), policy.metadata().name());
  EXPECT_EQ(Segment(approved->tuning(), "pi1")->phase(), "proposed");  // not named
  // Approving again names a segment with no proposal.
  EXPECT_EQ(controller_->ApproveHoldTuning(approve, "alice").status().code(),
            absl::StatusCode::kFailedPrecondition);

  // The re-check runs the previous hold on a quarter of the segment; the adopted hold stays.
  for (int i = 0; i < 60; ++i) Minute();
  const v1::HoldTuning after = Get();
  const v1::HoldTuningSegment* later = Segment(after, "x86");
  EXPECT_EQ(later->phase(), "rechecking") << later->message();
  EXPECT_EQ(later->incumbent_hold_us(), 128u);
  EXPECT_LE(max_on_challenger_["x86-1"], 4u);
}

TEST_F(TuningControllerTest, AGuardrailBreakingHoldStopsRunningOnceDetected) {
  ASSERT_TRUE(Create().ok());
  RunUntilDecided(7 * 24 * 60);
  v1::ListEventsRequest filter;
  filter.set_involved_object_kind("HoldTuning");
  bool more = false;
  std::map<uint32_t, absl::Time> dropped;
  for (const v1::Event& e : events_->List(filter, 0, 1000, &more)) {
    if (e.reason() != "GuardrailBroken") continue;
    for (uint32_t hold : {32u, 64u, 128u, 256u}) {
      if (e.message().find(absl::StrCat(": ", common::FormatHoldUs(hold), " dropped")) !=
          std::string::npos) {
        dropped[hold] = common::TimeFromProto(e.last_time());
      }
    }
  }
  EXPECT_EQ(dropped.size(), 4u);
  for (const auto& [hold, when] : dropped) {
    // Nothing ran the hold in a minute that started after the drop.
    EXPECT_LT(last_run_["pi1-1"][hold], when) << hold;
  }
}

TEST_F(TuningControllerTest, AutoApplyWritesTheProposalUnattended) {
  std::string text = kTuning;
  text += "  autoApply: true\n";
  ASSERT_TRUE(Create(text).ok());
  RunUntilDecided(7 * 24 * 60);
  const v1::HoldTuning t = Get();
  EXPECT_EQ(Segment(t, "x86")->phase(), "rechecking") << Segment(t, "x86")->message();
  EXPECT_EQ(Segment(t, "x86")->incumbent_hold_us(), 128u);
  EXPECT_EQ(Segment(t, "pi1")->incumbent_hold_us(), 512u);
  ASSERT_EQ(applied_.size(), 2u);
  EXPECT_THAT(actors_.back(), HasSubstr("autoApply"));
  // The written policies are what the segments' adapters resolve now.
  std::set<uint32_t> holds;
  for (const auto& [name, p] : policies_.snapshot()->policies) {
    holds.insert(p.spec().settings().hold_us());
  }
  EXPECT_EQ(holds, (std::set<uint32_t>{128, 512}));
}

TEST_F(TuningControllerTest, StopReturnsAdaptersToTheirPoliciesAndDeleteRemovesIt) {
  ASSERT_TRUE(Create().ok());
  for (int i = 0; i < 30; ++i) Minute();
  v1::DeleteHoldTuningRequest del;
  del.set_name(kName);
  EXPECT_EQ(controller_->DeleteHoldTuning(del).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::StopHoldTuningRequest stop;
  stop.set_name(kName);
  stop.set_reason("maintenance");
  absl::StatusOr<v1::HoldTuning> stopped = controller_->StopHoldTuning(stop);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->status().phase(), v1::HOLD_TUNING_PHASE_STOPPED);
  for (const v1::HoldTuningSegment& s : stopped->status().segments()) {
    EXPECT_EQ(s.phase(), "stopped");
    EXPECT_EQ(s.reason(), "StoppedByUser");
  }
  EXPECT_TRUE(controller_->Assignments("x86-1").empty());
  EXPECT_EQ(controller_->StopHoldTuning(stop).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<v1::HoldTuning> deleted = controller_->DeleteHoldTuning(del);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  v1::GetHoldTuningRequest get;
  get.set_name(kName);
  EXPECT_EQ(controller_->GetHoldTuning(get).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = store_->CountWindows();
  ASSERT_TRUE(counts.ok());
  EXPECT_FALSE(counts->contains(kName));
}

TEST_F(TuningControllerTest, TuningsAndExperimentsShareNames) {
  ASSERT_TRUE(Create().ok());
  EXPECT_EQ(Create().status().code(), absl::StatusCode::kAlreadyExists);
  v1::CreateExperimentRequest experiment;
  experiment.mutable_experiment()->mutable_metadata()->set_name(kName);
  v1::ExperimentSpec* spec = experiment.mutable_experiment()->mutable_spec();
  for (auto [arm, hold] : {std::pair<const char*, uint32_t>{"control", 1024}, {"short", 32}}) {
    v1::ExperimentArm* a = spec->add_arms();
    a->set_name(arm);
    a->mutable_settings()->set_hold_us(hold);
    a->set_weight(1);
  }
  spec->set_control_arm("control");
  spec->set_design(v1::EXPERIMENT_DESIGN_PARALLEL);
  spec->mutable_duration()->set_seconds(3600);
  spec->mutable_window_length()->set_seconds(60);
  spec->set_primary_metric("rx_throughput_bps");
  absl::Status taken = controller_->CreateExperiment(experiment).status();
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(taken.message(), HasSubstr("hold tuning"));
}

TEST_F(TuningControllerTest, RefusesHostSegmentsAndADryRunStoresNothing) {
  // rxfleetctl refuses such a document at its line; a request built by another client is
  // refused by the server with the same rule.
  v1::CreateHoldTuningRequest host;
  *host.mutable_tuning() = tuning::HoldTuningToProto(MustParse(kTuning));
  host.mutable_tuning()->mutable_spec()->clear_segment_label_keys();
  host.mutable_tuning()->mutable_spec()->add_segment_label_keys("host");
  absl::Status refused = controller_->CreateHoldTuning(host).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("spec.segments[0]: `host` cannot be a tuning segment"));
  absl::StatusOr<v1::CreateHoldTuningResponse> dry = Create(kTuning, /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->eligible_adapters(), 16u);
  // The response names the segments the eligible adapters fall into, as `tune create` prints.
  ASSERT_EQ(dry->tuning().status().segments_size(), 2);
  const v1::HoldTuningSegment* pi1 = Segment(dry->tuning(), "pi1");
  ASSERT_NE(pi1, nullptr);
  EXPECT_EQ(pi1->adapters(), 8u);
  EXPECT_EQ(pi1->segment().at("usb_speed"), "high");
  EXPECT_EQ(pi1->incumbent_hold_us(), 1024u);
  v1::GetHoldTuningRequest get;
  get.set_name(kName);
  EXPECT_EQ(controller_->GetHoldTuning(get).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TuningControllerTest, TheStoredTuningsAndTheSegmentsOfOneAreBounded) {
  max_hold_tunings_ = 1;
  max_tuning_segments_ = 1;
  Reopen();
  ASSERT_TRUE(Create().ok());
  std::string other = kTuning;
  other.replace(other.find("name: hold-tune"), 15, "name: hold-two");
  absl::Status refused = Create(other).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("delete stopped ones"));
  controller_->Tick();
  const v1::HoldTuning t = Get();
  ASSERT_EQ(t.status().segments_size(), 1);
  ASSERT_EQ(t.status().conditions_size(), 1);
  const v1::Condition& waiting = t.status().conditions(0);
  EXPECT_EQ(waiting.type(), "SegmentsWaiting");
  EXPECT_EQ(waiting.status(), v1::CONDITION_STATUS_TRUE);
  EXPECT_THAT(waiting.message(), HasSubstr("the most one tuning runs"));
  EXPECT_EQ(common::TimeFromProto(waiting.last_transition_time()), kStart);
}

TEST_F(TuningControllerTest, ASegmentWithTooFewAdaptersWaits) {
  std::string small = kTuning;
  small.replace(small.find("adapterShare: 0.5"), 17, "adapterShare: 0.1");
  ASSERT_TRUE(Create(small).ok());
  controller_->Tick();
  const v1::HoldTuning t = Get();
  EXPECT_EQ(t.status().segments_size(), 0);
  EXPECT_THAT(t.status().conditions(0).message(), HasSubstr("8 adapters (10 needed)"));
  EXPECT_TRUE(controller_->Assignments("x86-1").empty());
}

TEST_F(TuningControllerTest, APolicyChangingTheIncumbentStartsTheSegmentAnew) {
  ASSERT_TRUE(Create().ok());
  for (int i = 0; i < 90; ++i) Minute();
  ASSERT_EQ(Segment(Get(), "x86")->incumbent_hold_us(), 32u);
  v1::Policy pin;
  pin.mutable_metadata()->set_name("pin-256");
  pin.mutable_metadata()->set_resource_version("100");
  pin.mutable_metadata()->set_generation(1);
  (*pin.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "x86";
  pin.mutable_spec()->mutable_settings()->set_hold_us(256);
  policies_.Put(pin, ++version_);
  Minute();
  const v1::HoldTuning t = Get();
  const v1::HoldTuningSegment* x86 = Segment(t, "x86");
  EXPECT_EQ(x86->incumbent_hold_us(), 256u);
  EXPECT_EQ(x86->phase(), "exploring");
  EXPECT_EQ(x86->round(), 1u);
  EXPECT_EQ(x86->candidates_size(), 5);  // 256 µs is the incumbent now, 32 µs a challenger
  EXPECT_THAT(EventReasons(), Contains("IncumbentChanged"));
  EXPECT_EQ(Segment(t, "pi1")->incumbent_hold_us(), 1024u);  // untouched
}

// A long-running tuning does not keep what it no longer reads: once every segment's epoch
// has moved on (here both restart when their policies change), the windows before it, less
// a margin of a period and two windows, leave the store and the counts; the rest stay.
TEST_F(TuningControllerTest, WindowsNoSegmentReadsAreDeletedWhileItRuns) {
  ASSERT_TRUE(Create().ok());
  for (int i = 0; i < 90; ++i) Minute();
  const auto starts = [&] {
    std::vector<absl::Time> out;
    EXPECT_TRUE(store_
                    ->ForEachWindow(kName,
                                    [&](const std::string&, const std::vector<std::string>&,
                                        const v1::MetricWindow& w) {
                                      out.push_back(common::TimeFromProto(w.window_start_time()));
                                    })
                    .ok());
    return out;
  };
  const std::vector<absl::Time> before = starts();
  ASSERT_GT(before.size(), 100u);
  const uint64_t valid_before = Get().status().valid_windows();
  for (const auto& [board, hold] : {std::pair<std::string, uint32_t>{"x86", 256},
                                    std::pair<std::string, uint32_t>{"pi1", 512}}) {
    v1::Policy pin;
    pin.mutable_metadata()->set_name("pin-" + board);
    pin.mutable_metadata()->set_resource_version("100");
    pin.mutable_metadata()->set_generation(1);
    (*pin.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = board;
    pin.mutable_spec()->mutable_settings()->set_hold_us(hold);
    policies_.Put(pin, ++version_);
  }
  const absl::Time restart = now_ + absl::Minutes(1);  // the tick that restarts both
  Minute();
  ASSERT_EQ(Segment(Get(), "x86")->incumbent_hold_us(), 256u);
  ASSERT_EQ(Segment(Get(), "pi1")->incumbent_hold_us(), 512u);
  const absl::Time cutoff = restart - absl::Minutes(10) - absl::Minutes(2);
  const std::vector<absl::Time> after = starts();
  size_t kept = 0;
  for (absl::Time t : before) kept += t >= cutoff ? 1 : 0;
  size_t old = 0;
  size_t kept_after = 0;
  for (absl::Time t : after) {
    old += t < cutoff ? 1 : 0;
    kept_after += (t >= cutoff && t < restart - absl::Minutes(1)) ? 1 : 0;
  }
  EXPECT_EQ(old, 0u) << "windows before the margin are deleted";
  EXPECT_EQ(kept_after, kept) << "windows within the margin stay";
  EXPECT_LT(Get().status().valid_windows(), valid_before);
  absl::StatusOr<std::map<std::string, WindowCounts>> counts = store_->CountWindows();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[kName].total, after.size());
  // The tuning carries on in its new epochs.
  for (int i = 0; i < 30; ++i) Minute();
  EXPECT_EQ(Segment(Get(), "x86")->phase(), "exploring");
  EXPECT_GT(starts().size(), after.size());
}

TEST_F(TuningControllerTest, APolicyAtTheHighestPriorityKeepsAdaptersOut) {
  v1::Policy pin;
  pin.mutable_metadata()->set_name("pin-pi1");
  pin.mutable_metadata()->set_resource_version("100");
  pin.mutable_metadata()->set_generation(1);
  (*pin.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "pi1";
  pin.mutable_spec()->mutable_settings()->set_hold_us(1024);
  pin.mutable_spec()->set_priority(common::kMaxPolicyPriority);
  policies_.Put(pin, ++version_);
  absl::StatusOr<v1::CreateHoldTuningResponse> created = Create();
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->eligible_adapters(), 8u);  // the x86 ones only
  controller_->Tick();
  const v1::HoldTuning t = Get();
  EXPECT_EQ(t.status().segments_size(), 1);
  EXPECT_EQ(Segment(t, "pi1"), nullptr);
  EXPECT_TRUE(controller_->Assignments("pi1-1").empty());
}

TEST_F(TuningControllerTest, ASegmentWhoseAdaptersLeaveCountsNone) {
  ASSERT_TRUE(Create().ok());
  for (int i = 0; i < 5; ++i) Minute();
  ASSERT_EQ(Segment(Get(), "pi1")->adapters(), 8u);
  v1::Policy pin;  // takes the Pi 1 adapters away from the tuning
  pin.mutable_metadata()->set_name("pin-pi1");
  pin.mutable_metadata()->set_resource_version("100");
  pin.mutable_metadata()->set_generation(1);
  (*pin.mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "pi1";
  pin.mutable_spec()->mutable_settings()->set_hold_us(1024);
  pin.mutable_spec()->set_priority(common::kMaxPolicyPriority);
  policies_.Put(pin, ++version_);
  Minute();
  const v1::HoldTuning t = Get();
  EXPECT_EQ(Segment(t, "pi1")->adapters(), 0u);
  EXPECT_EQ(Segment(t, "x86")->adapters(), 8u);
  EXPECT_EQ(t.status().assigned_adapters(), 8u);
  EXPECT_TRUE(controller_->Assignments("pi1-1").empty());
  // The operator is told why the segment stands still.
  const v1::Condition* waiting = nullptr;
  for (const v1::Condition& c : t.status().conditions()) {
    if (c.type() == "SegmentsWaiting") waiting = &c;
  }
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->status(), v1::CONDITION_STATUS_TRUE);
  EXPECT_THAT(waiting->message(), HasSubstr("board=pi1"));
  EXPECT_THAT(waiting->message(), HasSubstr("none of its adapters is free now"));
}

TEST_F(TuningControllerTest, ApprovingAnUnknownSegmentNamesTheKnownOnes) {
  ASSERT_TRUE(Create().ok());
  controller_->Tick();
  v1::ApproveHoldTuningRequest approve;
  approve.set_name(kName);
  (*approve.mutable_segment())["usb_speed"] = "super";
  (*approve.mutable_segment())["board"] = "nope";
  absl::Status refused = controller_->ApproveHoldTuning(approve, "alice").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("has no segment usb_speed=super,board=nope"));
  EXPECT_THAT(refused.message(), HasSubstr("usb_speed=super,board=x86"));
}

TEST_F(TuningControllerTest, ARestartContinuesWhereTheTuningStood) {
  ASSERT_TRUE(Create().ok());
  for (int i = 0; i < 150; ++i) Minute();
  const v1::HoldTuning before = Get();
  Reopen();
  const v1::HoldTuning after = Get();
  ASSERT_EQ(after.status().segments_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const v1::HoldTuningSegment& b = before.status().segments(i);
    const v1::HoldTuningSegment& a = after.status().segments(i);
    EXPECT_EQ(a.round(), b.round());
    EXPECT_EQ(a.committed_windows(), b.committed_windows());
    ASSERT_EQ(a.candidates_size(), b.candidates_size());
    for (int c = 0; c < a.candidates_size(); ++c) {
      EXPECT_EQ(a.candidates(c).status(), b.candidates(c).status());
    }
  }
  controller_->Tick();
  EXPECT_EQ(controller_->Assignments("x86-1").size(), 4u);
  RunUntilDecided(7 * 24 * 60);
  EXPECT_EQ(Segment(Get(), "x86")->proposal().hold_us(), 128u);
}

}  // namespace
}  // namespace rxfleet::server
