// Experiment windows over the real server link: a fake AgentService on loopback pushes a
// bundle with assignments; the agent side turns it into windows (ExperimentWindowCutter on
// hand-made ticks) and the link sends them as MetricWindow. Checks tags and validity, the
// queue across a reconnect, and its bound.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/experiments/experiment_windows.h"
#include "agent/experiments/metric_window_proto.h"
#include "agent/link/server_link.h"
#include "common/proto/time.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"

namespace rxfleet::agent {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);

// The server side: answers Hello with a ServerConfig and `bundle`, records every message; can
// refuse streams (UNAVAILABLE) and end the open one.
class FakeAgentService final : public v1::AgentService::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::AgentMessage>* stream) override {
    {
      absl::MutexLock lock(&mu_);
      ++attempts_;
      if (refuse_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "refusing");
      context_ = context;
    }
    v1::AgentMessage message;
    if (!stream->Read(&message) || !message.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "hello first");
    }
    v1::ServerMessage config;
    config.mutable_config()->set_server_version("fake");
    *config.mutable_config()->mutable_metric_window_length() =
        common::DurationToProto(absl::Seconds(7));
    *config.mutable_config()->mutable_report_interval() =
        common::DurationToProto(absl::Seconds(60));
    stream->Write(config);
    v1::ServerMessage bundle;
    {
      absl::MutexLock lock(&mu_);
      *bundle.mutable_bundle() = bundle_;
      ++streams_;
    }
    stream->Write(bundle);
    while (stream->Read(&message)) {
      absl::MutexLock lock(&mu_);
      if (message.has_metric_window()) windows_.push_back(message.metric_window());
      if (message.has_ack()) acked_ = message.ack().version();
    }
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    return grpc::Status::OK;
  }

  void SetBundle(v1::PolicyBundle bundle) {
    absl::MutexLock lock(&mu_);
    bundle_ = std::move(bundle);
  }
  void Refuse(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_ = refuse;
  }
  // Ends the open stream, if any.
  void EndStream() {
    absl::MutexLock lock(&mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
  bool WaitForWindows(size_t n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return windows_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  bool WaitForAck(uint64_t version) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return acked_ == version; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  // Waits until `n` connection attempts have been made in total.
  bool WaitForAttempts(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attempts_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  bool WaitForNoStream() {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return context_ == nullptr; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  std::vector<v1::MetricWindow> windows() const {
    absl::MutexLock lock(&mu_);
    return windows_;
  }
  int attempts() const {
    absl::MutexLock lock(&mu_);
    return attempts_;
  }

 private:
  mutable absl::Mutex mu_;
  v1::PolicyBundle bundle_ ABSL_GUARDED_BY(mu_);
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ServerContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<v1::MetricWindow> windows_ ABSL_GUARDED_BY(mu_);
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
};

// The agent side: applied bundles feed an ExperimentWindowCutter, as the Agent does.
class CutterSink : public BundleSink {
 public:
  absl::Status ApplyServerBundle(const ServerBundle& bundle) override {
    cutter.SetAssignments(bundle.version, bundle.assignments, std::chrono::steady_clock::now());
    absl::MutexLock lock(&mu_);
    applied_ = bundle.version;
    return absl::OkStatus();
  }
  bool WaitForApplied(uint64_t version) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return applied_ == version; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  ExperimentWindowCutter cutter;

 private:
  absl::Mutex mu_;
  uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::PolicyBundle BundleWithAssignments(absl::Time period_start) {
  v1::PolicyBundle bundle;
  bundle.set_version(11);
  bundle.set_nonce("n-11");
  for (const char* adapter : {"port-1-1", "port-1-2"}) {
    v1::ExperimentAssignment* a = bundle.add_assignments();
    a->set_adapter_id(adapter);
    a->set_experiment("hold-ab");
    a->set_experiment_generation(1);
    a->set_arm(std::string(adapter) == "port-1-1" ? "short" : "long");
    a->mutable_settings()->set_hold_us(std::string(adapter) == "port-1-1" ? 32 : 1024);
    a->set_priority(500);
    a->set_period_index(0);
    *a->mutable_period_start_time() = common::TimeToProto(period_start);
    *a->mutable_period_end_time() = common::TimeToProto(period_start + absl::Hours(1));
    *a->mutable_window_length() = common::DurationToProto(absl::Seconds(2));
    *a->mutable_burn_in() = common::DurationToProto(absl::Seconds(2));
  }
  return bundle;
}

class MetricWindowLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (link_) link_->Stop();
    server_->Shutdown();
  }

  void StartLink(size_t max_queued) {
    ServerLinkOptions options;
    options.server_addresses = {"127.0.0.1:" + std::to_string(port_)};
    options.hello.set_host_id("lab-host");
    options.backoff = {absl::Milliseconds(20), absl::Milliseconds(100), 2.0};
    options.max_queued_windows = max_queued;
    options.on_config = [this](const v1::ServerConfig& config) {
      absl::MutexLock lock(&count_mu_);
      config_window_ = common::DurationFromProto(config.metric_window_length());
    };
    options.on_metric_window = [this](std::string_view result) {
      absl::MutexLock lock(&count_mu_);
      ++counted_[std::string(result)];
    };
    auto link = ServerLink::Create(std::move(options), &sink_);
    ASSERT_TRUE(link.ok()) << link.status();
    link_ = *std::move(link);
    link_->Start();
  }

  // One tick of both adapters: verified at their arm's hold, 1 MB/s more than before.
  void Tick(int second) {
    ExperimentTick tick;
    tick.now = steady_start_ + std::chrono::seconds(second);
    tick.wall = wall_start_ + absl::Seconds(second);
    for (const auto& [id, hold] : {std::pair<std::string, uint32_t>{"port-1-1", 32},
                                   std::pair<std::string, uint32_t>{"port-1-2", 1024}}) {
      NetdevTotals totals;
      totals.present = true;
      totals.counters.rx_bytes = static_cast<uint64_t>(second) * 1'000'000;
      tick.totals[id] = totals;
      AdapterRegisterState state;
      state.present = true;
      state.verified = true;
      state.fields = common::RxAggFields{true, 255, hold, 20, 0};
      tick.adapters[id] = state;
    }
    for (const ExperimentWindow& w : sink_.cutter.Tick(tick)) {
      link_->SendMetricWindow(MetricWindowToProto(w));
    }
  }

  // The server may read a window before the link's Write() returns and counts it.
  bool WaitForCounted(const std::string& result, int n) {
    absl::MutexLock lock(&count_mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(count_mu_) { return counted_[result] >= n; };
    return count_mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }

  std::map<std::string, int> counted() {
    absl::MutexLock lock(&count_mu_);
    return counted_;
  }

  FakeAgentService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  CutterSink sink_;
  std::unique_ptr<ServerLink> link_;
  const SteadyTime steady_start_ = std::chrono::steady_clock::now();
  const absl::Time wall_start_ = absl::Now();
  absl::Mutex count_mu_;
  std::map<std::string, int> counted_ ABSL_GUARDED_BY(count_mu_);
  absl::Duration config_window_ ABSL_GUARDED_BY(count_mu_);
};

TEST_F(MetricWindowLinkTest, WindowsArriveTaggedAndBurnInOnesInvalid) {
  service_.SetBundle(BundleWithAssignments(wall_start_));
  StartLink(1000);
  ASSERT_TRUE(sink_.WaitForApplied(11));
  ASSERT_TRUE(service_.WaitForAck(11));
  {
    absl::MutexLock lock(&count_mu_);
    EXPECT_EQ(config_window_, absl::Seconds(7));  // ServerConfig reaches the agent
  }

  for (int second = 0; second <= 6; ++second) Tick(second);  // windows [0,2) [2,4) [4,6)
  ASSERT_TRUE(service_.WaitForWindows(6));
  const std::vector<v1::MetricWindow> windows = service_.windows();
  ASSERT_EQ(windows.size(), 6u);
  std::map<std::string, std::vector<v1::MetricWindow>> by_adapter;
  for (const v1::MetricWindow& w : windows) by_adapter[w.adapter_id()].push_back(w);
  ASSERT_EQ(by_adapter["port-1-1"].size(), 3u);
  ASSERT_EQ(by_adapter["port-1-2"].size(), 3u);
  for (const auto& [adapter, list] : by_adapter) {
    const std::string arm = adapter == "port-1-1" ? "short" : "long";
    for (size_t i = 0; i < list.size(); ++i) {
      const v1::MetricWindow& w = list[i];
      EXPECT_EQ(w.experiment(), "hold-ab");
      EXPECT_EQ(w.arm(), arm);
      EXPECT_EQ(w.bundle_version(), 11u);
      EXPECT_EQ(w.period_index(), 0u);
      EXPECT_EQ(common::TimeFromProto(w.window_start_time()),
                wall_start_ + absl::Seconds(2 * static_cast<int>(i)));
      EXPECT_EQ(common::DurationFromProto(w.window_duration()), absl::Seconds(2));
      EXPECT_EQ(w.rx_bytes(), 2'000'000u);
      EXPECT_EQ(w.observed_settings().hold_us(), arm == "short" ? 32u : 1024u);
    }
    EXPECT_FALSE(list[0].valid());
    EXPECT_EQ(list[0].invalid_reason(), "burn_in");
    EXPECT_TRUE(list[1].valid()) << list[1].invalid_reason();
    EXPECT_TRUE(list[2].valid());
  }
  ASSERT_TRUE(WaitForCounted("sent", 6));
  EXPECT_EQ(link_->metric_windows_sent(), 6u);
}

TEST_F(MetricWindowLinkTest, WindowsCutWhileTheServerIsAwayAreSentAfterTheReconnect) {
  service_.SetBundle(BundleWithAssignments(wall_start_));
  StartLink(1000);
  ASSERT_TRUE(service_.WaitForAck(11));
  for (int second = 0; second <= 2; ++second) Tick(second);
  ASSERT_TRUE(service_.WaitForWindows(2));

  // The server goes away: windows queue up.
  service_.Refuse(true);
  service_.EndStream();
  ASSERT_TRUE(service_.WaitForNoStream());
  const int attempts = service_.attempts();
  ASSERT_TRUE(service_.WaitForAttempts(attempts + 1));  // a refused reconnect
  for (int second = 3; second <= 8; ++second) Tick(second);
  EXPECT_EQ(link_->queued_metric_windows(), 6u);
  EXPECT_EQ(service_.windows().size(), 2u);

  // Back: all of them arrive, in order, none lost.
  service_.Refuse(false);
  ASSERT_TRUE(service_.WaitForWindows(8));
  const std::vector<v1::MetricWindow> windows = service_.windows();
  ASSERT_EQ(windows.size(), 8u);
  absl::Time last = absl::InfinitePast();
  for (size_t i = 2; i < windows.size(); i += 2) {
    const absl::Time start = common::TimeFromProto(windows[i].window_start_time());
    EXPECT_GT(start, last);
    last = start;
  }
  ASSERT_TRUE(WaitForCounted("sent", 8));
  EXPECT_EQ(link_->queued_metric_windows(), 0u);
  EXPECT_EQ(link_->metric_windows_dropped(), 0u);
}

TEST_F(MetricWindowLinkTest, TheQueueIsBoundedAndDropsTheOldest) {
  service_.Refuse(true);
  StartLink(3);
  ASSERT_TRUE(service_.WaitForAttempts(1));
  for (int i = 0; i < 5; ++i) {
    v1::MetricWindow w;
    w.set_adapter_id("port-1-1");
    w.set_experiment("hold-ab");
    w.set_arm("short");
    w.set_period_index(static_cast<uint32_t>(i));
    link_->SendMetricWindow(w);
  }
  EXPECT_EQ(link_->queued_metric_windows(), 3u);
  EXPECT_EQ(link_->metric_windows_dropped(), 2u);
  EXPECT_EQ(counted()["dropped"], 2);

  service_.Refuse(false);
  ASSERT_TRUE(service_.WaitForWindows(3));
  const std::vector<v1::MetricWindow> windows = service_.windows();
  ASSERT_EQ(windows.size(), 3u);
  EXPECT_EQ(windows[0].period_index(), 2u);
  EXPECT_EQ(windows[1].period_index(), 3u);
  EXPECT_EQ(windows[2].period_index(), 4u);
  ASSERT_TRUE(WaitForCounted("sent", 3));
  EXPECT_EQ(counted()["dropped"], 2);
}

}  // namespace
}  // namespace rxfleet::agent
