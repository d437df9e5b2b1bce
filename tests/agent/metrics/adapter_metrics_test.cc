#include "agent/metrics/adapter_metrics.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/metrics/metrics_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/collectors/metric_values.h"
#include "tests/agent/metrics/populated_registry.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::agent::testing::Exposition;
using ::rxfleet::agent::testing::PopulatedRegistry;
using ::rxfleet::agent::testing::SeriesCount;
using ::rxfleet::agent::testing::SeriesValue;
using ::testing::HasSubstr;
using ::testing::Not;

AdapterLabels Labels(const std::string& id, const std::string& speed = "super") {
  return {id,      "RTL8922AU", "0bda",  "8912", speed, "2-2", "wlan0", "rtw89_8922au",
          "rtw89", "true",      "table", "2",    "",    "true"};
}

class AdapterMetricsTest : public ::testing::Test {
 protected:
  double Value(const std::string& name, std::map<std::string, std::string> labels) {
    return SeriesValue(registry_, name, labels).value_or(-1);
  }
  prometheus::Registry registry_;
  AdapterMetrics metrics_{registry_};
};

TEST_F(AdapterMetricsTest, InfoSeriesFollowsLabelChanges) {
  metrics_.SetAdapter(Labels("port-2-2", "high"));
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_info"), 1u);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_info", {{"usb_speed", "high"}}), 1u);
  metrics_.SetAdapter(Labels("port-2-2", "super"));  // re-enumerated at SuperSpeed
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_info"), 1u);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_info", {{"usb_speed", "super"}}), 1u);
  metrics_.SetAdapter(Labels(""));  // ignored
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_info"), 1u);
}

TEST_F(AdapterMetricsTest, StateIsOneSeriesPerStateWithOneCurrent) {
  metrics_.SetAdapter(Labels("port-2-2"));
  EXPECT_EQ(metrics_.State("port-2-2"), AdapterState::kPending);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_state", {{"adapter", "port-2-2"}}), 10u);
  metrics_.SetState("port-2-2", AdapterState::kApplied);
  EXPECT_EQ(Value("rxfleet_adapter_state", {{"adapter", "port-2-2"}, {"state", "applied"}}), 1);
  EXPECT_EQ(Value("rxfleet_adapter_state", {{"adapter", "port-2-2"}, {"state", "pending"}}), 0);
  metrics_.SetState("port-2-2", std::string_view("disabled_by_driver"));
  EXPECT_EQ(metrics_.State("port-2-2"), AdapterState::kDisabledByDriver);
  metrics_.SetState("port-2-2", std::string_view("exploded"));  // unknown: recorded as error
  EXPECT_EQ(metrics_.State("port-2-2"), AdapterState::kError);
  double sum = 0;
  for (AdapterState s : kAllAdapterStates) {
    sum += Value("rxfleet_adapter_state",
                 {{"adapter", "port-2-2"}, {"state", std::string(AdapterStateName(s))}});
  }
  EXPECT_EQ(sum, 1);
  metrics_.SetState("unknown-adapter", AdapterState::kGone);  // ignored
  EXPECT_FALSE(metrics_.State("unknown-adapter").has_value());
}

TEST_F(AdapterMetricsTest, StateNamesRoundTrip) {
  std::set<std::string_view> names;
  for (AdapterState s : kAllAdapterStates) {
    names.insert(AdapterStateName(s));
    EXPECT_EQ(ParseAdapterState(AdapterStateName(s)), s);
  }
  EXPECT_EQ(names.size(), 10u);
  EXPECT_FALSE(ParseAdapterState("Applied").has_value());
}

TEST_F(AdapterMetricsTest, HoldsCountersAndBoundedFailureReasons) {
  metrics_.SetAdapter(Labels("port-2-2"));
  metrics_.SetDesiredHold("port-2-2", 1024e-6);
  metrics_.SetObservedHold("port-2-2", 32e-6);
  EXPECT_DOUBLE_EQ(Value("rxfleet_adapter_hold_desired_seconds", {{"adapter", "port-2-2"}}),
                   0.001024);
  EXPECT_DOUBLE_EQ(Value("rxfleet_adapter_hold_observed_seconds", {{"adapter", "port-2-2"}}),
                   0.000032);
  metrics_.SetObservedHold("port-2-2", std::nullopt);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_hold_observed_seconds"), 0u);

  metrics_.CountApply("port-2-2");
  metrics_.CountVerify("port-2-2");
  metrics_.CountVerify("port-2-2");
  metrics_.CountDriftRepair("port-2-2");
  EXPECT_EQ(Value("rxfleet_adapter_applies_total", {{"adapter", "port-2-2"}}), 1);
  EXPECT_EQ(Value("rxfleet_adapter_verifies_total", {{"adapter", "port-2-2"}}), 2);
  EXPECT_EQ(Value("rxfleet_adapter_drift_repairs_total", {{"adapter", "port-2-2"}}), 1);

  metrics_.CountFailure("port-2-2", "timeout");
  metrics_.CountFailure("port-2-2", FailureReasonFromStatus(absl::DeadlineExceededError("x")));
  metrics_.CountFailure("port-2-2", "some free-form text");
  metrics_.CountFailure("port-2-2", "another one");
  EXPECT_EQ(
      Value("rxfleet_adapter_failures_total", {{"adapter", "port-2-2"}, {"reason", "timeout"}}), 2);
  EXPECT_EQ(Value("rxfleet_adapter_failures_total", {{"adapter", "port-2-2"}, {"reason", "other"}}),
            2);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_failures_total"), 2u);
}

