#include "agent/collectors/netdev_stats.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/collectors/metric_values.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

namespace fs = std::filesystem;
using ::rxfleet::agent::testing::Exposition;
using ::rxfleet::agent::testing::SeriesCount;
using ::rxfleet::agent::testing::SeriesValue;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseStatisticsValueTest, AcceptsKernelFormat) {
  EXPECT_EQ(ParseStatisticsValue("123\n").value_or(0), 123u);
  EXPECT_EQ(ParseStatisticsValue(" 42 ").value_or(0), 42u);
  EXPECT_EQ(ParseStatisticsValue("0").value_or(1), 0u);
  EXPECT_EQ(ParseStatisticsValue("18446744073709551615\n").value_or(0), UINT64_MAX);
}

TEST(ParseStatisticsValueTest, RejectsGarbage) {
  for (const char* bad : {"", "\n", "-1", "+1", "12a", "1 2", "18446744073709551616", "0x10"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseStatisticsValue(bad).status())) << bad;
  }
}

TEST(SetNetdevCounterTest, SetsTheNamedField) {
  NetdevCounters c;
  ASSERT_TRUE(SetNetdevCounter("tx_dropped", "7\n", c).ok());
  EXPECT_EQ(c.tx_dropped, 7u);
  EXPECT_TRUE(absl::IsInvalidArgument(SetNetdevCounter("rx_missed", "1", c)));
  const absl::Status bad = SetNetdevCounter("rx_bytes", "x", c);
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("rx_bytes"));
}

TEST(MonotonicCounterTest, TreatsADecreaseAsAReset) {
  MonotonicCounter c;
  EXPECT_EQ(c.Update(1000), 0u);  // baseline
  EXPECT_EQ(c.Update(1500), 500u);
  EXPECT_EQ(c.Update(200), 200u);  // reset: counted from 0
  EXPECT_EQ(c.resets(), 1u);
  EXPECT_EQ(c.Update(200), 0u);
  EXPECT_EQ(c.total(), 700u);
  c.Rebase();
  EXPECT_EQ(c.Update(50), 50u);  // new source: added in full
  EXPECT_EQ(c.total(), 750u);
  EXPECT_EQ(c.resets(), 1u);
}

TEST(ReadNetdevStatisticsTest, ReadsFixture) {
  absl::StatusOr<NetdevCounters> c =
      ReadNetdevStatistics(SourcePath("tests/fixtures/netdev/wlan0-t0/statistics"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (NetdevCounters{1843220117, 92233012, 1402211, 610233, 12, 0, 0, 0}));
}

TEST(ReadNetdevStatisticsTest, Errors) {
  const absl::Status malformed =
      ReadNetdevStatistics(SourcePath("tests/fixtures/netdev/malformed/statistics")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(malformed)) << malformed;
  EXPECT_THAT(std::string(malformed.message()), HasSubstr("rx_bytes"));
  EXPECT_TRUE(absl::IsNotFound(
      ReadNetdevStatistics(SourcePath("tests/fixtures/netdev/no-such-netdev/statistics"))
          .status()));
}

// Replays tests/fixtures/netdev samples through a directory that plays the netdev.
class NetdevCollectorTest : public ::testing::Test {
 protected:
  NetdevCollectorTest() {
    NetdevCollectorOptions options;
    options.sysfs_root = sysfs_.path().string();
    options.log = [this](std::string_view line) {
      absl::MutexLock lock(&mu_);
      logs_.emplace_back(line);
    };
    collector_ = std::make_unique<NetdevCollector>(registry_, options);
  }

  fs::path NetdevDir() const { return sysfs_.path() / "class/net/wlan0"; }

  // Puts a sample in place of the netdev directory (as if the kernel updated it).
  void Install(const std::string& sample) {
    fs::remove_all(NetdevDir());
    fs::create_directories(NetdevDir());
    fs::copy(SourcePath("tests/fixtures/netdev/" + sample), NetdevDir(),
             fs::copy_options::recursive);
  }

  void CollectAt(int seconds) {
    ASSERT_TRUE(collector_->Collect(SteadyTime{} + std::chrono::seconds(seconds)).ok());
  }

  double Value(const std::string& name) {
    return SeriesValue(registry_, name, {{"adapter", "port-2-2"}}).value_or(-1);
  }

  size_t LogCount() {
    absl::MutexLock lock(&mu_);
    return logs_.size();
  }

  TempDir sysfs_;
  prometheus::Registry registry_;
  std::unique_ptr<NetdevCollector> collector_;
  absl::Mutex mu_;
  std::vector<std::string> logs_;
};

TEST_F(NetdevCollectorTest, CountersRatesResetsAndDisappearance) {
  collector_->UpsertAdapter({"port-2-2", "wlan0", ""});  // default dir under sysfs_root
  Install("wlan0-t0");
  CollectAt(0);
  EXPECT_EQ(Value("rxfleet_adapter_netdev_present"), 1);
  EXPECT_EQ(Value("rxfleet_adapter_receive_bytes_total"), 0);
  EXPECT_FALSE(collector_->LastRates("port-2-2").has_value());

  Install("wlan0-t1");
  CollectAt(10);
  EXPECT_EQ(Value("rxfleet_adapter_receive_bytes_total"), 125000000);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_bytes_total"), 2500000);
  EXPECT_EQ(Value("rxfleet_adapter_receive_packets_total"), 86000);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_packets_total"), 41000);
  EXPECT_EQ(Value("rxfleet_adapter_receive_drops_total"), 86);
  EXPECT_EQ(Value("rxfleet_adapter_receive_errors_total"), 3);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_drops_total"), 0);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_errors_total"), 0);
  std::optional<TrafficRates> rates = collector_->LastRates("port-2-2");
  ASSERT_TRUE(rates.has_value());
  EXPECT_DOUBLE_EQ(rates->interval_seconds, 10);
  EXPECT_DOUBLE_EQ(rates->rx_bits_per_second, 100e6);
  EXPECT_DOUBLE_EQ(rates->tx_bits_per_second, 2e6);
  EXPECT_DOUBLE_EQ(rates->rx_drop_ratio, 86.0 / 86086.0);
  EXPECT_DOUBLE_EQ(rates->tx_drop_ratio, 0);

  // Same ifindex, counters went backwards: reset, never backwards.
  Install("wlan0-t2-reset");
  CollectAt(20);
  EXPECT_EQ(Value("rxfleet_adapter_receive_bytes_total"), 129000000);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_bytes_total"), 2700000);
  EXPECT_EQ(Value("rxfleet_adapter_receive_packets_total"), 89000);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_packets_total"), 42500);
  EXPECT_EQ(Value("rxfleet_adapter_receive_drops_total"), 86);
  EXPECT_EQ(Value("rxfleet_adapter_receive_errors_total"), 3);
  EXPECT_EQ(Value("rxfleet_adapter_netdev_resets_total"), 6);

  // The netdev disappears: values hold, present 0, one log line, still OK.
  fs::remove_all(NetdevDir());
  CollectAt(30);
  CollectAt(31);
  EXPECT_EQ(Value("rxfleet_adapter_netdev_present"), 0);
  EXPECT_EQ(Value("rxfleet_adapter_receive_bytes_total"), 129000000);
  EXPECT_EQ(LogCount(), 1u);
  EXPECT_FALSE(collector_->LastRates("port-2-2").has_value());
  EXPECT_FALSE(collector_->Totals().at("port-2-2").present);

  // A new netdev (new ifindex) appears under the same name: added in full.
  Install("wlan0-t3-new-ifindex");
  CollectAt(40);
  EXPECT_EQ(Value("rxfleet_adapter_netdev_present"), 1);
  EXPECT_EQ(Value("rxfleet_adapter_receive_bytes_total"), 2629000000.0);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_bytes_total"), 3000000);
  EXPECT_EQ(Value("rxfleet_adapter_receive_packets_total"), 1789000);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_packets_total"), 44500);
  EXPECT_EQ(Value("rxfleet_adapter_receive_drops_total"), 91);
  EXPECT_EQ(Value("rxfleet_adapter_transmit_drops_total"), 1);
  EXPECT_EQ(LogCount(), 2u);  // "readable again"
  const NetdevTotals totals = collector_->Totals().at("port-2-2");
  EXPECT_TRUE(totals.present);
  EXPECT_EQ(totals.counters.rx_bytes, 2629000000u);
}

