#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/collectors/cpu_stat.h"
#include "agent/collectors/netdev_stats.h"
#include "agent/collectors/sampler.h"
#include "agent/collectors/window.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/collectors/metric_values.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

namespace fs = std::filesystem;
using ::rxfleet::agent::testing::SeriesValue;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using ::testing::HasSubstr;

class FakeCollector final : public Collector {
 public:
  explicit FakeCollector(std::string name) : name_(std::move(name)) {}
  std::string_view Name() const override { return name_; }
  absl::Status Collect(SteadyTime) override {
    ++calls;
    return next;
  }
  absl::Status next;
  int calls = 0;

 private:
  std::string name_;
};

class SamplerTest : public ::testing::Test {
 protected:
  SamplerOptions Options(absl::Duration interval) {
    SamplerOptions options;
    options.interval = interval;
    options.log = [this](std::string_view line) {
      absl::MutexLock lock(&mu_);
      logs_.emplace_back(line);
    };
    return options;
  }
  std::vector<std::string> Logs() {
    absl::MutexLock lock(&mu_);
    return logs_;
  }

  prometheus::Registry registry_;
  absl::Mutex mu_;
  std::vector<std::string> logs_;
};

TEST_F(SamplerTest, OneFailingCollectorDoesNotStopTheOthers) {
  FakeCollector good("good"), bad("bad");
  bad.next = absl::InternalError("boom");
  Sampler sampler(registry_, {&bad, &good}, Options(absl::Seconds(1)));
  sampler.RunOnce(SteadyTime{});
  sampler.RunOnce(SteadyTime{});
  EXPECT_EQ(good.calls, 2);
  EXPECT_EQ(bad.calls, 2);
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_collector_success", {{"collector", "good"}}), 1);
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_collector_success", {{"collector", "bad"}}), 0);
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_collector_errors_total", {{"collector", "bad"}}), 2);
  EXPECT_GE(*SeriesValue(registry_, "rxfleet_collector_duration_seconds", {{"collector", "good"}}),
            0);
  // Logged once when it starts failing, once when it recovers.
  ASSERT_EQ(Logs().size(), 1u);
  EXPECT_THAT(Logs()[0], HasSubstr("collector bad failed"));
  EXPECT_THAT(Logs()[0], HasSubstr("boom"));
  bad.next = absl::OkStatus();
  sampler.RunOnce(SteadyTime{});
  ASSERT_EQ(Logs().size(), 2u);
  EXPECT_THAT(Logs()[1], HasSubstr("collector bad recovered"));
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_collector_success", {{"collector", "bad"}}), 1);
  EXPECT_EQ(sampler.runs(), 3u);
}

TEST_F(SamplerTest, RunsOnItsOwnScheduleAndStopsPromptly) {
  FakeCollector c("fake");
  Sampler sampler(registry_, {&c}, Options(absl::Milliseconds(10)));
  sampler.Start();
  sampler.Start();  // no-op
  EXPECT_TRUE(sampler.WaitForRuns(5, absl::Seconds(30)));
  sampler.Stop();
  const uint64_t runs = sampler.runs();
  EXPECT_GE(runs, 5u);
  sampler.Stop();
  EXPECT_EQ(sampler.runs(), runs);
}

TEST_F(SamplerTest, StopDoesNotWaitForTheInterval) {
  FakeCollector c("fake");
  Sampler sampler(registry_, {&c}, Options(absl::Hours(1)));
  const auto start = std::chrono::steady_clock::now();
  sampler.Start();
  EXPECT_TRUE(sampler.WaitForRuns(1, absl::Seconds(30)));
  sampler.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Restartable.
  sampler.Start();
  EXPECT_TRUE(sampler.WaitForRuns(2, absl::Seconds(30)));
}

