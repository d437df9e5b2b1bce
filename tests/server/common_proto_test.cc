// Conversions of common/proto: v1 messages <-> common value types.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/proto/checked_duration.h"
#include "common/proto/convert.h"
#include "common/proto/probe.h"
#include "common/proto/time.h"

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

v1::Policy UsbThreePolicy() {
  v1::Policy policy;
  policy.mutable_metadata()->set_name("usb3-short");
  (*policy.mutable_metadata()->mutable_labels())["team"] = "edge";
  policy.mutable_metadata()->set_resource_version("7");
  policy.mutable_spec()->set_priority(100);
  v1::AdapterSelector* selector = policy.mutable_spec()->mutable_selector();
  (*selector->mutable_match_labels())["board"] = "pi5";
  selector->add_usb_speeds(v1::USB_SPEED_SUPER);
  selector->add_usb_speeds(v1::USB_SPEED_SUPER_PLUS);
  selector->add_chips("rtl8922au");
  selector->add_vid_pids("0BDA:8912");
  selector->add_adapters("port-2-2");
  policy.mutable_spec()->mutable_settings()->set_hold_us(32);
  policy.mutable_spec()->mutable_settings()->set_buffer_kib(20);
  return policy;
}

TEST(CommonProtoTest, PolicyRoundTrip) {
  absl::StatusOr<Policy> policy = PolicyFromProto(UsbThreePolicy(), "server");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->name, "usb3-short");
  EXPECT_EQ(policy->priority, 100);
  EXPECT_EQ(policy->source, "server");
  EXPECT_EQ(policy->resource_version, "7");
  EXPECT_EQ(policy->labels.at("team"), "edge");
  EXPECT_EQ(policy->selector.usb_speeds,
            (std::vector<UsbSpeed>{UsbSpeed::kSuper, UsbSpeed::kSuperPlus}));
  ASSERT_EQ(policy->selector.vid_pids.size(), 1u);
  EXPECT_EQ(policy->selector.vid_pids[0].pid, 0x8912);
  EXPECT_EQ(policy->settings.hold_us, 32u);
  EXPECT_FALSE(policy->settings.count_threshold.has_value());

  const v1::Policy back = PolicyToProto(*policy);
  EXPECT_EQ(back.spec().selector().vid_pids(0), "0bda:8912");
  absl::StatusOr<Policy> again = PolicyFromProto(back, "server");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *policy);
}

