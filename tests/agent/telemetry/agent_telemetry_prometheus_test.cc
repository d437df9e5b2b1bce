// A real Prometheus scraping rxfleet-agent every second, and every operator query listed in
// docs/METRICS.md ("PromQL for operators") run through its HTTP API. The query list is read from
// the document itself, so the two cannot drift apart. A query marked "[needs: WHAT]" there is
// still run (Prometheus must accept it) but may return nothing; every other query must return
// at least one finite value.
//
// The scraped fleet: agent A under rxfleet-emulate with labs/telemetry-host.yaml (an applied
// SuperSpeed adapter with traffic and RTT probes through its `lo` netdev, one left disabled by
// its driver, one applied without a netdev, one of another vendor) and a timeline of driver
// rewrites (drift repairs) and a stalled transfer (a failure); agent B on labs/other-vendor.yaml
// with an empty procfs root, so its cpu collector fails.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/telemetry/telemetry_support.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::agent::telemetry {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;

constexpr char kJob[] = "rxfleet-agent";

// The answer of /api/v1/query: Prometheus' status and the result series.
struct QueryAnswer {
  std::string status;
  std::string error;
  nlohmann::json result = nlohmann::json::array();
};

absl::StatusOr<QueryAnswer> Query(int port, const std::string& promql) {
  absl::StatusOr<HttpResponse> response =
      HttpGet(port, absl::StrCat("/api/v1/query?query=", UrlEncode(promql)));
  if (!response.ok()) return response.status();
  const nlohmann::json body = nlohmann::json::parse(response->body, nullptr, false);
  if (body.is_discarded() || !body.contains("status")) {
    return absl::DataLossError(absl::StrCat("HTTP ", response->status, ": ", response->body));
  }
  QueryAnswer answer;
  answer.status = body.at("status").get<std::string>();
  if (body.contains("error")) answer.error = body.at("error").get<std::string>();
  if (answer.status == "success") answer.result = body.at("data").at("result");
  return answer;
}

// Values of an instant-vector result that are finite numbers.
int FiniteValues(const nlohmann::json& result) {
  int n = 0;
  for (const nlohmann::json& series : result) {
    const double v = std::strtod(series.at("value").at(1).get<std::string>().c_str(), nullptr);
    n += std::isfinite(v) ? 1 : 0;
  }
  return n;
}

