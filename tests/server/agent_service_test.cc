// server/api/agent_service over loopback with protocol-level test agents: Hello validation,
// config and bundles with nonces, stale replies, stream replacement, debounced pushes.
#include "server/api/agent_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "server/api/bundle_message.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

TEST(BundleMessageTest, SharedBodyPlusNonceDecodesAsOneServerMessage) {
  auto body = std::make_shared<BundleBody>();
  body->version = 42;
  v1::PolicyBundle bundle;
  bundle.set_version(42);
  bundle.add_policies()->mutable_metadata()->set_name("p");
  bundle.SerializeToString(&body->bytes);
  SharedBundle shared(body, absl::Now());
  for (const std::string nonce : {"0123456789abcdef", "x"}) {
    grpc::ByteBuffer buffer = shared.Message(nonce);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    v1::ServerMessage message;
    ASSERT_TRUE(message.ParseFromString(bytes));
    ASSERT_TRUE(message.has_bundle());
    EXPECT_EQ(message.bundle().version(), 42u);
    EXPECT_EQ(message.bundle().nonce(), nonce);
    EXPECT_EQ(message.bundle().policies(0).metadata().name(), "p");
  }
  EXPECT_NE(NewNonce(), NewNonce());
  EXPECT_EQ(NewNonce().size(), 16u);
}

TEST(AgentServiceTest, FirstMessageMustBeAHello) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  v1::AgentMessage inventory;
  inventory.mutable_inventory();
  agent.Send(inventory);
  const grpc::Status status = agent.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("first message"));
}

TEST(AgentServiceTest, InvalidHelloIsRejectedNamingTheField) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  {
    TestAgent agent(server->address());
    agent.Connect("Bad_Host");
    const grpc::Status status = agent.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("hello.host_id"));
  }
  {
    TestAgent agent(server->address());
    v1::AgentMessage hello;
    hello.mutable_hello()->set_host_id("h1");
    hello.mutable_hello()->set_metrics_address("no-port");
    agent.Send(hello);
    const grpc::Status status = agent.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("hello.metrics_address"));
  }
  {
    TestAgent agent(server->address());
    agent.Connect("h1", {ReportedAdapter("", v1::USB_SPEED_SUPER, 32)});
    const grpc::Status status = agent.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("inventory.adapters[0].metadata.name"));
  }
  EXPECT_EQ(server->GetHost("Bad_Host").status().code(), absl::StatusCode::kNotFound);
}

TEST(AgentServiceTest, ConfigThenBundleAndOnlyTheLatestNonceCounts) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1", {ReportedAdapter("port-2-2", v1::USB_SPEED_SUPER, 32)}));
  std::optional<v1::PolicyBundle> first = agent.WaitForBundle(1);
  ASSERT_TRUE(first.has_value());
  std::vector<v1::ServerMessage> received = agent.received();
  ASSERT_GE(received.size(), 2u);
  ASSERT_TRUE(received[0].has_config());
  EXPECT_EQ(received[0].config().server_version(), "0.1.0");
  EXPECT_GT(received[0].config().report_interval().seconds(), 0);
  EXPECT_EQ(first->nonce().size(), 16u);

  // A reply with another nonce is stale and ignored.
  v1::PolicyBundle wrong = *first;
  wrong.set_nonce("not-the-nonce");
  ASSERT_TRUE(agent.Ack(wrong));
  ASSERT_TRUE(agent.Ack(*first));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().last_acked_version() == 1; }));

  // A new bundle comes with a new nonce; ACKing the old one does not count.
  ASSERT_TRUE(server->ApplyHold("usb3-short", 32).ok());
  std::optional<v1::PolicyBundle> second = agent.WaitForBundle(2);
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->nonce(), first->nonce());
  ASSERT_EQ(second->policies_size(), 1);
  ASSERT_TRUE(agent.Ack(*first));
  ASSERT_TRUE(agent.Nack(*second, "policy 'usb3-short': test rejection"));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().has_last_nack(); }));
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  EXPECT_EQ(host->status().last_acked_version(), 1u);
  EXPECT_EQ(host->status().last_nack().version(), 2u);
  EXPECT_EQ(host->status().last_sent_version(), 2u);
}

