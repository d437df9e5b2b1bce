// The example documents in deploy/examples/ parse and validate with the project's own strict
// parsers (the ones rxfleetctl and the agent use), and say what scripts/demo relies on.

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

// scripts/demo waits for two 10 s switchback periods with 2 s windows after a 2 s burn-in.
TEST(DeployExamples, DemoExperimentIsAShortSwitchback) {
  absl::StatusOr<experiments::Experiment> e =
      experiments::ParseExperiment(ReadFile(Example("demo-experiment.yaml")), "demo-experiment");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->name, "demo-hold");
  EXPECT_EQ(e->design, experiments::Design::kSwitchback);
  ASSERT_EQ(e->arms.size(), 2u);
  EXPECT_EQ(e->window_length, absl::Seconds(2));
  EXPECT_EQ(e->period_length, absl::Seconds(10));
  EXPECT_EQ(e->burn_in, absl::Seconds(2));
  EXPECT_EQ(e->guardrails.size(), 1u);
}

// The demo's policy selects RTL8922AU adapters at SuperSpeed only and sets a 64 µs hold; the
// smoke run asserts exactly that change.
TEST(DeployExamples, DemoPolicySelectsRtl8922auAtSuperSpeed) {
  absl::StatusOr<std::vector<common::Policy>> p = common::ParsePolicyDocuments(
      ReadFile(Example("rtl8922au-usb3-hold.yaml")), "rtl8922au-usb3-hold");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 1u);
  ASSERT_TRUE((*p)[0].settings.hold_us.has_value());
  EXPECT_EQ(*(*p)[0].settings.hold_us, 64u);
  EXPECT_EQ((*p)[0].selector.chips, std::vector<std::string>{"rtl8922au"});
}

}  // namespace
}  // namespace rxfleet
