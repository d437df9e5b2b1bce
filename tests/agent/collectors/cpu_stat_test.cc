#include "agent/collectors/cpu_stat.h"

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/collectors/metric_values.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::agent::testing::SeriesValue;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;

std::string Fixture(const std::string& name) {
  absl::StatusOr<std::string> text = ReadTextFile(SourcePath("tests/fixtures/proc/" + name));
  EXPECT_TRUE(text.ok()) << name;
  return text.value_or("");
}

ProcStat ParseFixture(const std::string& name) {
  absl::StatusOr<ProcStat> stat = ParseProcStat(Fixture(name));
  EXPECT_TRUE(stat.ok()) << name << ": " << stat.status();
  return stat.value_or(ProcStat{});
}

TEST(ParseProcStatTest, ReadsAggregateAndCoreLines) {
  const ProcStat stat = ParseFixture("stat-2core-a");
  EXPECT_EQ(stat.total, (CpuTimes{200000, 500, 75000, 1850000, 3500, 0, 4000, 0, 0, 0}));
  ASSERT_EQ(stat.cores.size(), 2u);
  EXPECT_EQ(stat.cores.at(0), (CpuTimes{120000, 300, 45000, 900000, 2000, 0, 3000, 0, 0, 0}));
  EXPECT_EQ(stat.cores.at(1).idle, 950000u);
}

TEST(ParseProcStatTest, ReadsStealAndGuest) {
  const ProcStat stat = ParseFixture("stat-4core-a");
  ASSERT_EQ(stat.cores.size(), 4u);
  EXPECT_EQ(stat.cores.at(3).steal, 1200u);
  EXPECT_EQ(stat.cores.at(3).guest, 15000u);
  // guest is inside user already and never added to the sums.
  EXPECT_EQ(stat.cores.at(3).Total(), 280040u + 3300 + 98700 + 9150870 + 7600 + 900 + 3900 + 1200);
}

TEST(ParseProcStatTest, AcceptsOldKernelsWithFourFields) {
  absl::StatusOr<ProcStat> stat = ParseProcStat("cpu 1 2 3 4\ncpu0 1 2 3 4\n");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->total, (CpuTimes{1, 2, 3, 4}));
}

TEST(ParseProcStatTest, RejectsMalformedInput) {
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcStat("intr 1 2 3\nctxt 4\n").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcStat("cpu 1 2 3\n").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcStat("cpu 1 2 x 4\n").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcStat("cpu 1 2 -3 4\n").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcStat("cpu 1 2 3 4\ncpuX 1 2 3 4\n").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcStat("").status()));
}

// Expected values are worked out by hand in tests/fixtures/proc/README.md.
TEST(ComputeCpuUsageTest, TwoCoreFixture) {
  absl::StatusOr<CpuUsage> usage =
      ComputeCpuUsage(ParseFixture("stat-2core-a"), ParseFixture("stat-2core-b"));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_DOUBLE_EQ(usage->host_ratio, 0.43);
  EXPECT_DOUBLE_EQ(usage->busiest_core_ratio, 0.65);  // 0.67 if iowait counted as busy
  EXPECT_EQ(usage->busiest_core, 0);
}

TEST(ComputeCpuUsageTest, FourCoreFixture) {
  absl::StatusOr<CpuUsage> usage =
      ComputeCpuUsage(ParseFixture("stat-4core-a"), ParseFixture("stat-4core-b"));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_DOUBLE_EQ(usage->host_ratio, 0.3775);
  EXPECT_DOUBLE_EQ(usage->busiest_core_ratio, 0.88);
  EXPECT_EQ(usage->busiest_core, 1);
}

TEST(ComputeCpuUsageTest, SameSampleTwiceIsFailedPrecondition) {
  const ProcStat stat = ParseFixture("stat-2core-a");
  EXPECT_TRUE(absl::IsFailedPrecondition(ComputeCpuUsage(stat, stat).status()));
}

TEST(ComputeCpuUsageTest, BackwardsIowaitCountsAsZero) {
  ProcStat a, b;
  a.total = {100, 0, 0, 100, 50, 0, 0, 0, 0, 0};
  b.total = {150, 0, 0, 150, 40, 0, 0, 0, 0, 0};  // iowait went back by 10
  absl::StatusOr<CpuUsage> usage = ComputeCpuUsage(a, b);
  ASSERT_TRUE(usage.ok());
  EXPECT_DOUBLE_EQ(usage->host_ratio, 0.5);
}