TEST(CommonProtoTest, PolicyFromProtoValidatesLikeTheAgent) {
  v1::Policy policy = UsbThreePolicy();
  policy.mutable_spec()->mutable_settings()->set_hold_us(9000);
  absl::StatusOr<Policy> converted = PolicyFromProto(policy, "server");
  ASSERT_EQ(converted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(converted.status().message(), HasSubstr("policy 'usb3-short'"));
  EXPECT_THAT(converted.status().message(), HasSubstr("8160"));
}

TEST(CommonProtoTest, SelectorRejectsUnspecifiedSpeedAndBadVidPid) {
  v1::Policy policy = UsbThreePolicy();
  policy.mutable_spec()->mutable_selector()->add_usb_speeds(v1::USB_SPEED_UNSPECIFIED);
  absl::StatusOr<Policy> converted = PolicyFromProto(policy, "server");
  EXPECT_THAT(converted.status().message(), HasSubstr("usb_speeds[2]"));

  policy = UsbThreePolicy();
  policy.mutable_spec()->mutable_selector()->add_usb_speeds(static_cast<v1::UsbSpeed>(42));
  EXPECT_THAT(PolicyFromProto(policy, "server").status().message(), HasSubstr("unknown value 42"));

  policy = UsbThreePolicy();
  policy.mutable_spec()->mutable_selector()->add_vid_pids("nope");
  EXPECT_THAT(PolicyFromProto(policy, "server").status().message(), HasSubstr("vid_pids[1]"));
}

TEST(CommonProtoTest, EmptySettingsAreRejected) {
  v1::Policy policy = UsbThreePolicy();
  policy.mutable_spec()->clear_settings();
  EXPECT_EQ(PolicyFromProto(policy, "server").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommonProtoTest, SpeedsAndLayouts) {
  EXPECT_EQ(UsbSpeedFromProto(v1::USB_SPEED_UNSPECIFIED), UsbSpeed::kUnknown);
  EXPECT_EQ(UsbSpeedFromProto(99), UsbSpeed::kUnknown);
  for (UsbSpeed speed :
       {UsbSpeed::kLow, UsbSpeed::kFull, UsbSpeed::kHigh, UsbSpeed::kSuper, UsbSpeed::kSuperPlus}) {
    EXPECT_EQ(UsbSpeedFromProto(UsbSpeedToProto(speed)), speed);
  }
  for (RxAggLayout layout : {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3}) {
    EXPECT_EQ(RxAggLayoutFromProto(RxAggLayoutToProto(layout)), layout);
  }
  EXPECT_EQ(RxAggLayoutFromProto(v1::RX_AGG_LAYOUT_UNSPECIFIED), std::nullopt);
}

TEST(CommonProtoTest, SettingsKeepUnsetFieldsUnset) {
  RxAggSettings settings;
  settings.count_threshold = 0;  // a set zero is a value
  const v1::RxAggSettings proto = RxAggSettingsToProto(settings);
  EXPECT_TRUE(proto.has_count_threshold());
  EXPECT_FALSE(proto.has_hold_us());
  EXPECT_FALSE(proto.has_force_enable());
  EXPECT_EQ(RxAggSettingsFromProto(proto), settings);
}

TEST(CommonProtoTest, EffectiveSettingsCarryProvenance) {
  Policy server;
  server.name = "usb3-short";
  server.priority = 5;
  server.settings.hold_us = 64;
  server.settings.enable = true;
  server.settings.force_enable = true;
  const std::vector<Policy> policies = {server};
  AdapterAttributes adapter;
  adapter.adapter_id = "port-2-2";
  adapter.usb_speed = UsbSpeed::kSuper;
  const PolicyLayer layers[] = {{PolicySource::kServerPolicy, &policies}};
  const v1::EffectiveSettings effective = EffectiveSettingsToProto(Resolve(adapter, layers));
  EXPECT_EQ(effective.settings().hold_us(), 64u);
  EXPECT_TRUE(effective.settings().force_enable());
  const v1::Provenance& hold = effective.provenance().at("hold_us");
  EXPECT_EQ(hold.source(), v1::SETTING_SOURCE_SERVER_POLICY);
  EXPECT_EQ(hold.name(), "usb3-short");
  EXPECT_EQ(effective.provenance().at("force_enable").name(), "usb3-short");
  EXPECT_FALSE(effective.provenance().contains("buffer_kib"));

  // Nothing but the built-in default.
  const v1::EffectiveSettings builtin = EffectiveSettingsToProto(Resolve(adapter, {}));
  EXPECT_EQ(builtin.settings().hold_us(), 32u);
  EXPECT_EQ(builtin.provenance().at("hold_us").source(), v1::SETTING_SOURCE_BUILT_IN_DEFAULT);
  EXPECT_EQ(builtin.provenance().at("hold_us").name(), "");
}

TEST(CommonProtoTest, ExperimentProvenanceSplitsNameAndArm) {
  const v1::Provenance p =
      ProvenanceToProto({PolicySource::kExperiment, "experiment hold-ab arm short"});
  EXPECT_EQ(p.source(), v1::SETTING_SOURCE_EXPERIMENT);
  EXPECT_EQ(p.name(), "hold-ab");
  EXPECT_EQ(p.arm(), "short");
}

TEST(CommonProtoTest, AdapterAttributes) {
  v1::Adapter adapter;
  adapter.mutable_metadata()->set_name("port-2-2");
  adapter.set_host_id("pi5-a");
  adapter.mutable_status()->set_vid(0x0bda);
  adapter.mutable_status()->set_pid(0x8912);
  adapter.mutable_status()->set_chip("rtl8922au");
  adapter.mutable_status()->set_usb_speed(v1::USB_SPEED_SUPER);
  const AdapterAttributes attributes = AdapterAttributesFromProto(adapter, {{"board", "pi5"}});
  EXPECT_EQ(attributes.adapter_id, "port-2-2");
  EXPECT_EQ(attributes.host, "pi5-a");
  EXPECT_EQ(attributes.vid, 0x0bda);
  EXPECT_EQ(attributes.pid, 0x8912);
  EXPECT_EQ(attributes.usb_speed, UsbSpeed::kSuper);
  EXPECT_EQ(attributes.host_labels.at("board"), "pi5");
}

TEST(CommonProtoTest, TimesRoundTrip) {
  const absl::Time t = absl::FromUnixNanos(1767225600123456789);
  EXPECT_EQ(TimeFromProto(TimeToProto(t)), t);
  const absl::Time before_epoch = absl::FromUnixNanos(-1500000000);
  const google::protobuf::Timestamp ts = TimeToProto(before_epoch);
  EXPECT_EQ(ts.seconds(), -2);
  EXPECT_EQ(ts.nanos(), 500000000);
  EXPECT_EQ(TimeFromProto(ts), before_epoch);
  EXPECT_EQ(TimeToProto(absl::InfiniteFuture()).seconds(), 253402300799);
  EXPECT_EQ(DurationFromProto(DurationToProto(absl::Milliseconds(-1500))),
            absl::Milliseconds(-1500));
  const google::protobuf::Duration d = DurationToProto(absl::Milliseconds(-1500));
  EXPECT_EQ(d.seconds(), -1);
  EXPECT_EQ(d.nanos(), -500000000);
}

TEST(TimeProtoTest, CheckedDurationsRefuseWhatIsNotADuration) {
  google::protobuf::Duration d;
  d.set_seconds(-1);
  d.set_nanos(-500000000);
  EXPECT_EQ(*CheckedDurationFromProto(d, "x"), absl::Milliseconds(-1500));
  d.set_seconds(0);
  d.set_nanos(-5);
  EXPECT_EQ(*CheckedDurationFromProto(d, "x"), absl::Nanoseconds(-5));
  d.set_seconds(1);
  d.set_nanos(-500000000);
  EXPECT_EQ(CheckedDurationFromProto(d, "window").status().message(),
            "window: seconds 1 and nanos -500000000 have different signs");
  d.set_seconds(315576000001);
  d.set_nanos(0);
  EXPECT_FALSE(CheckedDurationFromProto(d, "x").ok());
  d.set_seconds(0);
  d.set_nanos(-1000000000);
  EXPECT_FALSE(CheckedDurationFromProto(d, "x").ok());
}

TEST(ProbeProtoTest, DefaultsRangesAndTheRoundTrip) {
  v1::ProbeSpec proto;
  proto.set_server("10.0.0.5");
  absl::StatusOr<ProbeSpec> spec = ProbeSpecFromProto(proto, "spec.probe");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->server_port, kDefaultIperfPort);
  EXPECT_EQ(spec->protocol, ProbeProtocol::kTcp);
  EXPECT_EQ(spec->direction, ProbeDirection::kReverse);
  EXPECT_EQ(spec->parallel_streams, 1);
  EXPECT_EQ(spec->duration, kDefaultProbeDuration);
  EXPECT_EQ(spec->interval, kDefaultProbeInterval);
  absl::StatusOr<ProbeSpec> again = ProbeSpecFromProto(ProbeSpecToProto(*spec), "x");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *spec);

  v1::ProbeSpec bad = proto;
  bad.set_protocol(static_cast<v1::ProbeProtocol>(7));
  EXPECT_THAT(ProbeSpecFromProto(bad, "spec.probe").status().message(),
              HasSubstr("spec.probe.protocol 7 is unknown"));
  bad = proto;
  bad.set_parallel_streams(100000);
  EXPECT_THAT(ProbeSpecFromProto(bad, "spec.probe").status().message(),
              HasSubstr("parallelStreams 100000 is outside 1..16"));
  bad = proto;
  bad.mutable_duration()->set_seconds(1);
  bad.mutable_duration()->set_nanos(-5);
  EXPECT_FALSE(ProbeSpecFromProto(bad, "spec.probe").ok());
  bad = proto;
  bad.set_server("");
  EXPECT_THAT(ProbeSpecFromProto(bad, "spec.probe").status().message(),
              HasSubstr("spec.probe: probe.server is required"));
  bad.set_server("a b");
  EXPECT_THAT(ProbeSpecFromProto(bad, "spec.probe").status().message(), HasSubstr("probe server"));
}

TEST(ProbeProtoTest, PoliciesCarryTheirProbe) {
  v1::Policy proto;
  proto.mutable_metadata()->set_name("probe-lab");
  proto.mutable_spec()->mutable_probe()->set_server("iperf.lab:5202");
  absl::StatusOr<Policy> policy = PolicyFromProto(proto, "server");
  ASSERT_TRUE(policy.ok()) << policy.status();  // a probe-only policy needs no settings
  ASSERT_TRUE(policy->probe.has_value());
  EXPECT_EQ(policy->probe->server_port, 5202);
  absl::StatusOr<Policy> again = PolicyFromProto(PolicyToProto(*policy), "server");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->probe, policy->probe);
  proto.mutable_spec()->mutable_probe()->set_protocol(v1::PROBE_PROTOCOL_UDP);
  EXPECT_THAT(PolicyFromProto(proto, "server").status().message(),
              HasSubstr("policy 'probe-lab': spec.probe: probe.udpRate"));
}

}  // namespace
}  // namespace rxfleet::common