// Reasons of the fleet events about host `host_id`, oldest first.
std::vector<std::string> HostEventReasons(TestServer& server, const std::string& host_id) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  v1::ListEventsRequest request;
  v1::ListEventsResponse response;
  std::vector<std::string> reasons;
  if (!server.fleet().ListEvents(&context, request, &response).ok()) return reasons;
  for (const v1::Event& event : response.events()) {
    if (event.host_id() == host_id) reasons.push_back(event.reason());
  }
  return reasons;
}

TEST(AgentServiceTest, APlainAckIsNoEventButTheAckEndingANackIs) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1"));
  std::optional<v1::PolicyBundle> first = agent.WaitForBundle(1);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(agent.Ack(*first));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().last_acked_version() == 1; }));
  EXPECT_THAT(HostEventReasons(*server, "h1"), ::testing::ElementsAre("Connected"));

  ASSERT_TRUE(server->ApplyHold("usb3-short", 32).ok());
  std::optional<v1::PolicyBundle> second = agent.WaitForBundle(2);
  ASSERT_TRUE(second.has_value());
  ASSERT_TRUE(agent.Nack(*second, "policy 'usb3-short': test rejection"));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().has_last_nack(); }));
  ASSERT_TRUE(server->ApplyHold("usb3-short", 64).ok());
  std::optional<v1::PolicyBundle> third = agent.WaitForBundle(3);
  ASSERT_TRUE(third.has_value());
  ASSERT_TRUE(agent.Ack(*third));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().last_acked_version() == 3; }));
  EXPECT_FALSE(server->GetHost("h1")->status().has_last_nack());
  ASSERT_TRUE(server->ApplyHold("usb3-short", 96).ok());
  std::optional<v1::PolicyBundle> fourth = agent.WaitForBundle(4);
  ASSERT_TRUE(fourth.has_value());
  ASSERT_TRUE(agent.Ack(*fourth));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().last_acked_version() == 4; }));
  // The NACK and the ACK that ended it; the routine ACKs before and after are host status only.
  EXPECT_THAT(HostEventReasons(*server, "h1"),
              ::testing::ElementsAre("Connected", "BundleNacked", "BundleAcked"));
}

TEST(AgentServiceTest, ANewerStreamOfTheSameHostReplacesTheOlder) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent old_stream(server->address());
  ASSERT_TRUE(old_stream.Connect("h1"));
  ASSERT_TRUE(old_stream.WaitForBundle(1).has_value());
  TestAgent new_stream(server->address());
  ASSERT_TRUE(new_stream.Connect("h1"));
  const grpc::Status status = old_stream.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(status.error_message(), HasSubstr("replaced by a newer stream of host h1"));
  std::optional<v1::PolicyBundle> bundle = new_stream.WaitForBundle(1);
  ASSERT_TRUE(bundle.has_value());
  ASSERT_TRUE(new_stream.Ack(*bundle));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return host->status().connected() && host->status().last_acked_version() == 1;
  }));
}

TEST(AgentServiceTest, ABurstOfChangesIsPushedAsFewBundlesEndingAtTheLatest) {
  FleetServerOptions options;
  options.push_debounce = absl::Milliseconds(300);
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<TestAgent>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<TestAgent>(server->address()));
    ASSERT_TRUE(agents.back()->Connect("h" + std::to_string(i)));
    ASSERT_TRUE(agents.back()->WaitForBundle(1).has_value());
  }
  uint64_t last_version = 0;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<v1::ApplyPolicyResponse> applied =
        server->ApplyHold("p" + std::to_string(i), 32);
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_GT(applied->bundle_version(), last_version);
    last_version = applied->bundle_version();
  }
  EXPECT_EQ(last_version, 21u);
  for (const std::unique_ptr<TestAgent>& agent : agents) {
    std::optional<v1::PolicyBundle> bundle = agent->WaitForBundle(last_version);
    ASSERT_TRUE(bundle.has_value());
    EXPECT_EQ(bundle->policies_size(), 20);
    size_t bundles = 0;
    for (const v1::ServerMessage& m : agent->received()) bundles += m.has_bundle() ? 1 : 0;
    // 20 writes within ~a second: the first bundle at connect, then a handful of pushes.
    EXPECT_LE(bundles, 8u) << "the burst was not debounced";
  }
}

