// Bounds against hostile and broken peers, in-process over loopback: the finish rule shared by
// both callback reactors, rate-limited log lines, Hello-pending stream bounds, and a shutdown
// that is not held up by cancelled watches with writes in flight.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/retry_after.h"
#include "server/api/agent_service.h"
#include "server/api/finish_gate.h"
#include "server/api/log_limiter.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

TEST(FinishGateTest, FinishesOnceAndNeverDuringAWrite) {
  FinishGate gate;
  gate.WriteStarted();
  EXPECT_FALSE(gate.Request(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down")));
  EXPECT_TRUE(gate.finishing());
  EXPECT_TRUE(gate.WriteDone(true));
  EXPECT_EQ(gate.status().error_message(), "shutting down");
  EXPECT_FALSE(gate.Request(grpc::Status::CANCELLED));
  EXPECT_FALSE(gate.WriteDone(false));
}

// The shutdown hang: a finish was requested while a write was in flight, and the write then
// failed because the client had cancelled. The failed write must still finish the call.
TEST(FinishGateTest, AFailedWriteAfterARequestStillFinishes) {
  FinishGate gate;
  gate.WriteStarted();
  EXPECT_FALSE(gate.Request(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down")));
  EXPECT_TRUE(gate.WriteDone(false));
  EXPECT_EQ(gate.status().error_message(), "shutting down");
}

TEST(FinishGateTest, AFailedWriteFinishesWithUnavailable) {
  FinishGate gate;
  gate.WriteStarted();
  EXPECT_TRUE(gate.WriteDone(false));
  EXPECT_EQ(gate.status().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(FinishGateTest, WaitsForStartWhenAsked) {
  FinishGate gate(/*started=*/false);
  EXPECT_FALSE(gate.Request(grpc::Status::CANCELLED));
  EXPECT_TRUE(gate.Start());
  EXPECT_FALSE(gate.Start());
}

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

// A watch whose client stopped reading has a write in flight; shutdown requests its finish,
// the write then fails. Before the shared finish rule, Finish was never called and
// grpc::Server::Shutdown waited for ever.
TEST(WatchShutdownTest, CancelledUnreadWatchesDoNotHoldUpShutdown) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::Event>>> watches;
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    watches.push_back(server->fleet().WatchEvents(contexts.back().get(), {}));
  }
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1"));
  std::optional<v1::PolicyBundle> bundle = agent.WaitForBundle(1);
  ASSERT_TRUE(bundle.has_value());
  // ~8 MB of events, far more than the watches' flow-control windows: their writes stall.
  const std::string filler(4000, 'x');
  std::string last;
  for (int i = 0; i < 2000; ++i) {
    last = absl::StrCat("nack ", i, " ", filler);
    ASSERT_TRUE(agent.Nack(*bundle, last));
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Host> host = server->GetHost("h1");
        return host.ok() && host->status().last_nack().error_detail() == last;
      },
      absl::Seconds(60)));
  for (auto& context : contexts) context->TryCancel();
  absl::Notification stopped;
  std::thread stopper([&] {
    server->Stop();
    stopped.Notify();
  });
  // Stop() grants 2 s of grace; the bound leaves room for a loaded machine.
  const bool in_time = stopped.WaitForNotificationWithTimeout(absl::Seconds(30));
  EXPECT_TRUE(in_time) << "shutdown hung on the cancelled watches";
  if (!in_time) std::_Exit(1);  // the server would never return; do not hang the suite
  stopper.join();
}

// Audit events of every policy change, as ListEvents(audit) returns them.
std::vector<std::string> AuditNames(TestServer& server) {
  v1::ListEventsRequest request;
  request.set_audit(true);
  request.set_page_size(1000);
  v1::ListEventsResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  std::vector<std::string> names;
  if (!server.fleet().ListEvents(&context, request, &response).ok()) return names;
  for (const v1::Event& event : response.events()) names.push_back(event.metadata().name());
  return names;
}

// One agent NACKing with distinct details, and many hosts connecting, used to push every audit
// entry out of the shared event ring (also from the database). Audit now has its own table and
// retention by age; repeated NACKs of one push add no events.
TEST(AuditRetentionTest, AFloodOfFleetEventsLeavesEveryAuditEntryInPlace) {
  FleetServerOptions options;
  options.max_events = 20;
  options.flush_interval = absl::Milliseconds(50);
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(server->ApplyHold(absl::StrCat("p", i), 32).ok());
  }
  const std::vector<std::string> audit = AuditNames(*server);
  ASSERT_EQ(audit.size(), 5u);

  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1"));
  std::optional<v1::PolicyBundle> bundle;
  ASSERT_TRUE(WaitFor(
      [&] {
        bundle = agent.last_bundle();
        return bundle.has_value() && bundle->policies_size() == 5;
      },
      absl::Seconds(20)));
  std::string last;
  for (int i = 0; i < 500; ++i) {
    last = absl::StrCat("nack ", i);
    ASSERT_TRUE(agent.Nack(*bundle, last));
  }
  for (int i = 0; i < 40; ++i) {
    TestAgent other(server->address());
    ASSERT_TRUE(other.Connect(absl::StrCat("flood-", i)));
    ASSERT_TRUE(other.WaitForBundle(bundle->version()).has_value());
  }
  // The last NACK is answered once it names the stream's latest push (a debounced push may
  // have replaced the bundle the flood used).
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Host> host = server->GetHost("h1");
        if (host.ok() && host->status().last_nack().error_detail() == last) return true;
        agent.Nack(*agent.last_bundle(), last);
        return false;
      },
      absl::Seconds(20)));
  EXPECT_EQ(AuditNames(*server), audit);

  v1::ListEventsRequest nacked;
  nacked.set_involved_object_name("h1");
  nacked.set_page_size(1000);
  v1::ListEventsResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(server->fleet().ListEvents(&context, nacked, &response).ok());
  int nack_events = 0;
  for (const v1::Event& event : response.events()) nack_events += event.reason() == "BundleNacked";
  EXPECT_LE(nack_events, 2) << "every NACK of one push recorded an event";

  ASSERT_TRUE(server->Restart());
  EXPECT_EQ(AuditNames(*server), audit);
}

