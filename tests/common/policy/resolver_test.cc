#include "common/policy/resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rxfleet::common {
namespace {

AdapterAttributes Adapter(const std::string& host, UsbSpeed speed,
                          std::map<std::string, std::string> labels = {}) {
  AdapterAttributes a;
  a.adapter_id = host + "/1-1";
  a.chip = "rtl8922au";
  a.vid = 0x0bda;
  a.pid = 0x8912;
  a.usb_speed = speed;
  a.host_labels = std::move(labels);
  a.host = host;
  return a;
}

Policy MakePolicy(const std::string& name, int priority, RxAggSettings settings,
                  Selector selector = {}) {
  Policy p;
  p.name = name;
  p.priority = priority;
  p.settings = settings;
  p.selector = std::move(selector);
  EXPECT_TRUE(ValidatePolicy(p).ok()) << ValidatePolicy(p);
  return p;
}

RxAggSettings Hold(uint32_t hold_us) {
  RxAggSettings s;
  s.hold_us = hold_us;
  return s;
}

const Provenance kBuiltin{PolicySource::kBuiltinDefault, "builtin-default"};

TEST(BuiltinDefaultTest, SpeedAware) {
  EXPECT_EQ(BuiltinDefaultPolicy(UsbSpeed::kSuper).settings.hold_us, 32u);
  EXPECT_EQ(BuiltinDefaultPolicy(UsbSpeed::kSuperPlus).settings.hold_us, 32u);
  EXPECT_EQ(BuiltinDefaultPolicy(UsbSpeed::kHigh).settings.hold_us, 1024u);
  EXPECT_EQ(BuiltinDefaultPolicy(UsbSpeed::kFull).settings.hold_us, 1024u);
  EXPECT_EQ(BuiltinDefaultPolicy(UsbSpeed::kLow).settings.hold_us, 1024u);
  EXPECT_EQ(BuiltinDefaultPolicy(UsbSpeed::kUnknown).settings.hold_us, 1024u);
  const Policy p = BuiltinDefaultPolicy(UsbSpeed::kSuper);
  EXPECT_EQ(p.name, "builtin-default");
  EXPECT_FALSE(p.settings.count_threshold || p.settings.buffer_kib || p.settings.enable);
}

TEST(ResolveTest, DefaultOnlyIsSpeedAware) {
  const ResolvedSettings usb3 = Resolve(Adapter("h1", UsbSpeed::kSuper), {});
  ASSERT_TRUE(usb3.hold_us.has_value());
  EXPECT_EQ(usb3.hold_us->value, 32u);
  EXPECT_EQ(usb3.hold_us->provenance, kBuiltin);
  EXPECT_FALSE(usb3.count_threshold || usb3.buffer_kib || usb3.enable);
  EXPECT_EQ(usb3.ToSettings(), Hold(32));

  const ResolvedSettings usb2 = Resolve(Adapter("h1", UsbSpeed::kHigh), {});
  EXPECT_EQ(usb2.hold_us->value, 1024u);
  EXPECT_EQ(Resolve(Adapter("h1", UsbSpeed::kSuperPlus), {}).hold_us->value, 32u);
}

TEST(ResolveTest, HostLabelPolicyOverridesForThatHostOnly) {
  Selector pi;
  pi.match_labels = {{"board", "pi1"}};
  const std::vector<Policy> local = {MakePolicy("pi1-long-hold", 0, Hold(1024), pi)};
  const PolicyLayer layers[] = {{PolicySource::kLocalFile, &local}};

  const ResolvedSettings on_pi =
      Resolve(Adapter("pi", UsbSpeed::kSuper, {{"board", "pi1"}}), layers);
  EXPECT_EQ(on_pi.hold_us->value, 1024u);
  EXPECT_EQ(on_pi.hold_us->provenance, (Provenance{PolicySource::kLocalFile, "pi1-long-hold"}));
  EXPECT_EQ(on_pi.hold_us->provenance.ToString(), "local policy pi1-long-hold");

  const ResolvedSettings elsewhere =
      Resolve(Adapter("x86", UsbSpeed::kSuper, {{"board", "nuc"}}), layers);
  EXPECT_EQ(elsewhere.hold_us->value, 32u);
  EXPECT_EQ(elsewhere.hold_us->provenance, kBuiltin);
}

TEST(ResolveTest, BuiltinDefaultIsBelowEvenNegativePriorities) {
  const std::vector<Policy> local = {MakePolicy("low", -1000, Hold(64))};
  const PolicyLayer layers[] = {{PolicySource::kLocalFile, &local}};
  EXPECT_EQ(Resolve(Adapter("h", UsbSpeed::kSuper), layers).hold_us->value, 64u);
}

TEST(ResolveTest, PriorityBeatsSource) {
  const std::vector<Policy> local = {MakePolicy("local-high", 200, Hold(96))};
  const std::vector<Policy> server = {MakePolicy("server-low", 100, Hold(128))};
  const std::vector<Policy> experiment = {MakePolicy("exp-low", 50, Hold(160))};
  const PolicyLayer layers[] = {{PolicySource::kExperiment, &experiment},
                                {PolicySource::kServerPolicy, &server},
                                {PolicySource::kLocalFile, &local}};
  const ResolvedSettings r = Resolve(Adapter("h", UsbSpeed::kHigh), layers);
  EXPECT_EQ(r.hold_us->value, 96u);
  EXPECT_EQ(r.hold_us->provenance, (Provenance{PolicySource::kLocalFile, "local-high"}));
}

TEST(ResolveTest, TiesGoToSourceThenName) {
  const std::vector<Policy> local = {MakePolicy("a-local", 5, Hold(96))};
  const std::vector<Policy> server = {MakePolicy("b-server", 5, Hold(128)),
                                      MakePolicy("a-server", 5, Hold(192))};
  const PolicyLayer layers[] = {{PolicySource::kLocalFile, &local},
                                {PolicySource::kServerPolicy, &server}};
  const ResolvedSettings r = Resolve(Adapter("h", UsbSpeed::kHigh), layers);
  EXPECT_EQ(r.hold_us->value, 192u);
  EXPECT_EQ(r.hold_us->provenance, (Provenance{PolicySource::kServerPolicy, "a-server"}));

  Policy arm = MakePolicy("hold-ab-short", 5, Hold(32));
  arm.labels = {{"rxfleet.io/experiment", "hold-ab"}, {"rxfleet.io/arm", "short"}};
  const std::vector<Policy> experiment = {arm};
  const PolicyLayer with_experiment[] = {{PolicySource::kLocalFile, &local},
                                         {PolicySource::kServerPolicy, &server},
                                         {PolicySource::kExperiment, &experiment}};
  const ResolvedSettings e = Resolve(Adapter("h", UsbSpeed::kHigh), with_experiment);
  EXPECT_EQ(e.hold_us->value, 32u);
  EXPECT_EQ(e.hold_us->provenance,
            (Provenance{PolicySource::kExperiment, "experiment hold-ab arm short"}));
  EXPECT_EQ(e.hold_us->provenance.ToString(), "experiment hold-ab arm short");
}

TEST(ResolveTest, PerFieldProvenance) {
  RxAggSettings count;
  count.count_threshold = 64;
  RxAggSettings hold_and_buffer = Hold(256);
  hold_and_buffer.buffer_kib = 16;
  RxAggSettings enable;
  enable.enable = true;
  enable.force_enable = true;
  const std::vector<Policy> local = {MakePolicy("count-64", 0, count)};
  const std::vector<Policy> server = {MakePolicy("hold-256", 10, hold_and_buffer),
                                      MakePolicy("turn-on", 0, enable)};
  const PolicyLayer layers[] = {{PolicySource::kLocalFile, &local},
                                {PolicySource::kServerPolicy, &server}};
  const ResolvedSettings r = Resolve(Adapter("h", UsbSpeed::kSuper), layers);
  EXPECT_EQ(r.hold_us->value, 256u);
  EXPECT_EQ(r.hold_us->provenance.name, "hold-256");
  EXPECT_EQ(r.buffer_kib->value, 16u);
  EXPECT_EQ(r.buffer_kib->provenance.name, "hold-256");
  EXPECT_EQ(r.count_threshold->value, 64u);
  EXPECT_EQ(r.count_threshold->provenance, (Provenance{PolicySource::kLocalFile, "count-64"}));
  EXPECT_EQ(r.enable->value, true);
  EXPECT_EQ(r.enable->provenance.ToString(), "server policy turn-on");
  EXPECT_TRUE(r.force_enable);

  RxAggSettings expected = hold_and_buffer;
  expected.count_threshold = 64;
  expected.enable = true;
  expected.force_enable = true;
  EXPECT_EQ(r.ToSettings(), expected);
}

TEST(ResolveTest, NonMatchingAndNullLayersAreIgnored) {
  Selector usb2;
  usb2.usb_speeds = {UsbSpeed::kHigh};
  const std::vector<Policy> local = {MakePolicy("usb2-only", 100, Hold(512), usb2)};
  const PolicyLayer layers[] = {{PolicySource::kLocalFile, &local},
                                {PolicySource::kServerPolicy, nullptr}};
  EXPECT_EQ(Resolve(Adapter("h", UsbSpeed::kSuper), layers).hold_us->value, 32u);
  EXPECT_EQ(Resolve(Adapter("h", UsbSpeed::kHigh), layers).hold_us->value, 512u);
}

TEST(ProvenanceTest, Names) {
  EXPECT_EQ(kBuiltin.ToString(), "builtin-default");
  EXPECT_EQ((Provenance{PolicySource::kServerPolicy, "p"}).ToString(), "server policy p");
  EXPECT_EQ(PolicySourceName(PolicySource::kBuiltinDefault), "builtin-default");
  EXPECT_EQ(PolicySourceName(PolicySource::kLocalFile), "local-file");
  EXPECT_EQ(PolicySourceName(PolicySource::kServerPolicy), "server");
  EXPECT_EQ(PolicySourceName(PolicySource::kExperiment), "experiment");
}

}  // namespace
}  // namespace rxfleet::common