TEST(SummarizeRttTest, NearestRankPercentiles) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i / 1000.0);  // 1..100 ms, any order
  const RttSummary s = SummarizeRtt(samples);
  EXPECT_EQ(s.count, 100u);
  EXPECT_NEAR(s.mean_seconds, 0.0505, 1e-12);
  EXPECT_DOUBLE_EQ(s.p50_seconds, 0.050);
  EXPECT_DOUBLE_EQ(s.p90_seconds, 0.090);
  EXPECT_DOUBLE_EQ(s.p99_seconds, 0.099);
  const RttSummary one = SummarizeRtt({0.00129});
  EXPECT_DOUBLE_EQ(one.p50_seconds, 0.00129);
  EXPECT_DOUBLE_EQ(one.p99_seconds, 0.00129);
  ASSERT_EQ(s.buckets.size(), IcmpProber::RttBuckets().size() + 1);
  const std::vector<uint64_t> cumulative = {0, 0, 0, 0, 1, 1, 2, 3, 5, 7, 10, 25, 50, 100, 100};
  for (size_t i = 0; i < s.buckets.size(); ++i) {
    EXPECT_EQ(s.buckets[i].cumulative_count, cumulative[i]) << "bucket " << i;
  }
  EXPECT_DOUBLE_EQ(s.buckets[4].upper_bound_seconds, 0.001);
  EXPECT_EQ(s.buckets.back().upper_bound_seconds, std::numeric_limits<double>::max());
  EXPECT_TRUE(SummarizeRtt({}).buckets.empty());
  EXPECT_EQ(SummarizeRtt({}).count, 0u);
  EXPECT_EQ(SummarizeRtt({}).p99_seconds, 0);
}

TEST(AdapterWindowTest, DerivedRates) {
  AdapterWindow w;
  w.duration_seconds = 10;
  w.traffic.rx_bytes = 125000000;
  w.traffic.tx_bytes = 2500000;
  w.traffic.rx_packets = 86000;
  w.traffic.rx_dropped = 86;
  w.probes_sent = 10;
  w.probes_lost = 1;
  EXPECT_DOUBLE_EQ(w.RxBitsPerSecond(), 100e6);
  EXPECT_DOUBLE_EQ(w.TxBitsPerSecond(), 2e6);
  EXPECT_DOUBLE_EQ(w.RxDropRatio(), 86.0 / 86086.0);
  EXPECT_DOUBLE_EQ(w.ProbeLossRatio(), 0.1);
  EXPECT_EQ(AdapterWindow{}.RxBitsPerSecond(), 0);
  EXPECT_EQ(AdapterWindow{}.ProbeLossRatio(), 0);
}

