#include "agent/reconcile/policy_set.h"

#include "common/policy/policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::HasSubstr;

common::AdapterAttributes Adapter(std::string id, common::UsbSpeed speed,
                                  std::string chip = "rtl8922au") {
  common::AdapterAttributes a;
  a.adapter_id = std::move(id);
  a.chip = std::move(chip);
  a.vid = 0x0bda;
  a.pid = 0x8912;
  a.usb_speed = speed;
  return a;
}

common::Policy ServerPolicy(std::string name, uint32_t hold_us, int priority = 0) {
  common::Policy p;
  p.name = std::move(name);
  p.priority = priority;
  p.settings.hold_us = hold_us;
  p.source = "server";
  return p;
}

ExperimentAssignment Arm(std::string adapter, uint32_t hold_us, int priority = 0) {
  ExperimentAssignment a;
  a.adapter_id = std::move(adapter);
  a.experiment = "hold-ab";
  a.arm = "short";
  a.settings.hold_us = hold_us;
  a.priority = priority;
  return a;
}

TEST(PolicySetTest, BuiltinDefaultIsSpeedAware) {
  PolicySet set;
  const absl::Time now = absl::Now();
  EXPECT_EQ(set.Resolve(Adapter("a", common::UsbSpeed::kSuper), now).resolved.hold_us->value, 32u);
  EXPECT_EQ(set.Resolve(Adapter("a", common::UsbSpeed::kSuperPlus), now).resolved.hold_us->value,
            32u);
  EXPECT_EQ(set.Resolve(Adapter("a", common::UsbSpeed::kHigh), now).resolved.hold_us->value, 1024u);
  EXPECT_EQ(set.Resolve(Adapter("a", common::UsbSpeed::kUnknown), now).resolved.hold_us->value,
            1024u);
}

TEST(PolicySetTest, ExperimentBeatsServerBeatsLocalAtEqualPriority) {
  common::Policy local = ServerPolicy("local-one", 64);
  local.source = "local.yaml:1";
  ServerBundle bundle;
  bundle.version = 7;
  bundle.policies = {ServerPolicy("server-one", 96)};
  PolicySet no_experiment({local}, bundle);
  const absl::Time now = absl::Now();
  DesiredSettings d = no_experiment.Resolve(Adapter("port-2-2", common::UsbSpeed::kSuper), now);
  EXPECT_EQ(d.resolved.hold_us->value, 96u);
  EXPECT_EQ(d.origins.at("hold_us").bundle_version, 7u);
  EXPECT_EQ(d.bundle_version, 7u);

  bundle.assignments = {Arm("port-2-2", 128)};
  PolicySet with_experiment({local}, bundle);
  d = with_experiment.Resolve(Adapter("port-2-2", common::UsbSpeed::kSuper), now);
  EXPECT_EQ(d.resolved.hold_us->value, 128u);
  EXPECT_EQ(d.resolved.hold_us->provenance.ToString(), "experiment hold-ab arm short");
  EXPECT_EQ(d.origins.at("hold_us").experiment, "hold-ab");
  EXPECT_EQ(d.origins.at("hold_us").arm, "short");
  EXPECT_EQ(d.experiments.at("hold-ab"), "short");
  // Another adapter is not in the experiment.
  d = with_experiment.Resolve(Adapter("port-2-3", common::UsbSpeed::kSuper), now);
  EXPECT_EQ(d.resolved.hold_us->value, 96u);
  EXPECT_TRUE(d.experiments.empty());

  // Priority beats the layer order.
  local.priority = 10;
  PolicySet priority({local}, bundle);
  d = priority.Resolve(Adapter("port-2-2", common::UsbSpeed::kSuper), now);
  EXPECT_EQ(d.resolved.hold_us->value, 64u);
  EXPECT_EQ(d.origins.at("hold_us").priority, 10);
  EXPECT_EQ(d.origins.at("hold_us").location, "local.yaml:1");
}

TEST(PolicySetTest, ExpiredAssignmentsStopApplying) {
  ServerBundle bundle;
  bundle.version = 1;
  const absl::Time now = absl::FromUnixSeconds(1000);
  ExperimentAssignment a = Arm("port-2-2", 128);
  a.period_end = now + absl::Minutes(1);
  bundle.assignments = {a};
  PolicySet set({}, bundle);
  EXPECT_EQ(set.Resolve(Adapter("port-2-2", common::UsbSpeed::kSuper), now).resolved.hold_us->value,
            128u);
  EXPECT_EQ(set.NextExpiry(now), now + absl::Minutes(1));
  const absl::Time later = now + absl::Minutes(2);
  EXPECT_EQ(
      set.Resolve(Adapter("port-2-2", common::UsbSpeed::kSuper), later).resolved.hold_us->value,
      32u);
  EXPECT_FALSE(set.NextExpiry(later).has_value());
}

TEST(ValidateServerBundleTest, AcceptsAGoodBundle) {
  ServerBundle bundle;
  bundle.version = 2;
  bundle.policies = {ServerPolicy("a", 32), ServerPolicy("b", 1024)};
  bundle.assignments = {Arm("port-2-2", 64)};
  EXPECT_TRUE(ValidateServerBundle(bundle, {}).ok());
}

TEST(ValidateServerBundleTest, RejectsEachProblemWithAClearMessage) {
  ServerBundle bundle;
  bundle.version = 0;
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("version"));

  bundle.version = 1;
  bundle.policies = {ServerPolicy("a", 33)};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("32"));

  bundle.policies = {ServerPolicy("a", 32), ServerPolicy("a", 64)};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("duplicate"));

  bundle.policies.clear();
  ExperimentAssignment a = Arm("port-1-1.3", 32);
  a.settings.buffer_kib = 6;
  bundle.assignments = {a};
  EXPECT_TRUE(ValidateServerBundle(bundle, {}).ok());  // adapter unknown: layout not checked
  const absl::Status s = ValidateServerBundle(bundle, {{"port-1-1.3", common::RxAggLayout::kV1}});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("experiment hold-ab, adapter port-1-1.3"));
  EXPECT_THAT(s.message(), HasSubstr("v1"));

  bundle.assignments = {Arm("port-2-2", 32), Arm("port-2-2", 64)};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("twice"));

  ExperimentAssignment empty = Arm("port-2-2", 32);
  empty.settings = {};
  bundle.assignments = {empty};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("no field"));

  ExperimentAssignment bad_name = Arm("port-2-2", 32);
  bad_name.experiment = "Hold_AB";
  bundle.assignments = {bad_name};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("experiment name"));

  ExperimentAssignment no_adapter = Arm("", 32);
  bundle.assignments = {no_adapter};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("adapter id"));

  ExperimentAssignment negative_window = Arm("port-2-2", 32);
  negative_window.window_length = absl::Seconds(-1);
  bundle.assignments = {negative_window};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("window_length"));

  ExperimentAssignment negative_burn_in = Arm("port-2-2", 32);
  negative_burn_in.burn_in = absl::Seconds(-1);
  bundle.assignments = {negative_burn_in};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("burn_in"));

  ExperimentAssignment inverted = Arm("port-2-2", 32);
  inverted.period_start = absl::FromUnixSeconds(2000);
  inverted.period_end = absl::FromUnixSeconds(1000);
  bundle.assignments = {inverted};
  EXPECT_THAT(ValidateServerBundle(bundle, {}).message(), HasSubstr("period_start_time"));
}

}  // namespace
}  // namespace rxfleet::agent