// A TCP connection to 127.0.0.1:`port`, or -1.
int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// GET `path` over a new connection; the whole answer, or "" if none came within 10 s.
std::string HttpGet(int port, const std::string& path) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  std::string answer;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) answer.append(buffer, n);
  }
  ::close(fd);
  return answer;
}

// civetweb ran with 2 workers and a 30 s request timeout: two idle TCP connections took both,
// and /metrics, /sd/agents and /healthz went dark.
TEST(HttpBoundsTest, TwoIdleConnectionsDoNotStopAScrape) {
  FleetServerOptions options;
  options.http_listen = "127.0.0.1:0";
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  const int port = server->server().http_port();
  ASSERT_GT(port, 0);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(ConnectLoopback(port));
  for (int fd : idle) ASSERT_GE(fd, 0);
  EXPECT_THAT(HttpGet(port, "/metrics"), HasSubstr("rxfleet_server_streams_opened_total"));
  EXPECT_THAT(HttpGet(port, "/sd/agents"), HasSubstr("200"));
  EXPECT_THAT(HttpGet(port, "/healthz"), HasSubstr("200"));
  for (int fd : idle) ::close(fd);
}

// Admission control over loopback: beyond the accept burst, streams are refused with
// RESOURCE_EXHAUSTED naming the flag and a retry hint in the trailing metadata; counted by reason.
TEST(AdmissionLoopbackTest, StreamsBeyondTheAcceptRateAreRefusedWithARetryHint) {
  FleetServerOptions options;
  options.http_listen = "127.0.0.1:0";
  options.agent_accept_rate = 0.01;  // no token comes back during the test
  options.agent_accept_burst = 2;
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<TestAgent>> agents;
  for (int i = 0; i < 5; ++i) agents.push_back(std::make_unique<TestAgent>(server->address()));
  int refused = 0;
  int connected = 0;
  for (int i = 0; i < 5; ++i) {
    if (agents[i]->Connect(absl::StrCat("h", i)) && agents[i]->WaitForBundle(1, absl::Seconds(5))) {
      ++connected;
      continue;
    }
    const grpc::Status status = agents[i]->WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(), HasSubstr("--agent-accept-rate"));
    std::optional<std::string> hint = agents[i]->TrailingMetadata("rxfleet-retry-after-ms");
    ASSERT_TRUE(hint.has_value());
    absl::StatusOr<absl::Duration> parsed = common::ParseRetryAfter(*hint);
    ASSERT_TRUE(parsed.ok()) << *hint;
    EXPECT_GT(*parsed, absl::Seconds(1));  // a token takes 100 s here
    ++refused;
  }
  EXPECT_EQ(connected, 2);
  EXPECT_EQ(refused, 3);
  EXPECT_THAT(HttpGet(server->server().http_port(), "/metrics"),
              HasSubstr("rxfleet_server_streams_refused_total{reason=\"accept_rate\"} 3"));
}

TEST(AdmissionLoopbackTest, StreamsBeyondTheCapAreRefusedUntilOneEnds) {
  FleetServerOptions options;
  options.max_agent_streams = 2;
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  auto first = std::make_unique<TestAgent>(server->address());
  ASSERT_TRUE(first->Connect("h1"));
  ASSERT_TRUE(first->WaitForBundle(1).has_value());
  TestAgent pending(server->address());  // no Hello yet: it counts too
  ASSERT_FALSE(WaitFor([&] { return pending.ended(); }, absl::Milliseconds(300)));
  TestAgent third(server->address());
  const grpc::Status status = third.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("maximum of 2 agent streams (--max-agent-streams)"));
  std::optional<std::string> hint = third.TrailingMetadata("rxfleet-retry-after-ms");
  ASSERT_TRUE(hint.has_value());
  EXPECT_GE(*common::ParseRetryAfter(*hint), absl::Seconds(30));
  // The first stream ends: its slot is free.
  first.reset();
  ASSERT_TRUE(WaitFor([&] {
    TestAgent next(server->address());
    return next.Connect("h3") && next.WaitForBundle(1, absl::Seconds(5)).has_value();
  }));
}

}  // namespace
}  // namespace rxfleet::server
