// The readers the telemetry tests rely on: the exposition parser, the operator query list of
// docs/METRICS.md, URL encoding.

#include "tests/agent/telemetry/telemetry_support.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace rxfleet::agent::telemetry {
namespace {

using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::SourcePath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(ParseExpositionTest, ReadsNamesLabelsAndValues) {
  absl::StatusOr<std::vector<Sample>> samples = ParseExposition(
      "# HELP rxfleet_adapter_info Identity\n"
      "# TYPE rxfleet_adapter_info gauge\n"
      "rxfleet_adapter_info{adapter=\"port-2-2\",chip=\"RTL8922AU\",netdev=\"\"} 1\n"
      "rxfleet_adapter_hold_observed_seconds{adapter=\"port-2-2\"} 3.2e-05\n"
      "odd{v=\"a\\\"b\\\\c\\nd\"} 2 1700000000000\n"
      "exposer_request_latencies{quantile=\"0.5\"} Nan\n"
      "process_cpu_seconds_total 0.09\n");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 5u);
  EXPECT_EQ((*samples)[0].name, "rxfleet_adapter_info");
  EXPECT_THAT((*samples)[0].labels, ElementsAre(Pair("adapter", "port-2-2"),
                                                Pair("chip", "RTL8922AU"), Pair("netdev", "")));
  EXPECT_DOUBLE_EQ((*samples)[1].value, 3.2e-05);
  EXPECT_EQ((*samples)[2].labels.at("v"), "a\"b\\c\nd");
  EXPECT_EQ((*samples)[2].value, 2);
  EXPECT_TRUE(std::isnan((*samples)[3].value));
  EXPECT_TRUE((*samples)[4].labels.empty());

  EXPECT_EQ(FindValue(*samples, "rxfleet_adapter_hold_observed_seconds", {{"adapter", "port-2-2"}}),
            3.2e-05);
  EXPECT_EQ(FindValue(*samples, "rxfleet_adapter_info", {{"adapter", "port-2-3"}}), std::nullopt);
  EXPECT_EQ(FindLabels(*samples, "rxfleet_adapter_info", {{"chip", "RTL8922AU"}})->at("adapter"),
            "port-2-2");
}

TEST(ParseExpositionTest, RejectsBrokenLines) {
  EXPECT_FALSE(ParseExposition("x{a=\"1\" 2\n").ok());
  EXPECT_FALSE(ParseExposition("x{a=1} 2\n").ok());
  EXPECT_FALSE(ParseExposition("x 2 3 4\n").ok());
  EXPECT_FALSE(ParseExposition("x two\n").ok());
  EXPECT_THAT(ParseExposition("ok 1\n{a=\"1\"} 2\n").status().message(), HasSubstr("line 2"));
}

TEST(ParseOperatorQueriesTest, ReadsBlocksDescriptionsAndNeedsMarkers) {
  absl::StatusOr<std::vector<DocQuery>> queries = ParseOperatorQueries(
      "## Other\n\n```promql\nnot_this\n```\n\n"
      "## PromQL for operators\n\nIntro.\n\nRate:\n\n```promql\nrate(a[1m])\n```\n\n"
      "Joined [needs: a server experiment]:\n\n```promql\nsum by (arm) (\n  b\n)\n```\n\n"
      "## Next\n\n```promql\nnor_this\n```\n");
  ASSERT_TRUE(queries.ok()) << queries.status();
  ASSERT_EQ(queries->size(), 2u);
  EXPECT_EQ((*queries)[0].promql, "rate(a[1m])");
  EXPECT_EQ((*queries)[0].description, "Rate:");
  EXPECT_EQ((*queries)[0].needs, "");
  EXPECT_EQ((*queries)[1].promql, "sum by (arm) ( b )");
  EXPECT_EQ((*queries)[1].needs, "a server experiment");
}

TEST(ParseOperatorQueriesTest, RejectsAMissingSectionOrAnOpenBlock) {
  EXPECT_FALSE(ParseOperatorQueries("## Other\n").ok());
  EXPECT_FALSE(ParseOperatorQueries("## PromQL for operators\n\nNothing.\n").ok());
  EXPECT_FALSE(ParseOperatorQueries("## PromQL for operators\n\n```promql\nup\n").ok());
}

// The real document: every query is found, and markers are rare exceptions.
TEST(ParseOperatorQueriesTest, MetricsDocListsTheQueries) {
  absl::StatusOr<std::string> doc = ReadTextFile(SourcePath("docs/METRICS.md"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  absl::StatusOr<std::vector<DocQuery>> queries = ParseOperatorQueries(*doc);
  ASSERT_TRUE(queries.ok()) << queries.status();
  EXPECT_GE(queries->size(), 10u);
  int marked = 0;
  for (const DocQuery& q : *queries) {
    EXPECT_FALSE(q.description.empty()) << q.promql;
    marked += q.needs.empty() ? 0 : 1;
  }
  EXPECT_LT(marked * 2, static_cast<int>(queries->size()));
}

TEST(UrlEncodeTest, EscapesAllButUnreserved) {
  EXPECT_EQ(UrlEncode("rate(x{a=\"b\"}[5m]) * 8"),
            "rate%28x%7Ba%3D%22b%22%7D%5B5m%5D%29%20%2A%208");
  EXPECT_EQ(UrlEncode("A-z_0.9~"), "A-z_0.9~");
}

}  // namespace
}  // namespace rxfleet::agent::telemetry
