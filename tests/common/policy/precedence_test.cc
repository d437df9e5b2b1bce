#include "common/policy/precedence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rxfleet::common {
namespace {

using ::testing::IsEmpty;

AdapterAttributes Adapter(UsbSpeed speed = UsbSpeed::kSuper) {
  AdapterAttributes a;
  a.adapter_id = "port-2-2";
  a.chip = "rtl8922au";
  a.vid = 0x0bda;
  a.pid = 0x8912;
  a.usb_speed = speed;
  a.host = "x86-1";
  return a;
}

Policy MakePolicy(const std::string& name, int priority, uint32_t hold_us,
                  std::string source = "server") {
  Policy p;
  p.name = name;
  p.priority = priority;
  p.settings.hold_us = hold_us;
  p.source = std::move(source);
  return p;
}

ArmInEffect Arm(const std::string& arm, uint32_t hold_us, int priority = 0) {
  ArmInEffect a;
  a.experiment = "hold-ab";
  a.arm = arm;
  a.priority = priority;
  a.settings.hold_us = hold_us;
  return a;
}

TEST(PrecedenceTest, ExperimentWinsTiesAndOriginsCarryWhatDecided) {
  const std::vector<Policy> local = {MakePolicy("local-long", 0, 1024, "local.yaml:1")};
  const std::vector<Policy> server = {MakePolicy("server-long", 0, 512)};
  PolicyLayers layers;
  layers.local = &local;
  layers.server = &server;
  layers.bundle_version = 9;

  // Without the experiment, the server policy beats the local file at equal priority.
  LayeredSettings s = ResolveLayers(Adapter(), layers);
  EXPECT_EQ(s.Settings().hold_us, 512u);
  EXPECT_EQ(s.origins.at("hold_us").provenance.source, PolicySource::kServerPolicy);
  EXPECT_EQ(s.origins.at("hold_us").bundle_version, 9u);

  // With it, the experiment wins the tie.
  layers.experiments = {Arm("short", 32)};
  s = ResolveLayers(Adapter(), layers);
  EXPECT_EQ(s.Settings().hold_us, 32u);
  const SettingOrigin& origin = s.origins.at("hold_us");
  EXPECT_EQ(origin.provenance.ToString(), "experiment hold-ab arm short");
  EXPECT_EQ(origin.experiment, "hold-ab");
  EXPECT_EQ(origin.arm, "short");
  EXPECT_EQ(origin.bundle_version, 9u);

  // A local policy of higher priority outranks both, with its file location.
  const std::vector<Policy> local_high = {MakePolicy("local-pin", 10, 256, "local.yaml:3")};
  layers.local = &local_high;
  s = ResolveLayers(Adapter(), layers);
  EXPECT_EQ(s.Settings().hold_us, 256u);
  EXPECT_EQ(s.origins.at("hold_us").priority, 10);
  EXPECT_EQ(s.origins.at("hold_us").location, "local.yaml:3");
  EXPECT_EQ(s.origins.at("hold_us").bundle_version, 0u);
}

TEST(PrecedenceTest, ArmPolicySelectsOnlyItsAdapter) {
  PolicyLayers layers;
  layers.experiments = {Arm("short", 64)};
  AdapterAttributes other = Adapter(UsbSpeed::kHigh);
  EXPECT_EQ(ResolveLayers(Adapter(), layers).Settings().hold_us, 64u);
  const Policy p = ArmPolicy(layers.experiments[0], "port-9-9");
  EXPECT_FALSE(Matches(p.selector, other));
  EXPECT_EQ(p.priority, 0);
}

TEST(PrecedenceTest, FieldsKeptFromExperimentNameHigherPriorityPolicies) {
  const std::vector<Policy> equal = {MakePolicy("long", 0, 512)};
  const std::vector<Policy> higher = {MakePolicy("pin", 100, 512)};
  const std::vector<ArmInEffect> arms = {Arm("control", 1024), Arm("short", 32)};
  PolicyLayers layers;
  layers.server = &equal;
  EXPECT_THAT(FieldsKeptFromExperiment(Adapter(), layers, arms), IsEmpty());

  layers.server = &higher;
  const std::vector<KeptField> kept = FieldsKeptFromExperiment(Adapter(), layers, arms);
  ASSERT_EQ(kept.size(), 2u);  // one per arm
  EXPECT_EQ(kept[0].arm, "control");
  EXPECT_EQ(kept[0].field, "hold_us");
  EXPECT_EQ(kept[0].decided.provenance.name, "pin");
  EXPECT_EQ(DescribeKeptFields(kept), "server policy pin (priority 100) decides hold_us");

  // The experiment's own priority can outrank the policy again.
  const std::vector<ArmInEffect> strong = {Arm("control", 1024, 200), Arm("short", 32, 200)};
  EXPECT_THAT(FieldsKeptFromExperiment(Adapter(), layers, strong), IsEmpty());
  // The built-in default never keeps anything.
  layers.server = nullptr;
  EXPECT_THAT(FieldsKeptFromExperiment(Adapter(), layers, {Arm("a", 64, -1000)}), IsEmpty());
}

}  // namespace
}  // namespace rxfleet::common
