#include "common/experiment/metric.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rxfleet::experiments {
namespace {

using ::testing::HasSubstr;

TEST(MetricTest, CatalogueNamesRoundTrip) {
  std::set<std::string> names;
  for (Metric metric : kAllMetrics) {
    const std::string name(MetricName(metric));
    names.insert(name);
    absl::StatusOr<Metric> parsed = ParseMetric(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, metric);
  }
  EXPECT_EQ(names,
            (std::set<std::string>{
                "rx_throughput_bps", "tx_throughput_bps", "rtt_mean_seconds", "rtt_p99_seconds",
                "rx_drop_ratio", "probe_loss_ratio", "busiest_core_ratio", "host_cpu_ratio",
                "probe_rx_throughput_bps", "probe_tx_throughput_bps", "probe_udp_loss_ratio",
                "probe_udp_jitter_seconds", "probe_tcp_retransmits"}));
  EXPECT_THAT(ParseMetric("rx_bytes_per_second").status().message(),
              HasSubstr("unknown metric 'rx_bytes_per_second' (known metrics: rx_throughput_bps"));
  EXPECT_TRUE(HigherIsBetter(Metric::kRxThroughputBps));
  EXPECT_FALSE(HigherIsBetter(Metric::kRttP99Seconds));
  EXPECT_EQ(UnitOf(Metric::kRxDropRatio), MetricUnit::kRatio);
}

TEST(MetricTest, ParseValues) {
  auto value = [](Metric m, const std::string& text) {
    absl::StatusOr<double> v = ParseMetricValue(m, text);
    EXPECT_TRUE(v.ok()) << text << ": " << v.status();
    return v.value_or(-1);
  };
  EXPECT_DOUBLE_EQ(value(Metric::kRttP99Seconds, "20ms"), 0.020);
  EXPECT_DOUBLE_EQ(value(Metric::kRttP99Seconds, "1.5 ms"), 0.0015);
  EXPECT_DOUBLE_EQ(value(Metric::kRttP99Seconds, "500us"), 0.0005);
  EXPECT_DOUBLE_EQ(value(Metric::kRttP99Seconds, "500µs"), 0.0005);
  EXPECT_DOUBLE_EQ(value(Metric::kRttP99Seconds, "2s"), 2.0);
  EXPECT_DOUBLE_EQ(value(Metric::kRttP99Seconds, "0.02"), 0.02);
  EXPECT_DOUBLE_EQ(value(Metric::kRxDropRatio, "5%"), 0.05);
  EXPECT_DOUBLE_EQ(value(Metric::kRxDropRatio, "0.05"), 0.05);
  EXPECT_DOUBLE_EQ(value(Metric::kRxThroughputBps, "100Mbit/s"), 100e6);
  EXPECT_DOUBLE_EQ(value(Metric::kRxThroughputBps, "1.2 Gbit/s"), 1.2e9);
  EXPECT_DOUBLE_EQ(value(Metric::kRxThroughputBps, "2e8"), 2e8);

  EXPECT_THAT(ParseMetricValue(Metric::kRxDropRatio, "1.5").status().message(),
              HasSubstr("is a ratio and must lie in [0, 1]"));
  EXPECT_THAT(ParseMetricValue(Metric::kRxDropRatio, "-0.1").status().message(),
              HasSubstr("must not be negative"));
  EXPECT_THAT(ParseMetricValue(Metric::kRxThroughputBps, "20ms").status().message(),
              HasSubstr("must be a number of bit/s"));
  EXPECT_THAT(ParseMetricValue(Metric::kRttMeanSeconds, "inf").status().message(),
              HasSubstr("must be a number of seconds"));
  EXPECT_FALSE(ParseMetricValue(Metric::kHostCpuRatio, "").ok());
}

TEST(MetricTest, Format) {
  EXPECT_EQ(FormatMetricValue(Metric::kRxThroughputBps, 613.2e6), "613.2 Mbit/s");
  EXPECT_EQ(FormatMetricValue(Metric::kRxThroughputBps, 1.002e9), "1.002 Gbit/s");
  EXPECT_EQ(FormatMetricValue(Metric::kRxThroughputBps, 950), "950.0 bit/s");
  EXPECT_EQ(FormatMetricValue(Metric::kRttMeanSeconds, 0.00233), "2.330 ms");
  EXPECT_EQ(FormatMetricValue(Metric::kRttMeanSeconds, 0.00084), "840.0 µs");
  EXPECT_EQ(FormatMetricValue(Metric::kRxDropRatio, 0.857), "85.70 %");
  EXPECT_EQ(FormatMetricValue(Metric::kRxDropRatio, std::nan("")), "n/a");
  EXPECT_EQ(FormatMetricDelta(Metric::kRxThroughputBps, 389e6), "+389.0 Mbit/s");
  EXPECT_EQ(FormatMetricDelta(Metric::kRttMeanSeconds, -0.00104), "-1.040 ms");
  EXPECT_EQ(FormatMetricDelta(Metric::kRxDropRatio, 0.819), "+81.90 pp");
}

}  // namespace
}  // namespace rxfleet::experiments