TEST_F(NetdevCollectorTest, MalformedStatisticsFailTheCollector) {
  collector_->UpsertAdapter({"port-2-2", "wlan0", ""});
  Install("malformed");
  const absl::Status status = collector_->Collect(SteadyTime{});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(Value("rxfleet_adapter_netdev_present"), 0);
}

TEST_F(NetdevCollectorTest, ExplicitStatisticsDirAsUnderTheUsbEmulator) {
  const fs::path usb_netdev = sysfs_.path() / "bus/usb/devices/2-2:1.0/net/wlx0";
  fs::create_directories(usb_netdev);
  fs::copy(SourcePath("tests/fixtures/netdev/wlan0-t0"), usb_netdev, fs::copy_options::recursive);
  collector_->UpsertAdapter({"port-2-2", "wlx0", (usb_netdev / "statistics").string()});
  CollectAt(0);
  EXPECT_EQ(Value("rxfleet_adapter_netdev_present"), 1);
  EXPECT_EQ(collector_->Totals().at("port-2-2").counters.rx_bytes, 0u);
}

TEST_F(NetdevCollectorTest, AdapterWithoutNetdevHasStateButNoTrafficSeries) {
  collector_->UpsertAdapter({"port-1-1", "", ""});
  ASSERT_TRUE(collector_->Collect(SteadyTime{}).ok());
  EXPECT_EQ(SeriesValue(registry_, "rxfleet_adapter_netdev_present", {{"adapter", "port-1-1"}}), 0);
  EXPECT_EQ(
      SeriesCount(registry_, "rxfleet_adapter_receive_bytes_total", {{"adapter", "port-1-1"}}), 0u);
  EXPECT_EQ(LogCount(), 0u);
}

TEST_F(NetdevCollectorTest, RemoveAndSetAdaptersDeleteSeries) {
  Install("wlan0-t0");
  collector_->SetAdapters({{"port-2-2", "wlan0", ""}, {"port-1-1", "", ""}});
  CollectAt(0);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_netdev_present"), 2u);
  collector_->SetAdapters({{"port-1-1", "", ""}});
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_netdev_present"), 1u);
  EXPECT_THAT(Exposition(registry_), Not(HasSubstr("port-2-2")));
  collector_->RemoveAdapter("port-1-1");
  collector_->RemoveAdapter("unknown");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_netdev_present"), 0u);
  EXPECT_TRUE(collector_->Totals().empty());
}

}  // namespace
}  // namespace rxfleet::agent
