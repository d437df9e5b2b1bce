// The probe: block of the Experiment document and its rules (probe metrics need a probe that
// measures them, and the probe must fit in a window).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/experiment/experiment.h"
#include "common/experiment/metric.h"

namespace rxfleet::experiments {
namespace {

using ::testing::HasSubstr;

std::string Document(const std::string& metrics, const std::string& probe) {
  return R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: probe-hold}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: switchback
  duration: 1h
  windowLength: 60s
  periodLength: 10m
)" + metrics +
         probe;
}

constexpr char kRxPrimary[] = "  primaryMetric: probe_rx_throughput_bps\n";
constexpr char kTcpProbe[] = "  probe: {server: 10.0.0.1, duration: 10s, parallelStreams: 4}\n";

TEST(ProbeExperimentTest, ParsesTheProbeBlockWithDefaults) {
  absl::StatusOr<Experiment> e = ParseExperiment(Document(kRxPrimary, kTcpProbe), "t.yaml");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->probe.has_value());
  EXPECT_EQ(e->probe->server_host, "10.0.0.1");
  EXPECT_EQ(e->probe->server_port, 5201);
  EXPECT_EQ(e->probe->protocol, common::ProbeProtocol::kTcp);
  EXPECT_EQ(e->probe->direction, common::ProbeDirection::kReverse);
  EXPECT_EQ(e->probe->parallel_streams, 4);
  EXPECT_EQ(e->probe->duration, absl::Seconds(10));
  EXPECT_TRUE(e->NamesProbeMetric());
}

TEST(ProbeExperimentTest, UdpProbeRoundTripsThroughYaml) {
  const std::string text = Document(
      "  primaryMetric: probe_udp_loss_ratio\n  secondaryMetrics: [probe_udp_jitter_seconds, "
      "probe_rx_throughput_bps]\n  guardrails:\n    - {metric: probe_udp_loss_ratio, op: \"<=\", "
      "threshold: 5%}\n",
      "  probe:\n    server: \"iperf.lab:5202\"\n    protocol: udp\n    direction: reverse\n"
      "    duration: 5s\n    udpRate: 50Mbit/s\n");
  absl::StatusOr<Experiment> e = ParseExperiment(text, "t.yaml");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->probe->udp_rate_bps, 50'000'000u);
  EXPECT_EQ(e->probe->server_port, 5202);
  const std::string yaml = ExperimentToYaml(*e);
  EXPECT_THAT(yaml, HasSubstr("udpRate: 50000000"));
  absl::StatusOr<Experiment> again = ParseExperiment(yaml, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  again->source = e->source;
  EXPECT_EQ(*again, *e);
}

std::string Error(const std::string& metrics, const std::string& probe) {
  absl::StatusOr<Experiment> e = ParseExperiment(Document(metrics, probe), "t.yaml");
  EXPECT_FALSE(e.ok());
  return e.ok() ? "" : std::string(e.status().message());
}

TEST(ProbeExperimentTest, ProbeRequiredIffAProbeMetricIsNamed) {
  EXPECT_THAT(Error(kRxPrimary, ""),
              HasSubstr("spec.primaryMetric: probe_rx_throughput_bps is measured by an active "
                        "probe: the experiment needs a spec.probe"));
  EXPECT_THAT(Error("  primaryMetric: rx_throughput_bps\n  guardrails:\n    - {metric: "
                    "probe_tcp_retransmits, op: \"<=\", threshold: 100}\n",
                    ""),
              HasSubstr("spec.guardrails[0].metric: probe_tcp_retransmits is measured by an "
                        "active probe"));
  EXPECT_THAT(Error("  primaryMetric: rx_throughput_bps\n", kTcpProbe),
              HasSubstr("spec.probe: no primary, secondary or guardrail metric is a probe_* "
                        "metric"));
}