// Streams sharded over a few completion queues: every one gets every change and its ACK counts,
// whether a push starts the writes on each queue's thread or on the pushing thread; a stale ACK
// (an older nonce) is ignored and a replaced stream ends with ABORTED on any queue.
class ShardedAgentServiceTest : public ::testing::TestWithParam<bool> {};

TEST_P(ShardedAgentServiceTest, ManyStreamsOnFewQueuesAllGetEveryChange) {
  FleetServerOptions options;
  options.agent_completion_queues = 3;
  options.push_on_queue_threads = GetParam();
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  constexpr int kAgents = 24;
  std::vector<std::unique_ptr<TestAgent>> agents;
  std::vector<v1::PolicyBundle> first;
  for (int i = 0; i < kAgents; ++i) {
    agents.push_back(std::make_unique<TestAgent>(server->address()));
    ASSERT_TRUE(agents.back()->Connect("h" + std::to_string(i)));
  }
  for (const std::unique_ptr<TestAgent>& agent : agents) {
    std::optional<v1::PolicyBundle> bundle = agent->WaitForBundle(1);
    ASSERT_TRUE(bundle.has_value());
    first.push_back(*bundle);
  }
  uint64_t version = 0;
  for (int change = 0; change < 3; ++change) {
    absl::StatusOr<v1::ApplyPolicyResponse> applied =
        server->ApplyHold("p", change % 2 == 0 ? 64 : 96);
    ASSERT_TRUE(applied.ok()) << applied.status();
    version = applied->bundle_version();
    for (const std::unique_ptr<TestAgent>& agent : agents) {
      std::optional<v1::PolicyBundle> bundle = agent->WaitForBundle(version);
      ASSERT_TRUE(bundle.has_value()) << "change " << change;
      ASSERT_TRUE(agent->Ack(*bundle));
    }
  }
  // A late ACK of the first bundle (an older nonce) must not move the host back.
  ASSERT_TRUE(agents[0]->Ack(first[0]));
  for (int i = 0; i < kAgents; ++i) {
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Host> host = server->GetHost("h" + std::to_string(i));
      return host.ok() && host->status().connected() &&
             host->status().last_acked_version() == version;
    })) << "h"
        << i;
  }
  // Replacing streams: each old one ends with ABORTED, the new ones get the current bundle.
  std::vector<std::unique_ptr<TestAgent>> replacements;
  for (int i = 0; i < kAgents; i += 5) {
    replacements.push_back(std::make_unique<TestAgent>(server->address()));
    ASSERT_TRUE(replacements.back()->Connect("h" + std::to_string(i)));
    EXPECT_EQ(agents[i]->WaitForEnd().error_code(), grpc::StatusCode::ABORTED);
    ASSERT_TRUE(replacements.back()->WaitForBundle(version).has_value());
  }
  server->Stop();
  for (const std::unique_ptr<TestAgent>& agent : replacements) {
    EXPECT_EQ(agent->WaitForEnd().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
}

INSTANTIATE_TEST_SUITE_P(PushThread, ShardedAgentServiceTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "OnQueueThreads" : "OnPushingThread";
                         });

TEST(AgentServiceTest, ShutdownEndsStreamsWithUnavailable) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1"));
  ASSERT_TRUE(agent.WaitForBundle(1).has_value());
  server->Stop();
  const grpc::Status status = agent.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace rxfleet::server