TEST_F(AdapterMetricsTest, IoErrorBurstsAndReenumerationLoopsAreCounted) {
  metrics_.SetAdapter(Labels("port-2-2"));
  EXPECT_EQ(Value("rxfleet_adapter_reenumeration_loops_total", {{"adapter", "port-2-2"}}), 0);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_io_error_bursts_total"), 0u);
  metrics_.CountIoErrorBurst("port-2-2", "timeout");
  metrics_.CountIoErrorBurst("port-2-2", "timeout");
  metrics_.CountIoErrorBurst("port-2-2", "not a reason");
  metrics_.CountReenumerationLoop("port-2-2");
  metrics_.CountReenumerationLoop("port-9-9");  // unknown: ignored
  EXPECT_EQ(Value("rxfleet_adapter_io_error_bursts_total",
                  {{"adapter", "port-2-2"}, {"reason", "timeout"}}),
            2);
  EXPECT_EQ(Value("rxfleet_adapter_io_error_bursts_total",
                  {{"adapter", "port-2-2"}, {"reason", "other"}}),
            1);
  EXPECT_EQ(Value("rxfleet_adapter_reenumeration_loops_total", {{"adapter", "port-2-2"}}), 1);
  metrics_.RemoveAdapter("port-2-2");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_io_error_bursts_total"), 0u);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_reenumeration_loops_total"), 0u);
}

TEST(FailureReasonTest, FollowsTheDeviceLayerTranslation) {
  EXPECT_EQ(FailureReasonFromStatus(absl::PermissionDeniedError("")), "permission_denied");
  EXPECT_EQ(FailureReasonFromStatus(absl::UnavailableError("")), "no_device");
  EXPECT_EQ(FailureReasonFromStatus(absl::DeadlineExceededError("")), "timeout");
  EXPECT_EQ(FailureReasonFromStatus(absl::FailedPreconditionError("")), "stall");
  EXPECT_EQ(FailureReasonFromStatus(absl::UnimplementedError("")), "unsupported");
  EXPECT_EQ(FailureReasonFromStatus(absl::InvalidArgumentError("")), "invalid_policy");
  EXPECT_EQ(FailureReasonFromStatus(absl::InternalError("")), "io");
  EXPECT_EQ(FailureReasonFromStatus(absl::ResourceExhaustedError("")), "other");
  std::set<std::string_view> reasons(std::begin(kFailureReasons), std::end(kFailureReasons));
  EXPECT_EQ(reasons.size(), std::size(kFailureReasons));
}

TEST_F(AdapterMetricsTest, DiagnosesAreBoundedAndDeletedWhenInactive) {
  metrics_.SetAdapter(Labels("port-2-2"));
  metrics_.SetDiagnosis("port-2-2", "usb2_on_usb3_port", true);
  metrics_.SetDiagnosis("port-2-2", "usb2_on_usb3_port", true);
  metrics_.SetDiagnosis("port-2-2", "Bad Code!", true);  // invalid: dropped
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_diagnosis"), 1u);
  for (int i = 0; i < 40; ++i) metrics_.SetDiagnosis("port-2-2", "code_" + std::to_string(i), true);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_diagnosis"),
            AdapterMetrics::kMaxDiagnosesPerAdapter);
  metrics_.SetDiagnosis("port-2-2", "usb2_on_usb3_port", false);
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_diagnosis", {{"code", "usb2_on_usb3_port"}}),
            0u);
}

TEST_F(AdapterMetricsTest, ExperimentArmIsAnInfoSeriesReplacedOnChange) {
  metrics_.SetAdapter(Labels("port-2-2"));
  metrics_.SetExperimentArm("port-2-2", "hold-usb3", "short");
  metrics_.SetExperimentArm("port-2-2", "hold-usb3", "long");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_experiment_info"), 1u);
  EXPECT_EQ(Value("rxfleet_adapter_experiment_info",
                  {{"adapter", "port-2-2"}, {"experiment", "hold-usb3"}, {"arm", "long"}}),
            1);
  metrics_.SetExperimentArm("port-2-2", "hold-usb3", "");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_experiment_info"), 0u);
  metrics_.SetExperimentArm("port-2-2", "bad name", "x");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_experiment_info"), 0u);
  for (int i = 0; i < 10; ++i) metrics_.SetExperimentArm("port-2-2", "e" + std::to_string(i), "a");
  EXPECT_EQ(SeriesCount(registry_, "rxfleet_adapter_experiment_info"),
            AdapterMetrics::kMaxExperimentsPerAdapter);
}

