// Bounds against hostile and broken peers, in-process over loopback: rate-limited log lines and
// Hello-pending stream bounds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/agent_service.h"
#include "server/api/log_limiter.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

TEST(LogLimiterTest, OneLinePerKeyAndIntervalThenTheSuppressedCount) {
  std::vector<std::string> lines;
  LogLimiter limiter(absl::Seconds(10), [&lines](common::LogLevel, std::string_view line) {
    lines.emplace_back(line);
  });
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 1000; ++i) limiter.Log(common::LogLevel::kWarning, "a", "refused", t0);
  EXPECT_TRUE(limiter.Log(common::LogLevel::kWarning, "b", "other", t0));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(limiter.Log(common::LogLevel::kWarning, "a", "refused", t0 + absl::Seconds(10)));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], "refused (999 similar lines suppressed)");
}

TEST(PeerAddressTest, DropsThePort) {
  EXPECT_EQ(PeerAddress("ipv4:10.0.0.5:51234"), "ipv4:10.0.0.5");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:5"), "ipv6:[::1]");
  EXPECT_EQ(PeerAddress("unix:/run/x"), "unix:/run/x");
}

// Streams without a Hello beyond the per-peer bound are refused at once with
// RESOURCE_EXHAUSTED; a Hello frees the slot, and agents that said Hello are unaffected.
TEST(HelloPendingTest, StreamsWithoutHelloAreBoundedPerPeer) {
  FleetServerOptions options;
  options.max_pending_hello_per_peer = 3;
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  TestAgent connected(server->address());
  ASSERT_TRUE(connected.Connect("h0"));
  ASSERT_TRUE(connected.WaitForBundle(1).has_value());

  std::vector<std::unique_ptr<TestAgent>> silent;
  for (int i = 0; i < 10; ++i) silent.push_back(std::make_unique<TestAgent>(server->address()));
  auto ended = [&silent] {
    int n = 0;
    for (const auto& agent : silent) n += agent->ended() ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return ended() == 7; }, absl::Seconds(20)));
  std::unique_ptr<TestAgent>* open = nullptr;
  for (auto& agent : silent) {
    if (!agent->ended()) {
      open = &agent;
      continue;
    }
    const grpc::Status status = agent->WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(), HasSubstr("without a Hello"));
  }
  ASSERT_NE(open, nullptr);
  // One of the open streams says Hello: its slot is free for a new stream.
  ASSERT_TRUE((*open)->Connect("h1"));
  ASSERT_TRUE((*open)->WaitForBundle(1).has_value());
  TestAgent late(server->address());
  ASSERT_TRUE(late.Connect("h2"));
  EXPECT_TRUE(late.WaitForBundle(1).has_value());
  EXPECT_FALSE(connected.ended());
}

}  // namespace
}  // namespace rxfleet::server
