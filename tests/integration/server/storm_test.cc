// A reconnect storm with real processes on loopback: 2,000 protocol agents (rxfleet-loadgen, on
// 200 connections) on rxfleet-server; the server is restarted on the same port and database and
// every agent reconnects at once. With a low accept rate the server refuses part of the storm
// with RESOURCE_EXHAUSTED and a retry hint, the agents honour it, and the storm still converges
// (every agent connected and ACKed the current bundle again); meanwhile `rxfleetctl get hosts`
// keeps answering within its normal deadline.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::NumberAfter;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::StartedServer;
using ::rxfleet::testing::StartServerProcess;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::testing::HasSubstr;

constexpr int kAgents = 2000;
constexpr int kConnections = 200;

// rxfleet-server as a child process; started again on the same gRPC port and database.
class Server {
 public:
  explicit Server(const TempDir& dir) : db_(dir.File("server.db")) {}

  bool Start() {
    absl::StatusOr<StartedServer> started = StartServerProcess(
        {BinaryPath("server/rxfleet-server"), "--insecure", "--listen",
         absl::StrCat("127.0.0.1:", port_), "--db", db_, "--http-listen", "127.0.0.1:0",
         // Low enough that a 2,000-agent storm is partly refused with a retry hint.
         "--agent-accept-rate", "400", "--agent-accept-burst", "200"},
        absl::Seconds(30));
    if (!started.ok()) return false;
    port_ = started->port;
    http_port_ = NumberAfter(started->start_line, "HTTP on port ");
    child_ = std::move(started->child);
    return port_ > 0 && http_port_ > 0;
  }

  int Stop() {
    const int code = child_->Terminate(absl::Seconds(20));
    log_ += child_->Text(Stream::kStderr);
    child_.reset();
    return code;
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int http_port() const { return http_port_; }
  std::string log() const { return log_ + (child_ ? child_->Text(Stream::kStderr) : ""); }

 private:
  const std::string db_;
  int port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> child_;
  std::string log_;
};

// The value of a sample line `name` in a Prometheus text exposition, or -1.
double Sample(const std::string& metrics, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (absl::StartsWith(line, name + " ")) {
      double value = -1;
      return absl::SimpleAtod(line.substr(name.size() + 1), &value) ? value : -1;
    }
  }
  return -1;
}

std::string Metrics(int http_port) {
  ProcessResult curl = RunProcess(
      {"curl", "-sf", absl::StrCat("http://127.0.0.1:", http_port, "/metrics")}, absl::Seconds(30));
  return curl.stdout_text;
}

TEST(ReconnectStormTest, AStormAfterARestartConvergesAndTheApiKeepsAnswering) {
  // Both processes need a descriptor per connection and then some.
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);

  TempDir dir;
  Server server(dir);
  ASSERT_TRUE(server.Start()) << server.log();
  absl::StatusOr<std::unique_ptr<ChildProcess>> loadgen = ChildProcess::Start(
      {BinaryPath("bench/server/rxfleet-loadgen"), "--server", server.address(), "--agents",
       absl::StrCat(kAgents), "--channels", absl::StrCat(kConnections), "--storm-rounds", "1",
       "--timeout", "600", "--settle", "0"});
  ASSERT_TRUE(loadgen.ok()) << loadgen.status();
  ASSERT_TRUE((*loadgen)
                  ->WaitForLineContaining(Stream::kStderr,
                                          absl::StrCat("all ", kAgents, " agents connected"),
                                          absl::Seconds(600))
                  .ok())
      << (*loadgen)->Text(Stream::kStderr) << server.log();

  ASSERT_EQ(server.Stop(), 0) << server.log();
  ASSERT_TRUE(server.Start()) << server.log();

  // The API during the storm: every `get hosts` answers (exit 0) within rxfleetctl's normal
  // 10 s deadline, until the loadgen saw every agent back.
  const std::vector<std::string> get_hosts = {
      BinaryPath("cli/rxfleetctl"), "--insecure", "--server", server.address(), "get", "hosts"};
  int calls_during_storm = 0;
  while ((*loadgen)->running() &&
         (*loadgen)->Lines(Stream::kStderr).back().find("storm round") == std::string::npos) {
    ProcessResult hosts = RunProcess(get_hosts, absl::Seconds(60));
    ASSERT_EQ(hosts.exit_code, 0) << hosts.stderr_text;
    EXPECT_THAT(hosts.stdout_text, HasSubstr("load-"));
    ++calls_during_storm;
  }
  EXPECT_GE(calls_during_storm, 1);

  absl::StatusOr<int> exit_code = (*loadgen)->Wait(absl::Seconds(600));
  ASSERT_TRUE(exit_code.ok()) << (*loadgen)->Text(Stream::kStderr);
  ASSERT_EQ(*exit_code, 0) << (*loadgen)->Text(Stream::kStderr) << server.log();
  const nlohmann::json summary = nlohmann::json::parse((*loadgen)->Text(Stream::kStdout));
  ASSERT_EQ(summary["storm_rounds"].size(), 1u) << summary.dump();
  const nlohmann::json& round = summary["storm_rounds"][0];
  EXPECT_EQ(round["up"].get<int>(), kAgents) << round.dump();
  // The storm met the accept rate: refusals carried the hint, and the agents came back anyway.
  EXPECT_GT(round["refused_with_hint"].get<int>(), 0) << round.dump();
  const std::string metrics = Metrics(server.http_port());
  EXPECT_GT(Sample(metrics, "rxfleet_server_streams_refused_total{reason=\"accept_rate\"}"), 0)
      << metrics;

  // The API lists every host after the storm.
  ProcessResult hosts = RunProcess(get_hosts, absl::Seconds(60));
  ASSERT_EQ(hosts.exit_code, 0) << hosts.stderr_text;
  EXPECT_THAT(hosts.stdout_text, HasSubstr(absl::StrFormat("load-%05d", kAgents - 1)));
}

}  // namespace
}  // namespace rxfleet