// Netdev and /proc/stat fixtures replayed through the sampler, with the window tracker last.
TEST(WindowTrackerTest, WindowsCombineTrafficAndCpuOverTheSameTicks) {
  TempDir sysfs, procfs;
  const fs::path netdev = sysfs.path() / "class/net/wlan0";
  auto install_netdev = [&](const std::string& sample) {
    fs::remove_all(netdev);
    fs::create_directories(netdev);
    fs::copy(SourcePath("tests/fixtures/netdev/" + sample), netdev, fs::copy_options::recursive);
  };
  auto install_stat = [&](const std::string& sample) {
    ASSERT_TRUE(WriteTextFile(procfs.path() / "stat",
                              *ReadTextFile(SourcePath("tests/fixtures/proc/" + sample)))
                    .ok());
  };
  fs::create_directories(procfs.path() / "self");
  ASSERT_TRUE(WriteTextFile(procfs.path() / "self/stat",
                            *ReadTextFile(SourcePath("tests/fixtures/proc/self-stat")))
                  .ok());
  ASSERT_TRUE(WriteTextFile(procfs.path() / "self/statm",
                            *ReadTextFile(SourcePath("tests/fixtures/proc/self-statm")))
                  .ok());

  prometheus::Registry registry;
  NetdevCollectorOptions netdev_options;
  netdev_options.sysfs_root = sysfs.path().string();
  netdev_options.log = [](std::string_view) {};
  NetdevCollector traffic(registry, netdev_options);
  traffic.SetAdapters({{"port-2-2", "wlan0", ""}, {"port-1-1", "", ""}});
  CpuCollectorOptions cpu_options;
  cpu_options.procfs_root = procfs.path().string();
  CpuCollector cpu(registry, cpu_options);
  WindowOptions window_options;
  window_options.length = absl::Seconds(10);
  WindowTracker windows(&traffic, &cpu, nullptr, window_options);
  SamplerOptions sampler_options;
  sampler_options.log = [](std::string_view) {};
  Sampler sampler(registry, {&traffic, &cpu, &windows}, sampler_options);

  const SteadyTime t0{};
  install_netdev("wlan0-t0");
  install_stat("stat-2core-a");
  sampler.RunOnce(t0);
  EXPECT_EQ(windows.completed_windows(), 0u);
  sampler.RunOnce(t0 + std::chrono::seconds(5));  // mid-window: nothing closes
  EXPECT_EQ(windows.completed_windows(), 0u);
  EXPECT_TRUE(windows.LastWindows().empty());

  install_netdev("wlan0-t1");
  install_stat("stat-2core-b");
  sampler.RunOnce(t0 + std::chrono::seconds(10));
  ASSERT_EQ(windows.completed_windows(), 1u);
  EXPECT_EQ(SeriesValue(registry, "rxfleet_collector_success", {{"collector", "window"}}), 1);

  std::optional<AdapterWindow> w = windows.LastWindow("port-2-2");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->duration_seconds, 10);
  EXPECT_TRUE(w->has_traffic);
  EXPECT_EQ(w->traffic, (NetdevCounters{125000000, 2500000, 86000, 41000, 86, 3, 0, 0}));
  EXPECT_DOUBLE_EQ(w->RxBitsPerSecond(), 100e6);
  ASSERT_TRUE(w->cpu.has_value());
  EXPECT_DOUBLE_EQ(w->cpu->host_ratio, 0.43);
  EXPECT_DOUBLE_EQ(w->cpu->busiest_core_ratio, 0.65);
  EXPECT_EQ(w->rtt.count, 0u);

  std::optional<AdapterWindow> no_netdev = windows.LastWindow("port-1-1");
  ASSERT_TRUE(no_netdev.has_value());
  EXPECT_FALSE(no_netdev->has_traffic);
  ASSERT_TRUE(no_netdev->cpu.has_value());
  EXPECT_EQ(windows.LastWindows().size(), 2u);
  EXPECT_FALSE(windows.LastWindow("unknown").has_value());
  EXPECT_FALSE(w->counter_reset);
  EXPECT_FALSE(w->netdev_missing);
  EXPECT_FALSE(no_netdev->netdev_missing);
  EXPECT_LE(w->start_time, absl::Now());

  // Second window: the kernel counters went backwards (corrected, but flagged).
  install_netdev("wlan0-t2-reset");
  sampler.RunOnce(t0 + std::chrono::seconds(20));
  ASSERT_EQ(windows.completed_windows(), 2u);
  w = windows.LastWindow("port-2-2");
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->counter_reset);
  EXPECT_EQ(w->traffic.rx_bytes, 4000000u);
  EXPECT_FALSE(w->cpu.has_value());  // /proc/stat did not advance: no CPU time elapsed

  // Third window: the netdev vanished for a tick and came back (new ifindex).
  windows.SetLength(absl::Seconds(20));
  fs::remove_all(netdev);
  sampler.RunOnce(t0 + std::chrono::seconds(30));
  EXPECT_EQ(windows.completed_windows(), 2u);  // 10 s into a 20 s window
  install_netdev("wlan0-t3-new-ifindex");
  sampler.RunOnce(t0 + std::chrono::seconds(40));
  ASSERT_EQ(windows.completed_windows(), 3u);
  w = windows.LastWindow("port-2-2");
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->duration_seconds, 20);
  EXPECT_TRUE(w->netdev_missing);
  EXPECT_TRUE(w->has_traffic);
  EXPECT_EQ(w->traffic.rx_bytes, 2500000000u);
}

}  // namespace
}  // namespace rxfleet::agent