TEST(ProbeExperimentTest, ProbeMustFitTheWindowAndTheMetrics) {
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: 10.0.0.1, duration: 59s}\n"),
              HasSubstr("spec.probe.duration: probe duration 59s plus its 2s margin does not "
                        "fit in windowLength 1m"));
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: 10.0.0.1, direction: forward}\n"),
              HasSubstr("spec.probe.direction: probe_rx_throughput_bps (spec.primaryMetric) is "
                        "what the adapter receives and needs direction: reverse"));
  EXPECT_THAT(Error("  primaryMetric: probe_tx_throughput_bps\n", kTcpProbe),
              HasSubstr("needs direction: forward"));
  EXPECT_THAT(Error("  primaryMetric: probe_rx_throughput_bps\n  secondaryMetrics: "
                    "[probe_udp_jitter_seconds]\n",
                    kTcpProbe),
              HasSubstr("spec.probe.protocol: probe_udp_jitter_seconds "
                        "(spec.secondaryMetrics[0]) is measured by UDP probes only"));
  EXPECT_THAT(Error("  primaryMetric: probe_tcp_retransmits\n",
                    "  probe: {server: 10.0.0.1, protocol: udp, udpRate: 10Mbit/s}\n"),
              HasSubstr("needs protocol: tcp"));
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: 10.0.0.1, protocol: udp}\n"),
              HasSubstr("probe.udpRate 0 bit/s is outside 1 kbit/s..10 Gbit/s"));
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: 10.0.0.1, parallelStreams: 17}\n"),
              HasSubstr("t.yaml:13:"));
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: 10.0.0.1, parallelStreams: 17}\n"),
              HasSubstr("spec.probe.parallelStreams: parallelStreams 17 is out of range 1..16"));
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: 10.0.0.1, interval: 1h}\n"),
              HasSubstr("spec.probe.interval: applies to policies only"));
  EXPECT_THAT(Error(kRxPrimary, "  probe: {server: \"bad host\"}\n"),
              HasSubstr("spec.probe.server: probe server 'bad host'"));
}

TEST(ProbeExperimentTest, ValidateExperimentAppliesTheSameRules) {
  absl::StatusOr<Experiment> e = ParseExperiment(Document(kRxPrimary, kTcpProbe), "t.yaml");
  ASSERT_TRUE(e.ok()) << e.status();
  Experiment no_probe = *e;
  no_probe.probe.reset();
  EXPECT_THAT(ValidateExperiment(no_probe).message(),
              HasSubstr("experiment 'probe-hold': spec.primaryMetric: probe_rx_throughput_bps"));
  Experiment long_probe = *e;
  long_probe.probe->duration = absl::Seconds(60);
  EXPECT_THAT(ValidateExperiment(long_probe).message(), HasSubstr("spec.probe.duration"));
}

TEST(ProbeMetricTest, CatalogueUnitsAndFormats) {
  for (const char* name :
       {"probe_rx_throughput_bps", "probe_tx_throughput_bps", "probe_udp_loss_ratio",
        "probe_udp_jitter_seconds", "probe_tcp_retransmits"}) {
    absl::StatusOr<Metric> m = ParseMetric(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_TRUE(IsProbeMetric(*m)) << name;
    EXPECT_EQ(MetricName(*m), name);
  }
  EXPECT_FALSE(IsProbeMetric(Metric::kProbeLossRatio));
  EXPECT_EQ(UnitOf(Metric::kProbeTcpRetransmits), MetricUnit::kCount);
  EXPECT_TRUE(HigherIsBetter(Metric::kProbeRxThroughputBps));
  EXPECT_FALSE(HigherIsBetter(Metric::kProbeUdpLossRatio));
  EXPECT_EQ(FormatMetricValue(Metric::kProbeTcpRetransmits, 12.5), "12.50");
  EXPECT_EQ(FormatMetricDelta(Metric::kProbeTcpRetransmits, -3), "-3.000");
  EXPECT_EQ(FormatMetricValue(Metric::kProbeUdpJitterSeconds, 0.0004), "400.0 µs");
  EXPECT_EQ(FormatMetricValue(Metric::kProbeRxThroughputBps, 9.4e8), "940.0 Mbit/s");
  absl::StatusOr<double> count = ParseMetricValue(Metric::kProbeTcpRetransmits, "50");
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 50);
  EXPECT_THAT(ParseMetricValue(Metric::kProbeTcpRetransmits, "5%").status().message(),
              HasSubstr("must be a plain number"));
}

}  // namespace
}  // namespace rxfleet::experiments
