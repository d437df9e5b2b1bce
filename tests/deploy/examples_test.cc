// The example documents in deploy/examples/ parse and validate with the project's own strict
// parsers (the ones rxfleetctl and the agent use), and say what scripts/demo relies on.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/policy/policy.h"
#include "gtest/gtest.h"
#include "tests/common/fixture_path.h"

namespace rxfleet {
namespace {

using ::rxfleet::common::testing::ReadFile;
using ::rxfleet::common::testing::SourceDir;

std::string Example(const std::string& name) { return SourceDir() + "/deploy/examples/" + name; }

TEST(DeployExamples, EveryExampleParses) {
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SourceDir() + "/deploy/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string text = ReadFile(entry.path().string());
    ASSERT_FALSE(text.empty()) << entry.path();
    const std::string name = entry.path().filename().string();
    if (text.find("\nkind: Experiment") != std::string::npos) {
      absl::StatusOr<std::vector<experiments::Experiment>> docs =
          experiments::ParseExperimentDocuments(text, name);
      ASSERT_TRUE(docs.ok()) << docs.status();
      EXPECT_FALSE(docs->empty()) << name;
    } else {
      absl::StatusOr<std::vector<common::Policy>> docs = common::ParsePolicyDocuments(text, name);
      ASSERT_TRUE(docs.ok()) << docs.status();
      EXPECT_FALSE(docs->empty()) << name;
    }
    ++parsed;
  }
  EXPECT_GE(parsed, 2);
}

// scripts/demo runs a 32 s switchback (8 s periods, 1 s windows after a 2 s burn-in) on every
// RTL8922AU, segmented by USB speed and board, with the drop guardrail that stops the Pi 1's
// short arm.
TEST(DeployExamples, DemoExperimentIsAShortSwitchbackPerUsbSpeedAndBoard) {
  absl::StatusOr<experiments::Experiment> e =
      experiments::ParseExperiment(ReadFile(Example("demo-experiment.yaml")), "demo-experiment");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->name, "demo-hold");
  EXPECT_EQ(e->design, experiments::Design::kSwitchback);
  ASSERT_EQ(e->arms.size(), 2u);
  EXPECT_EQ(e->duration, absl::Seconds(32));
  EXPECT_EQ(e->window_length, absl::Seconds(1));
  EXPECT_EQ(e->period_length, absl::Seconds(8));
  EXPECT_EQ(e->burn_in, absl::Seconds(2));
  EXPECT_EQ(e->selector.chips, std::vector<std::string>{"rtl8922au"});
  EXPECT_EQ(e->segment_keys, (std::vector<std::string>{"usb_speed", "board"}));
  ASSERT_EQ(e->guardrails.size(), 1u);
  EXPECT_EQ(e->min_adapters_per_arm, 2u);
}

// The demo's policy selects RTL8852BU adapters at SuperSpeed only and sets a 64 µs hold (the
// smoke run asserts exactly that change); it selects no adapter the experiment selects, so no
// policy keeps an adapter from the experiment.
TEST(DeployExamples, DemoPolicySelectsRtl8852buAtSuperSpeedAndNoExperimentAdapter) {
  absl::StatusOr<std::vector<common::Policy>> p = common::ParsePolicyDocuments(
      ReadFile(Example("rtl8852bu-usb3-hold.yaml")), "rtl8852bu-usb3-hold");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 1u);
  ASSERT_TRUE((*p)[0].settings.hold_us.has_value());
  EXPECT_EQ(*(*p)[0].settings.hold_us, 64u);
  EXPECT_EQ((*p)[0].selector.chips, std::vector<std::string>{"rtl8852bu"});
  absl::StatusOr<experiments::Experiment> e =
      experiments::ParseExperiment(ReadFile(Example("demo-experiment.yaml")), "demo-experiment");
  ASSERT_TRUE(e.ok()) << e.status();
  for (const std::string& chip : (*p)[0].selector.chips) {
    EXPECT_EQ(std::count(e->selector.chips.begin(), e->selector.chips.end(), chip), 0) << chip;
  }
}

}  // namespace
}  // namespace rxfleet