TEST(ComputeCpuUsageTest, SkipsCoresMissingFromOneSample) {
  ProcStat a = ParseFixture("stat-4core-a");
  ProcStat b = ParseFixture("stat-4core-b");
  b.cores.erase(1);  // the busiest core went offline
  absl::StatusOr<CpuUsage> usage = ComputeCpuUsage(a, b);
  ASSERT_TRUE(usage.ok());
  EXPECT_DOUBLE_EQ(usage->busiest_core_ratio, 0.35);
  EXPECT_EQ(usage->busiest_core, 0);
}

TEST(ProcPidStatTest, CountsFieldsAfterTheLastParenthesis) {
  absl::StatusOr<ProcessCpuTicks> ticks = ParseProcPidStat(Fixture("self-stat"));
  ASSERT_TRUE(ticks.ok()) << ticks.status();
  EXPECT_EQ(ticks->utime, 1234u);
  EXPECT_EQ(ticks->stime, 567u);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcPidStat("4242 (x S 1 2").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseProcPidStat("4242 (x) S 1 2 3").status()));
}

TEST(StatmTest, ResidentPages) {
  absl::StatusOr<uint64_t> pages = ParseStatmResidentPages(Fixture("self-statm"));
  ASSERT_TRUE(pages.ok()) << pages.status();
  EXPECT_EQ(*pages, 2048u);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseStatmResidentPages("30140\n").status()));
}

class CpuCollectorTest : public ::testing::Test {
 protected:
  void Install(const std::string& stat, const std::string& self_stat) {
    std::filesystem::create_directories(root_.path() / "self");
    ASSERT_TRUE(WriteTextFile(root_.path() / "stat", Fixture(stat)).ok());
    ASSERT_TRUE(WriteTextFile(root_.path() / "self/stat", Fixture(self_stat)).ok());
    ASSERT_TRUE(WriteTextFile(root_.path() / "self/statm", Fixture("self-statm")).ok());
  }
  CpuCollectorOptions Options() {
    CpuCollectorOptions options;
    options.procfs_root = root_.path().string();
    options.clock_ticks_per_second = 100;
    options.page_size_bytes = 4096;
    return options;
  }

  TempDir root_;
  prometheus::Registry registry_;
};

TEST_F(CpuCollectorTest, ExportsRatiosAndProcessMetrics) {
  CpuCollector collector(registry_, Options());
  Install("stat-2core-a", "self-stat");
  ASSERT_TRUE(collector.Collect(SteadyTime{}).ok());
  EXPECT_FALSE(collector.LastUsage().has_value());
  EXPECT_FALSE(SeriesValue(registry_, "rxfleet_host_cpu_ratio").has_value());  // no made-up 0
  EXPECT_FALSE(SeriesValue(registry_, "rxfleet_host_busiest_core_ratio").has_value());
  EXPECT_DOUBLE_EQ(*SeriesValue(registry_, "process_cpu_seconds_total"), 18.01);
  EXPECT_DOUBLE_EQ(*SeriesValue(registry_, "process_resident_memory_bytes"), 2048.0 * 4096);

  Install("stat-2core-b", "self-stat-b");
  ASSERT_TRUE(collector.Collect(SteadyTime{} + std::chrono::seconds(10)).ok());
  ASSERT_TRUE(collector.LastUsage().has_value());
  EXPECT_DOUBLE_EQ(*SeriesValue(registry_, "rxfleet_host_cpu_ratio"), 0.43);
  EXPECT_DOUBLE_EQ(*SeriesValue(registry_, "rxfleet_host_busiest_core_ratio"), 0.65);
  EXPECT_NEAR(*SeriesValue(registry_, "process_cpu_seconds_total"), 19.01, 1e-9);
  ASSERT_TRUE(collector.LastProcStat().has_value());
  EXPECT_EQ(collector.LastProcStat()->cores.size(), 2u);
}

TEST_F(CpuCollectorTest, MissingFilesAreAnErrorButOtherSourcesUpdate) {
  CpuCollector collector(registry_, Options());
  std::filesystem::create_directories(root_.path() / "self");
  ASSERT_TRUE(WriteTextFile(root_.path() / "self/statm", Fixture("self-statm")).ok());
  const absl::Status status = collector.Collect(SteadyTime{});
  EXPECT_FALSE(status.ok());
  EXPECT_DOUBLE_EQ(*SeriesValue(registry_, "process_resident_memory_bytes"), 2048.0 * 4096);
}

TEST_F(CpuCollectorTest, ReadsTheRealProcfs) {
  CpuCollector collector(registry_);
  ASSERT_TRUE(collector.Collect(std::chrono::steady_clock::now()).ok());
  EXPECT_GT(*SeriesValue(registry_, "process_resident_memory_bytes"), 0);
  ASSERT_TRUE(collector.LastProcStat().has_value());
  EXPECT_FALSE(collector.LastProcStat()->cores.empty());
}

}  // namespace
}  // namespace rxfleet::agent