class AgentTelemetryPrometheusTest : public ::testing::Test {
 protected:
  // rxfleet-agent --standalone under the emulator; `name` keeps each agent's files apart.
  std::unique_ptr<ChildProcess> StartAgent(const std::string& name, const std::string& lab,
                                           const std::string& timeline,
                                           const std::vector<std::string>& extra_args) {
    std::filesystem::create_directories(dir_.path() / name / "tmp");
    const std::string home = dir_.File(name);
    std::vector<std::string> argv = {EmulatorPath(), "--lab", SourcePath(lab), "--timeout", "280"};
    if (!timeline.empty()) argv.insert(argv.end(), {"--timeline", SourcePath(timeline)});
    argv.insert(argv.end(), {"--", BinaryPath("agent/rxfleet-agent"), "--standalone",
                             "--metrics-address", "127.0.0.1:0", "--status-socket", "none",
                             "--reconcile-period", "500ms", "--state-dir", home + "/state"});
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    auto child = ChildProcess::Start(argv, {"TMPDIR=" + home + "/tmp"});
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  // Starts Prometheus on a free port scraping `targets` every second and waits until it is
  // ready. A port taken between picking and binding is retried with another.
  std::unique_ptr<ChildProcess> StartPrometheus(const std::vector<int>& targets, int* port) {
    std::string target_list;
    for (int t : targets)
      absl::StrAppend(&target_list, target_list.empty() ? "" : ", ", "'127.0.0.1:", t, "'");
    const std::string config = absl::StrCat(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n",
        "scrape_configs:\n  - job_name: ", kJob, "\n    static_configs:\n      - targets: [",
        target_list, "]\n");
    EXPECT_TRUE(WriteTextFile(dir_.path() / "prometheus.yml", config).ok());
    for (int attempt = 0; attempt < 3; ++attempt) {
      absl::StatusOr<int> free_port = PickFreePort();
      if (!free_port.ok()) {
        ADD_FAILURE() << free_port.status();
        return nullptr;
      }
      const std::string data = dir_.File(absl::StrCat("prometheus-data-", attempt));
      auto child =
          ChildProcess::Start({"prometheus", "--config.file=" + dir_.File("prometheus.yml"),
                               "--storage.tsdb.path=" + data,
                               absl::StrCat("--web.listen-address=127.0.0.1:", *free_port)});
      if (!child.ok()) {
        ADD_FAILURE() << "prometheus: " << child.status();
        return nullptr;
      }
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      bool exited = false;
      while (absl::Now() < deadline && !exited) {
        absl::StatusOr<HttpResponse> ready = HttpGet(*free_port, "/-/ready");
        if (ready.ok() && ready->status == 200) {
          *port = *free_port;
          return *std::move(child);
        }
        exited = (*child)->Wait(absl::Milliseconds(100)).ok();  // also the poll interval
      }
      const std::string log = (*child)->Text(Stream::kStderr);
      if (!exited) (*child)->Terminate();
      if (!absl::StrContains(log, "address already in use")) {
        ADD_FAILURE() << "prometheus never became ready:\n" << log;
        return nullptr;
      }
    }
    ADD_FAILURE() << "no free port for prometheus after 3 attempts";
    return nullptr;
  }

  TempDir dir_{"rxfleet-telemetry-prometheus"};
};

TEST_F(AgentTelemetryPrometheusTest, EveryOperatorQueryInTheMetricsDocReturnsData) {
  absl::StatusOr<std::string> doc = ReadTextFile(SourcePath("docs/METRICS.md"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  absl::StatusOr<std::vector<DocQuery>> queries = ParseOperatorQueries(*doc);
  ASSERT_TRUE(queries.ok()) << queries.status();

  std::filesystem::create_directories(dir_.path() / "empty-proc");
  std::unique_ptr<ChildProcess> fleet_agent =
      StartAgent("a", "tests/agent/telemetry/labs/telemetry-host.yaml",
                 "tests/agent/telemetry/labs/timelines/drift-and-failures.yaml",
                 {"--probe-target", "127.0.0.1"});
  std::unique_ptr<ChildProcess> broken_agent =
      StartAgent("b", "tests/agent/telemetry/labs/other-vendor.yaml", "",
                 {"--procfs-root", dir_.File("empty-proc")});
  ASSERT_NE(fleet_agent, nullptr);
  ASSERT_NE(broken_agent, nullptr);
  absl::StatusOr<int> fleet_port = WaitForMetricsPort(*fleet_agent, absl::Seconds(60));
  ASSERT_TRUE(fleet_port.ok()) << fleet_port.status();
  absl::StatusOr<int> broken_port = WaitForMetricsPort(*broken_agent, absl::Seconds(60));
  ASSERT_TRUE(broken_port.ok()) << broken_port.status();

  int port = 0;
  std::unique_ptr<ChildProcess> prometheus = StartPrometheus({*fleet_port, *broken_port}, &port);
  ASSERT_NE(prometheus, nullptr);

  // Both targets up and scraped at least twice.
  const std::string scrapes =
      absl::StrCat("count_over_time(up{job=\"", kJob, "\"}[5m]) >= 2 and up == 1");
  const absl::Time scraped_deadline = absl::Now() + absl::Seconds(90);
  int scraped_targets = 0;
  while (absl::Now() < scraped_deadline) {
    absl::StatusOr<QueryAnswer> answer = Query(port, scrapes);
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_EQ(answer->status, "success") << answer->error;
    scraped_targets = static_cast<int>(answer->result.size());
    if (scraped_targets == 2) break;
    absl::SleepFor(absl::Milliseconds(250));  // poll interval, not synchronisation
  }
  ASSERT_EQ(scraped_targets, 2) << prometheus->Text(Stream::kStderr);

  // Run every query until each unmarked one has returned data, at most for 150 s (drift
  // repairs come every 5 s; rate windows need two samples of a series).
  std::map<std::string, int> data;         // promql -> finite values in the last answer
  std::map<std::string, std::string> bad;  // promql -> why Prometheus refused it
  std::set<std::string> answered;          // unmarked queries that returned data at least once
  size_t unmarked = 0;
  for (const DocQuery& q : *queries) unmarked += q.needs.empty() ? 1 : 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(150);
  while (true) {
    for (const DocQuery& q : *queries) {
      absl::StatusOr<QueryAnswer> answer = Query(port, q.promql);
      ASSERT_TRUE(answer.ok()) << q.promql << ": " << answer.status();
      if (answer->status != "success") {
        bad[q.promql] = answer->error;
        continue;
      }
      data[q.promql] = FiniteValues(answer->result);
      if (q.needs.empty() && data[q.promql] > 0) answered.insert(q.promql);
    }
    if (!bad.empty() || answered.size() == unmarked || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Seconds(1));  // one scrape interval between rounds
  }

  std::cout << queries->size() << " queries from docs/METRICS.md:\n";
  for (const DocQuery& q : *queries) {
    EXPECT_FALSE(bad.contains(q.promql)) << q.promql << ": " << bad[q.promql];
    if (!q.needs.empty()) {
      std::cout << "  skipped, needs " << q.needs << " (finite values: " << data[q.promql]
                << "): " << q.promql << "\n";
      continue;
    }
    std::cout << "  finite values: " << data[q.promql] << ": " << q.promql << "\n";
    EXPECT_TRUE(answered.contains(q.promql))
        << "no data from \"" << q.description << "\": " << q.promql;
  }

  EXPECT_EQ(prometheus->Terminate(absl::Seconds(10)), 0) << prometheus->Text(Stream::kStderr);
  EXPECT_EQ(fleet_agent->Terminate(absl::Seconds(10)), 0) << fleet_agent->Text(Stream::kStderr);
  EXPECT_EQ(broken_agent->Terminate(absl::Seconds(10)), 0) << broken_agent->Text(Stream::kStderr);
}

}  // namespace
}  // namespace rxfleet::agent::telemetry
