#include "common/probe/probe_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/policy/policy.h"
#include "common/policy/resolver.h"
#include "common/units.h"

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

ProbeSpec Tcp(const std::string& server) {
  ProbeSpec spec;
  EXPECT_TRUE(ParseProbeServer(server, spec).ok()) << server;
  return spec;
}

TEST(ProbeServerTest, HostsAndPortsWithOneSpellingPerServer) {
  ProbeSpec spec = Tcp("iperf.lab");
  EXPECT_EQ(spec.server_host, "iperf.lab");
  EXPECT_EQ(spec.server_port, kDefaultIperfPort);
  spec = Tcp("10.0.0.5:5202");
  EXPECT_EQ(spec.server_host, "10.0.0.5");
  EXPECT_EQ(spec.server_port, 5202);
  EXPECT_EQ(ProbeServerAddress(spec), "10.0.0.5:5202");
  // Names are case-insensitive: LOCALHOST and localhost are one server.
  spec = Tcp("IPerf-1.Lab.example:5201");
  EXPECT_EQ(spec.server_host, "iperf-1.lab.example");
  EXPECT_EQ(ProbeServerAddress(spec), "iperf-1.lab.example:5201");
}

// Seen accepted before: "10.77.0.1:5201:3" became the IPv6 host "[10.77.0.1:5201:3]:5201",
// IPv6 servers were accepted although probes run over IPv4 only and then failed as
// "unreachable", and "10.77.0.001" passed as a second spelling of 10.77.0.1.
TEST(ProbeServerTest, RefusesWhatIsNotAnIpv4AddressOrAHostName) {
  ProbeSpec spec;
  for (const char* bad :
       {"",       ":5201", "host:",     "host:0",      "host:65536", "host:52x1", "[::1",
        "[::1]x", "ho st", "host;rm",   "-foo",        "foo-",       "a..b",      "..",
        ".",      "host.", "999.1.1.1", "10.77.0.001", "10.77.0",    "1.2.3.4.5"}) {
    absl::Status s = ParseProbeServer(bad, spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("probe server")) << bad;
  }
  for (const char* v6 : {"10.77.0.1:5201:3", "::1", "fe80::1", "[::1]:5201", "[fd00::1]"}) {
    absl::Status s = ParseProbeServer(v6, spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << v6;
    EXPECT_THAT(s.message(), HasSubstr("IPv6 servers are not supported")) << v6;
  }
  EXPECT_FALSE(ParseProbeServer(std::string(254, 'a'), spec).ok());
  EXPECT_FALSE(ParseProbeServer(std::string(64, 'a') + ".lab", spec).ok());  // label > 63
  EXPECT_TRUE(ParseProbeServer(std::string(63, 'a') + ".lab", spec).ok());
}

TEST(ValidateProbeSpecTest, RangesAndCombinations) {
  ProbeSpec spec = Tcp("iperf.lab");
  EXPECT_TRUE(ValidateProbeSpec(spec).ok());
  ProbeSpec bad = spec;
  bad.parallel_streams = 17;
  EXPECT_THAT(ValidateProbeSpec(bad).message(), HasSubstr("parallelStreams 17 is outside 1..16"));
  bad = spec;
  bad.duration = absl::Milliseconds(1500);
  EXPECT_THAT(ValidateProbeSpec(bad).message(), HasSubstr("whole seconds"));
  bad.duration = absl::Seconds(61);
  EXPECT_FALSE(ValidateProbeSpec(bad).ok());
  bad = spec;
  bad.interval = absl::Seconds(30);
  EXPECT_THAT(ValidateProbeSpec(bad).message(), HasSubstr("probe.interval"));
  bad = spec;
  bad.udp_rate_bps = 1000;  // a rate on a TCP probe
  EXPECT_THAT(ValidateProbeSpec(bad).message(), HasSubstr("UDP probes only"));
  bad.protocol = ProbeProtocol::kUdp;
  EXPECT_TRUE(ValidateProbeSpec(bad).ok());
  bad.udp_rate_bps = 0;  // UDP without a rate
  EXPECT_THAT(ValidateProbeSpec(bad).message(), HasSubstr("required for UDP"));
  bad = spec;
  bad.server_host.clear();
  EXPECT_THAT(ValidateProbeSpec(bad).message(), HasSubstr("probe.server is required"));
}

TEST(DescribeProbeSpecTest, OneLine) {
  ProbeSpec spec = Tcp("10.0.0.1");
  spec.parallel_streams = 4;
  EXPECT_EQ(DescribeProbeSpec(spec), "TCP download, 4 streams, 10s, against 10.0.0.1:5201");
  spec.protocol = ProbeProtocol::kUdp;
  spec.direction = ProbeDirection::kForward;
  spec.udp_rate_bps = 50'000'000;
  spec.parallel_streams = 1;
  EXPECT_EQ(DescribeProbeSpec(spec),
            "UDP upload at 50 Mbit/s, 1 stream, 10s, against 10.0.0.1:5201");
}

TEST(ParseBitRateTest, UnitsAndErrors) {
  EXPECT_EQ(*ParseBitRate("50Mbit/s"), 50'000'000u);
  EXPECT_EQ(*ParseBitRate("1.5 Gbit/s"), 1'500'000'000u);
  EXPECT_EQ(*ParseBitRate("64kbit/s"), 64'000u);
  EXPECT_EQ(*ParseBitRate("64000"), 64'000u);
  EXPECT_EQ(*ParseBitRate("100 bit/s"), 100u);
  for (const char* bad : {"", "fast", "-5Mbit/s", "5 MB/s", "1e3Mbit/s", "2000Gbit/s"}) {
    EXPECT_FALSE(ParseBitRate(bad).ok()) << bad;
  }
}

std::string Doc(const std::string& spec_body) {
  return "apiVersion: rxfleet/v1\nkind: RxAggPolicy\nmetadata:\n  name: probe-lab\nspec:\n" +
         spec_body;
}

TEST(PolicyProbeTest, AProbeOnlyPolicyParsesWithDefaults) {
  absl::StatusOr<std::vector<Policy>> policies =
      ParsePolicyDocuments(Doc("  probe:\n    server: iperf.lab\n"), "p.yaml");
  ASSERT_TRUE(policies.ok()) << policies.status();
  ASSERT_EQ(policies->size(), 1u);
  const Policy& policy = (*policies)[0];
  ASSERT_TRUE(policy.probe.has_value());
  EXPECT_TRUE(policy.settings.Empty());
  EXPECT_EQ(policy.probe->server_host, "iperf.lab");
  EXPECT_EQ(policy.probe->duration, kDefaultProbeDuration);
  EXPECT_EQ(policy.probe->interval, kDefaultProbeInterval);
  EXPECT_TRUE(ValidatePolicy(policy).ok());
  // The writer states every field; the reader gives the same policy back.
  absl::StatusOr<std::vector<Policy>> again = ParsePolicyDocuments(PolicyToYaml(policy), "w");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << PolicyToYaml(policy);
  EXPECT_EQ((*again)[0].probe, policy.probe);
  EXPECT_TRUE((*again)[0].settings.Empty());
}

TEST(PolicyProbeTest, EveryFieldAndTheRoundTrip) {
  absl::StatusOr<std::vector<Policy>> policies = ParsePolicyDocuments(
      Doc("  settings:\n    hold: 32us\n  probe:\n    server: \"iperf5.lab:5202\"\n"
          "    protocol: udp\n    direction: forward\n    parallelStreams: 2\n"
          "    duration: 5s\n    udpRate: 50Mbit/s\n    interval: 30m\n"),
      "p.yaml");
  ASSERT_TRUE(policies.ok()) << policies.status();
  const Policy& policy = (*policies)[0];
  ASSERT_TRUE(policy.probe.has_value());
  EXPECT_EQ(policy.probe->server_host, "iperf5.lab");
  EXPECT_EQ(policy.probe->server_port, 5202);
  EXPECT_EQ(policy.probe->protocol, ProbeProtocol::kUdp);
  EXPECT_EQ(policy.probe->direction, ProbeDirection::kForward);
  EXPECT_EQ(policy.probe->parallel_streams, 2);
  EXPECT_EQ(policy.probe->duration, absl::Seconds(5));
  EXPECT_EQ(policy.probe->udp_rate_bps, 50'000'000u);
  EXPECT_EQ(policy.probe->interval, absl::Minutes(30));
  absl::StatusOr<std::vector<Policy>> again = ParsePolicyDocuments(PolicyToYaml(policy), "w");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << PolicyToYaml(policy);
  EXPECT_EQ((*again)[0].probe, policy.probe);
  EXPECT_EQ((*again)[0].settings, policy.settings);
}

std::string Error(const std::string& spec_body) {
  absl::StatusOr<std::vector<Policy>> policies = ParsePolicyDocuments(Doc(spec_body), "p.yaml");
  EXPECT_FALSE(policies.ok()) << spec_body;
  return policies.ok() ? "" : std::string(policies.status().message());
}

TEST(PolicyProbeTest, ErrorsPointAtTheField) {
  EXPECT_THAT(Error("  probe:\n    protocol: udp\n"),
              HasSubstr("spec.probe: missing required field 'server'"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    protocol: sctp\n"),
              HasSubstr("p.yaml:8:15: spec.probe.protocol: must be one of tcp, udp"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    protocol: udp\n"),
              HasSubstr("spec.probe: probe.udpRate"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    udpRate: 5Mbit/s\n"),
              HasSubstr("spec.probe.udpRate: probe.udpRate is for UDP probes only"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    duration: soon\n"),
              HasSubstr("spec.probe.duration: must be a duration"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    duration: 90s\n"),
              HasSubstr("spec.probe.duration: probe.duration 1m30s must be whole seconds"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    parallelStreams: 40\n"),
              HasSubstr("spec.probe.parallelStreams: parallelStreams 40 is out of range 1..16"));
  EXPECT_THAT(Error("  probe:\n    server: a\n    color: red\n"),
              HasSubstr("unknown field 'color'"));
  EXPECT_THAT(Error("  probe:\n    server: a\n  settings: {}\n"),
              HasSubstr("leave settings out: the policy then only probes"));
  // Without a probe a policy still needs its settings.
  EXPECT_THAT(Error("  priority: 1\n"), HasSubstr("missing required field 'settings'"));
}

TEST(ValidatePolicyTest, ChecksTheProbe) {
  Policy policy;
  policy.name = "probe-lab";
  policy.probe = ProbeSpec{};
  EXPECT_THAT(ValidatePolicy(policy).message(),
              HasSubstr("policy 'probe-lab': spec.probe.server is required"));
  policy.probe->server_host = "iperf.lab";
  EXPECT_TRUE(ValidatePolicy(policy).ok());
  policy.probe.reset();
  EXPECT_THAT(ValidatePolicy(policy).message(), HasSubstr("spec.settings must set"));
}

Policy ProbePolicy(const std::string& name, int priority, const std::string& server,
                   const std::vector<UsbSpeed>& speeds = {}) {
  Policy policy;
  policy.name = name;
  policy.priority = priority;
  policy.selector.usb_speeds = speeds;
  policy.probe = Tcp(server);
  return policy;
}

TEST(ResolveProbeTest, TheWinningPolicyDecidesTheWholeProbe) {
  AdapterAttributes adapter;
  adapter.adapter_id = "port-1";
  adapter.usb_speed = UsbSpeed::kSuper;
  Policy settings_only;
  settings_only.name = "hold";
  settings_only.priority = 900;
  settings_only.settings.hold_us = 32;
  const std::vector<Policy> local = {ProbePolicy("local-probe", 0, "10.0.0.1"), settings_only};
  const std::vector<Policy> server = {
      ProbePolicy("server-probe", 0, "10.0.0.2"),
      ProbePolicy("usb2-probe", 500, "10.0.0.3", {UsbSpeed::kHigh})};
  const std::vector<PolicyLayer> layers = {{PolicySource::kLocalFile, &local},
                                           {PolicySource::kServerPolicy, &server}};
  // Equal priority: the server layer wins; the higher-priority usb2 probe does not match;
  // the settings-only policy takes no part.
  std::optional<Resolved<ProbeSpec>> probe = ResolveProbe(adapter, layers);
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(probe->value.server_host, "10.0.0.2");
  EXPECT_EQ(probe->provenance.ToString(), "server policy server-probe");
  adapter.usb_speed = UsbSpeed::kHigh;
  probe = ResolveProbe(adapter, layers);
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(probe->value.server_host, "10.0.0.3");
  // No probe anywhere: none, not a default.
  const std::vector<PolicyLayer> plain = {{PolicySource::kLocalFile, nullptr}};
  EXPECT_FALSE(ResolveProbe(adapter, plain).has_value());
}

}  // namespace
}  // namespace rxfleet::common