TEST_F(AdapterMetricsTest, RemoveAdapterDeletesEverySeries) {
  metrics_.SetAdapter(Labels("port-2-2"));
  metrics_.SetAdapter(Labels("port-1-1"));
  metrics_.SetDesiredHold("port-2-2", 32e-6);
  metrics_.SetObservedHold("port-2-2", 32e-6);
  metrics_.CountFailure("port-2-2", "io");
  metrics_.SetDiagnosis("port-2-2", "x", true);
  metrics_.SetExperimentArm("port-2-2", "e", "a");
  metrics_.RemoveAdapter("port-2-2");
  metrics_.RemoveAdapter("port-9-9");
  EXPECT_THAT(Exposition(registry_), Not(HasSubstr("port-2-2")));
  EXPECT_THAT(Exposition(registry_), HasSubstr("port-1-1"));
  EXPECT_FALSE(metrics_.State("port-2-2").has_value());
}

TEST(ListenAddressTest, ParsesHostPortForms) {
  absl::StatusOr<ListenAddress> a = ParseListenAddress("127.0.0.1:9477");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9477);
  a = ParseListenAddress(":0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 0);
  a = ParseListenAddress("[::1]:9477");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_TRUE(ParseListenAddress(kDefaultMetricsAddress).ok());
  for (const char* bad :
       {"", "9477", "localhost:9477", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
        "127.0.0.1:+5", "[::1]9477", "[::1:9477", "::1:9477", "[zz]:1", "1.2.3:4"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseListenAddress(bad).status())) << bad;
  }
}

// --- exposition golden file ---
//
// tests/agent/metrics/golden/exposition.txt is the text exposition of PopulatedRegistry (every
// family the agent exports, filled from tests/fixtures). Sample lines are sorted within each
// family (series order inside a prometheus-cpp family follows a hash) and collector durations
// are replaced by <duration>. After an intended change to names, HELP texts, labels or
// fixtures, regenerate it and review the diff:
//   RXFLEET_UPDATE_GOLDEN=1 ctest --test-dir build/<preset> -R agent_metrics_unit_test
std::string NormalizedExposition(const prometheus::Registry& registry) {
  std::istringstream in(Exposition(registry));
  std::string out;
  std::vector<std::string> samples;
  auto flush = [&] {
    std::sort(samples.begin(), samples.end());
    for (const std::string& s : samples) out += s + "\n";
    samples.clear();
  };
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      flush();
      out += line + "\n";
    } else if (line.rfind("#", 0) == 0 || line.empty()) {
      out += line + "\n";
    } else {
      if (line.rfind("rxfleet_collector_duration_seconds{", 0) == 0) {
        line = line.substr(0, line.rfind(' ')) + " <duration>";
      }
      samples.push_back(line);
    }
  }
  flush();
  return out;
}

TEST(ExpositionGoldenTest, MatchesGoldenFile) {
  PopulatedRegistry populated;
  const std::string actual = NormalizedExposition(*populated.registry());
  const std::string path =
      ::rxfleet::testing::SourcePath("tests/agent/metrics/golden/exposition.txt");
  if (std::getenv("RXFLEET_UPDATE_GOLDEN") != nullptr) {
    ASSERT_TRUE(::rxfleet::testing::WriteTextFile(path, actual).ok());
    GTEST_SKIP() << "rewrote " << path;
  }
  absl::StatusOr<std::string> golden = ::rxfleet::testing::ReadTextFile(path);
  ASSERT_TRUE(golden.ok()) << golden.status()
                           << " (create it with RXFLEET_UPDATE_GOLDEN=1, see comment above)";
  EXPECT_EQ(actual, *golden) << "exposition changed; if intended, regenerate with "
                                "RXFLEET_UPDATE_GOLDEN=1 (see adapter_metrics_test.cc)";
}

TEST(ExpositionGoldenTest, EveryFamilyHasHelpAndAProjectName) {
  PopulatedRegistry populated;
  for (const prometheus::MetricFamily& family : populated.registry()->Collect()) {
    EXPECT_FALSE(family.help.empty()) << family.name;
    EXPECT_TRUE(family.name.rfind("rxfleet_", 0) == 0 || family.name.rfind("process_", 0) == 0)
        << family.name;
    if (family.type == prometheus::MetricType::Counter) {
      EXPECT_TRUE(family.name.size() > 6 &&
                  family.name.compare(family.name.size() - 6, 6, "_total") == 0)
          << family.name;
    }
  }
}

}  // namespace
}  // namespace rxfleet::agent
