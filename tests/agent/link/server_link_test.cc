// agent/link/server_link against a real in-process rxfleet-server over loopback, with a fake
// agent-side sink: Hello and inventory, ACK/NACK, persistence, reconnects and keepalive.
#include "agent/link/server_link.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/link/bundle_file.h"
#include "common/proto/time.h"
#include "common/retry_after.h"
#include "tests/server/test_server.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::server::FleetServerOptions;
using ::rxfleet::server::testing::TestAgent;
using ::rxfleet::server::testing::TestServer;
using ::rxfleet::server::testing::WaitFor;
using ::rxfleet::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// The agent side: records bundles, applies them unless told to reject.
class FakeSink : public BundleSink {
 public:
  absl::Status ApplyServerBundle(const ServerBundle& bundle) override {
    absl::MutexLock lock(&mu_);
    received_.push_back(bundle.version);
    if (!reject_with_.empty()) return absl::InvalidArgumentError(reject_with_);
    active_ = bundle;
    return absl::OkStatus();
  }
  void RejectWith(std::string reason) {
    absl::MutexLock lock(&mu_);
    reject_with_ = std::move(reason);
  }
  uint64_t active_version() const {
    absl::MutexLock lock(&mu_);
    return active_.version;
  }
  size_t active_policies() const {
    absl::MutexLock lock(&mu_);
    return active_.policies.size();
  }
  std::vector<uint64_t> received() const {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  mutable absl::Mutex mu_;
  ServerBundle active_;
  std::vector<uint64_t> received_;
  std::string reject_with_;
};

v1::Adapter MakeAdapter(const std::string& id, v1::UsbSpeed speed) {
  v1::Adapter adapter;
  adapter.mutable_metadata()->set_name(id);
  adapter.mutable_status()->set_chip("rtl8922au");
  adapter.mutable_status()->set_vid(0x0bda);
  adapter.mutable_status()->set_pid(0x8912);
  adapter.mutable_status()->set_usb_speed(speed);
  adapter.mutable_status()->set_state(v1::ADAPTER_STATE_APPLIED);
  return adapter;
}

class ServerLinkTest : public ::testing::Test {
 protected:
  std::unique_ptr<ServerLink> MakeLink(const std::string& address, const std::string& host_id,
                                       FakeSink* sink,
                                       absl::Duration keepalive = kAgentKeepaliveTime,
                                       absl::Duration keepalive_timeout = kAgentKeepaliveTimeout,
                                       std::function<std::string()> metrics_address = nullptr) {
    return MakeLinkTo({address}, host_id, sink, keepalive, keepalive_timeout,
                      std::move(metrics_address));
  }
  std::unique_ptr<ServerLink> MakeLinkTo(std::vector<std::string> addresses,
                                         const std::string& host_id, FakeSink* sink,
                                         absl::Duration keepalive = kAgentKeepaliveTime,
                                         absl::Duration keepalive_timeout = kAgentKeepaliveTimeout,
                                         std::function<std::string()> metrics_address = nullptr) {
    ServerLinkOptions options;
    options.metrics_address = std::move(metrics_address);
    options.server_addresses = std::move(addresses);
    options.state_dir = state_.File(host_id);
    options.hello.set_host_id(host_id);
    (*options.hello.mutable_labels())["board"] = "pi5";
    options.hello.set_agent_version("test");
    options.hello.set_metrics_address("127.0.0.1:9477");
    options.backoff = {absl::Milliseconds(50), absl::Milliseconds(400), 2.0};
    options.keepalive_time = keepalive;
    options.keepalive_timeout = keepalive_timeout;
    options.log = [this](LogLevel, std::string_view line) {
      absl::MutexLock lock(&log_mu_);
      log_.emplace_back(line);
    };
    options.on_bundle_persist_failure = [this] { ++persist_failures_; };
    absl::StatusOr<std::unique_ptr<ServerLink>> link = ServerLink::Create(options, sink);
    EXPECT_TRUE(link.ok()) << link.status();
    return link.ok() ? *std::move(link) : nullptr;
  }

  std::string Log() const {
    absl::MutexLock lock(&log_mu_);
    std::string text;
    for (const std::string& line : log_) text += line + "\n";
    return text;
  }

  TempDir state_;
  std::atomic<int> persist_failures_{0};
  mutable absl::Mutex log_mu_;
  std::vector<std::string> log_;
};

v1::PolicyBundle Hold1024Bundle(uint64_t version) {
  v1::PolicyBundle bundle;
  bundle.set_version(version);
  v1::Policy* policy = bundle.add_policies();
  policy->mutable_metadata()->set_name("usb2-long");
  policy->mutable_spec()->mutable_settings()->set_hold_us(1024);
  return bundle;
}

// An agent started with `--metrics-address 127.0.0.1:0` once announced port 0, which the
// server refuses (the whole stream, over and over); the Hello now carries what the provider
// says at connect time: the bound endpoint.
TEST_F(ServerLinkTest, HelloAnnouncesTheBoundMetricsEndpoint) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link =
      MakeLink(server->address(), "h1", &sink, kAgentKeepaliveTime, kAgentKeepaliveTimeout,
               [] { return std::string("127.0.0.1:40123"); });
  link->Start();
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return host.ok() && host->status().connected();
  })) << Log();
  EXPECT_EQ(server->GetHost("h1")->status().metrics_address(), "127.0.0.1:40123");
}

TEST_F(ServerLinkTest, HelloInventoryAndTheFirstBundleAreAcked) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->ReportAdapter(MakeAdapter("port-2-2", v1::USB_SPEED_SUPER));
  link->Start();

  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return host.ok() && host->status().connected() && host->status().last_acked_version() == 1;
  }));
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  EXPECT_EQ(host->metadata().labels().at("board"), "pi5");
  EXPECT_EQ(host->status().adapter_count(), 1u);
  EXPECT_EQ(host->status().metrics_address(), "127.0.0.1:9477");
  EXPECT_EQ(sink.active_version(), 1u);
  EXPECT_EQ(link->status().state(), v1::SERVER_LINK_STATE_CONNECTED);
  EXPECT_EQ(link->status().active_bundle_origin(), v1::BUNDLE_ORIGIN_SERVER);

  // An adapter reported while connected arrives as an update.
  link->ReportAdapter(MakeAdapter("port-1-1", v1::USB_SPEED_HIGH));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().adapter_count() == 2; }));
  link->ReportRemoved("port-1-1");
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().adapter_count() == 1; }));
}

TEST_F(ServerLinkTest, AppliedPolicyIsDeliveredPersistedAndAcked) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return sink.active_version() == 1; }));

  v1::AdapterSelector usb3;
  usb3.add_usb_speeds(v1::USB_SPEED_SUPER);
  absl::StatusOr<v1::ApplyPolicyResponse> applied = server->ApplyHold("usb3-short", 32, usb3);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->bundle_version(), 2u);
  ASSERT_TRUE(WaitFor([&] {
    return sink.active_version() == 2 && server->GetHost("h1")->status().last_acked_version() == 2;
  }));
  EXPECT_EQ(sink.active_policies(), 1u);
  absl::StatusOr<v1::PersistedBundle> persisted =
      ReadBundleFile(state_.File("h1/") + kBundleFileName);
  ASSERT_TRUE(persisted.ok()) << persisted.status();
  EXPECT_EQ(persisted->bundle().version(), 2u);
  EXPECT_EQ(persisted->bundle().policies(0).metadata().name(), "usb3-short");
  EXPECT_FALSE(persisted->bundle().nonce().empty());
  EXPECT_EQ(persisted->host_id(), "h1");  // the host it was received for
}

const v1::Condition* FindCondition(const v1::Host& host, const std::string& type) {
  for (const v1::Condition& c : host.status().conditions()) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

// The agent ACKed a bundle it could not save, and the server showed the host in sync: now the
// ACK says so, the server shows it as a condition and both sides count it.
TEST_F(ServerLinkTest, ABundleThatCannotBeSavedIsAckedWithTheReasonAndCounted) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  // A directory where the bundle file goes: the rename over it fails.
  const std::string bundle_path = state_.File("h1/") + kBundleFileName;
  std::filesystem::create_directories(std::filesystem::path(bundle_path) / "in-the-way");
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return host.ok() && host->status().last_acked_version() == 1;
  }));
  EXPECT_EQ(sink.active_version(), 1u);  // applied all the same
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  EXPECT_THAT(host->status().bundle_persist_error(), HasSubstr("Is a directory"));
  const v1::Condition* persisted = FindCondition(*host, "BundlePersisted");
  ASSERT_NE(persisted, nullptr);
  EXPECT_EQ(persisted->status(), v1::CONDITION_STATUS_FALSE);
  EXPECT_EQ(persisted->reason(), "SaveFailed");
  EXPECT_THAT(persisted->message(), HasSubstr("falls back to an older bundle"));
  EXPECT_GE(persist_failures_.load(), 1);
  EXPECT_THAT(Log(), HasSubstr("applied but not persisted"));
  // The local status says so too (rxfleetctl --local status).
  EXPECT_THAT(link->status().active_bundle_persist_error(), HasSubstr("Is a directory"));

  // Once the path is free, the next bundle is saved and the condition clears.
  std::filesystem::remove_all(bundle_path);
  ASSERT_TRUE(server->ApplyHold("all-long", 1024).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> h = server->GetHost("h1");
    return h.ok() && h->status().last_acked_version() == 2;
  }));
  host = server->GetHost("h1");
  EXPECT_EQ(host->status().bundle_persist_error(), "");
  persisted = FindCondition(*host, "BundlePersisted");
  ASSERT_NE(persisted, nullptr);
  EXPECT_EQ(persisted->status(), v1::CONDITION_STATUS_TRUE);
  EXPECT_EQ(ReadBundleFile(bundle_path)->bundle().version(), 2u);
  EXPECT_EQ(link->status().active_bundle_persist_error(), "");
}

TEST_F(ServerLinkTest, RejectedBundleIsNackedAndTheOldOneStays) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return sink.active_version() == 1; }));

  sink.RejectWith("policy 'usb3-short': bufferKiB 6 is not a multiple of 4 on layout v1");
  ASSERT_TRUE(server->ApplyHold("usb3-short", 32).ok());
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().has_last_nack(); }));
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  EXPECT_EQ(host->status().last_nack().version(), 2u);
  EXPECT_THAT(host->status().last_nack().error_detail(), HasSubstr("not a multiple of 4"));
  EXPECT_EQ(host->status().last_acked_version(), 1u);
  EXPECT_EQ(sink.active_version(), 1u);
  EXPECT_EQ(link->status().last_nacked_version(), 2u);
  EXPECT_EQ(link->status().active_bundle_version(), 1u);
  EXPECT_EQ(ReadBundleFile(state_.File("h1/") + kBundleFileName)->bundle().version(), 1u);

  // The NACK is an event with the agent's reason.
  v1::ListEventsRequest request;
  request.set_type(v1::EVENT_TYPE_WARNING);
  v1::ListEventsResponse events;
  grpc::ClientContext context;
  ASSERT_TRUE(server->fleet().ListEvents(&context, request, &events).ok());
  ASSERT_GE(events.events_size(), 1);
  EXPECT_EQ(events.events(0).reason(), "BundleNacked");
  EXPECT_THAT(events.events(0).message(), HasSubstr("not a multiple of 4"));
}

TEST_F(ServerLinkTest, PolicyInjectedPastValidationIsNackedWithTheRealReason) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return sink.active_version() == 1; }));

  // Stop the server and write a policy with a hold over the range straight into its database.
  server->Stop();
  {
    SQLite::Database db(server->db_path(), SQLite::OPEN_READWRITE);
    v1::Policy policy;
    policy.mutable_metadata()->set_name("too-long");
    policy.mutable_metadata()->set_resource_version("1");
    policy.mutable_metadata()->set_generation(1);
    policy.mutable_spec()->mutable_settings()->set_hold_us(9000);
    const std::string record = policy.SerializeAsString();
    SQLite::Statement insert(db, "INSERT INTO policies VALUES ('too-long', 1, ?)");
    insert.bind(1, record.data(), static_cast<int>(record.size()));
    insert.exec();
    db.exec("UPDATE meta SET value = value + 1 WHERE key = 'bundle_version'");
  }
  ASSERT_TRUE(server->Restart());
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().has_last_nack(); }));
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  EXPECT_EQ(host->status().last_nack().version(), 2u);
  EXPECT_THAT(host->status().last_nack().error_detail(), HasSubstr("policy 'too-long'"));
  EXPECT_THAT(host->status().last_nack().error_detail(), HasSubstr("9000"));
  EXPECT_EQ(sink.active_version(), 1u);  // the old settings stay
  // The NACK is never sent to the sink: conversion rejects it first.
  EXPECT_EQ(sink.received().back(), 1u);
}

TEST_F(ServerLinkTest, PersistedBundleIsAppliedWhileTheServerIsUnreachable) {
  // A bare PolicyBundle, as agents wrote it before host ids were recorded.
  std::filesystem::create_directories(state_.File("h1"));
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(state_.File("h1/") + kBundleFileName,
                                              Hold1024Bundle(5).SerializeAsString())
                  .ok());
  FakeSink sink;
  // Nothing listens on port 1 of loopback.
  std::unique_ptr<ServerLink> link = MakeLink("127.0.0.1:1", "h1", &sink);
  link->Start();
  EXPECT_EQ(sink.active_version(), 5u);  // applied synchronously in Start()
  EXPECT_EQ(sink.active_policies(), 1u);
  EXPECT_EQ(link->status().active_bundle_origin(), v1::BUNDLE_ORIGIN_PERSISTED);
  // Written before host ids were recorded: applied as this host's, and said so.
  EXPECT_THAT(Log(), HasSubstr("records no host id (written by an older agent)"));
  ASSERT_TRUE(WaitFor([&] {
    return link->status().state() == v1::SERVER_LINK_STATE_DISCONNECTED &&
           !link->status().last_error().empty();
  }));
  EXPECT_EQ(link->streams_opened(), 0u);
}

TEST_F(ServerLinkTest, PersistedBundleOfThisHostIsApplied) {
  ASSERT_TRUE(WriteBundleFile(state_.File("h1/") + kBundleFileName, Hold1024Bundle(6), "h1").ok());
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink("127.0.0.1:1", "h1", &sink);
  link->Start();
  EXPECT_EQ(sink.active_version(), 6u);
  EXPECT_EQ(link->status().active_bundle_origin(), v1::BUNDLE_ORIGIN_PERSISTED);
  EXPECT_THAT(Log(), Not(HasSubstr("records no host id")));
}

// A state directory copied from host h2 (or a cloned SD card): h1 must not take h2's policies
// and experiment assignments for its own adapters.
TEST_F(ServerLinkTest, PersistedBundleOfAnotherHostIsNotApplied) {
  ASSERT_TRUE(WriteBundleFile(state_.File("h1/") + kBundleFileName, Hold1024Bundle(6), "h2").ok());
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink("127.0.0.1:1", "h1", &sink);
  link->Start();
  EXPECT_TRUE(sink.received().empty());
  EXPECT_EQ(sink.active_version(), 0u);
  EXPECT_EQ(link->status().active_bundle_version(), 0u);
  EXPECT_NE(link->status().active_bundle_origin(), v1::BUNDLE_ORIGIN_PERSISTED);
  EXPECT_THAT(Log(), HasSubstr("not applying the persisted bundle version 6"));
  EXPECT_THAT(Log(), HasSubstr("received for host h2, this agent is host h1"));
  // The file is left as it is: the next bundle from the server replaces it.
  EXPECT_EQ(ReadBundleFile(state_.File("h1/") + kBundleFileName)->host_id(), "h2");
}

TEST_F(ServerLinkTest, PersistedBundleOfAnotherHostIsReplacedByTheServersBundle) {
  ASSERT_TRUE(WriteBundleFile(state_.File("h1/") + kBundleFileName, Hold1024Bundle(6), "h2").ok());
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return sink.active_version() == 1; }));
  EXPECT_EQ(sink.received(), std::vector<uint64_t>{1});  // never the refused version 6
  ASSERT_TRUE(WaitFor(
      [&] { return ReadBundleFile(state_.File("h1/") + kBundleFileName)->host_id() == "h1"; }));
  EXPECT_EQ(ReadBundleFile(state_.File("h1/") + kBundleFileName)->bundle().version(), 1u);
}

TEST_F(ServerLinkTest, ReconnectsAndConvergesAfterAServerRestart) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return link->streams_opened() == 1 && sink.active_version() == 1; }));

  server->Stop();
  ASSERT_TRUE(WaitFor([&] { return link->status().state() != v1::SERVER_LINK_STATE_CONNECTED; }));
  EXPECT_EQ(sink.active_version(), 1u);  // settings kept while the server is away

  ASSERT_TRUE(server->Restart());
  ASSERT_TRUE(server->ApplyHold("usb3-short", 32).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return link->streams_opened() >= 2 && sink.active_version() == 2 && host.ok() &&
           host->status().connected() && host->status().last_acked_version() == 2;
  }));
}

// The documented keepalive ratio (agent pings every 2x the server's minimum interval) is
// accepted: the stream stays up across several pings. Scaled down: server minimum 1.5 s, agent
// pings every 3 s. (gRPC clients never ping more often than once a second, so the server's
// minimum must stay above 1 s for the control test below to be able to fail.)
TEST_F(ServerLinkTest, KeepaliveAtTheDocumentedRatioIsAccepted) {
  FleetServerOptions options;
  options.min_recv_ping_interval = absl::Milliseconds(1500);
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link =
      MakeLink(server->address(), "h1", &sink, absl::Seconds(3), absl::Seconds(1));
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return link->streams_opened() == 1; }));
  const absl::Time connected =
      common::TimeFromProto(server->GetHost("h1")->status().connect_time());
  // Three pings' worth of idle stream; a GOAWAY (too_many_pings) would end it.
  EXPECT_FALSE(WaitFor([&] { return link->streams_opened() > 1; }, absl::Seconds(10)));
  EXPECT_EQ(link->status().state(), v1::SERVER_LINK_STATE_CONNECTED);
  EXPECT_EQ(link->status().last_error(), "");
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  EXPECT_TRUE(host->status().connected());
  EXPECT_EQ(common::TimeFromProto(host->status().connect_time()), connected);
}

// The control for the test above: pinging faster than the server allows (every second, the
// fastest a gRPC client pings) is refused with GOAWAY too_many_pings after two strikes, so the
// stream breaks and the link reconnects.
TEST_F(ServerLinkTest, KeepaliveFasterThanTheServerAllowsIsRefused) {
  FleetServerOptions options;
  options.min_recv_ping_interval = absl::Milliseconds(1500);
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link =
      MakeLink(server->address(), "h1", &sink, absl::Milliseconds(100), absl::Seconds(1));
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return link->streams_opened() >= 2; }, absl::Seconds(20)));
}

TEST(ReconnectDelayTest, TheServersHintIsAFloorWithBoundedJitter) {
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(3), std::nullopt, 0.1), absl::Seconds(3));
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(1), absl::Seconds(10), 0.0), absl::Seconds(10));
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(1), absl::Seconds(10), 0.2), absl::Seconds(12));
  // A hint shorter than the backoff does not shorten it.
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(30), absl::Seconds(2), 0.2), absl::Seconds(30));
  // Hints from the network are cut to kMaxRetryAfter; jitter is clamped to its range.
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(1), absl::Hours(10), 0.0), common::kMaxRetryAfter);
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(1), absl::Seconds(10), 7.0), absl::Seconds(12));
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(1), absl::Seconds(10), -1.0), absl::Seconds(10));
  EXPECT_EQ(common::ReconnectDelay(absl::Seconds(1), -absl::Seconds(10), 0.1), absl::Seconds(1));
}

// The delay of the first "retrying in D" log line, and the hint it names.
struct LoggedRetry {
  absl::Duration delay;
  std::optional<absl::Duration> hint;
};
std::optional<LoggedRetry> FirstRetry(const std::string& log) {
  const size_t at = log.find("retrying in ");
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + 12;
  const size_t end = log.find_first_of(" \n", start);
  LoggedRetry retry;
  if (!absl::ParseDuration(log.substr(start, end - start), &retry.delay)) return std::nullopt;
  const std::string asked = "(the server asked for at least ";
  const size_t line_end = log.find('\n', start);
  const size_t h = log.find(asked, start);
  if (h != std::string::npos && h < line_end) {
    const size_t hs = h + asked.size();
    absl::Duration hint;
    if (!absl::ParseDuration(log.substr(hs, log.find(')', hs) - hs), &hint)) return std::nullopt;
    retry.hint = hint;
  }
  return retry;
}

// A stream refused by the server's accept rate waits for the hint the server sent (not the
// 50-400 ms backoff of these tests), then connects.
TEST_F(ServerLinkTest, ARefusedStreamWaitsForTheServersRetryHint) {
  FleetServerOptions options;
  options.agent_accept_rate = 0.5;  // one stream every 2 s
  options.agent_accept_burst = 1;
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  TestAgent first(server->address());  // takes the only token
  ASSERT_TRUE(first.Connect("h0"));
  ASSERT_TRUE(first.WaitForBundle(1).has_value());

  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return FirstRetry(Log()).has_value(); })) << Log();
  const LoggedRetry retry = *FirstRetry(Log());
  EXPECT_THAT(Log(), HasSubstr("--agent-accept-rate"));
  ASSERT_TRUE(retry.hint.has_value()) << Log();
  EXPECT_GT(*retry.hint, absl::Milliseconds(400));  // longer than any backoff delay here
  EXPECT_GE(retry.delay, *retry.hint);
  EXPECT_LE(retry.delay, *retry.hint * (1 + common::kRetryHintJitter) + absl::Milliseconds(1));
  ASSERT_TRUE(WaitFor([&] { return link->streams_opened() == 1 && sink.active_version() == 1; },
                      absl::Seconds(60)))
      << Log();
}

// A server that reads each stream's first message (the Hello, recorded) and ends the stream with
// a fixed status and retry-hint value (a draining server, or a broken one).
class HintingService final : public v1::AgentService::CallbackService {
 public:
  HintingService(grpc::StatusCode code, std::string hint) : code_(code), hint_(std::move(hint)) {}
  grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>* Connect(
      grpc::CallbackServerContext* context) override {
    ++calls;
    context->AddTrailingMetadata(std::string(common::kRetryAfterMetadataKey), hint_);
    return new Ended(this, grpc::Status(code_, "draining"));
  }
  std::vector<v1::Hello> hellos() const {
    absl::MutexLock lock(&mu_);
    return hellos_;
  }
  std::atomic<int> calls{0};

 private:
  class Ended : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage> {
   public:
    Ended(HintingService* service, grpc::Status status)
        : service_(service), status_(std::move(status)) {
      StartRead(&in_);
    }
    void OnReadDone(bool ok) override {
      if (ok && in_.has_hello()) {
        absl::MutexLock lock(&service_->mu_);
        service_->hellos_.push_back(in_.hello());
      }
      Finish(status_);
    }
    void OnDone() override { delete this; }

   private:
    HintingService* const service_;
    const grpc::Status status_;
    v1::AgentMessage in_;
  };
  const grpc::StatusCode code_;
  const std::string hint_;
  mutable absl::Mutex mu_;
  std::vector<v1::Hello> hellos_ ABSL_GUARDED_BY(mu_);
};

struct HintingServer {
  HintingServer(grpc::StatusCode code, std::string hint, int listen_port = 0)
      : service(code, std::move(hint)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", listen_port),
                             grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~HintingServer() {
    if (server != nullptr) server->Shutdown(absl::ToChronoTime(absl::Now()));
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  HintingService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST_F(ServerLinkTest, ADrainingServersHintIsHonouredToo) {
  HintingServer server(grpc::StatusCode::UNAVAILABLE, "1500");
  ASSERT_NE(server.server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server.address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return FirstRetry(Log()).has_value(); })) << Log();
  const LoggedRetry retry = *FirstRetry(Log());
  ASSERT_TRUE(retry.hint.has_value()) << Log();
  EXPECT_EQ(*retry.hint, absl::Milliseconds(1500));
  EXPECT_GE(retry.delay, absl::Milliseconds(1500));
  EXPECT_LE(retry.delay, absl::Milliseconds(1801));
  link->Stop();
  EXPECT_EQ(server.service.calls.load(), 1);
}

TEST_F(ServerLinkTest, AHugeHintIsCutAndStopStillEndsTheWait) {
  HintingServer server(grpc::StatusCode::RESOURCE_EXHAUSTED, "4000000000");
  ASSERT_NE(server.server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server.address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return FirstRetry(Log()).has_value(); })) << Log();
  const LoggedRetry retry = *FirstRetry(Log());
  ASSERT_TRUE(retry.hint.has_value()) << Log();
  EXPECT_EQ(*retry.hint, common::kMaxRetryAfter);
  EXPECT_LE(retry.delay,
            common::kMaxRetryAfter * (1 + common::kRetryHintJitter) + absl::Milliseconds(1));
  const absl::Time stop = absl::Now();
  link->Stop();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(30));  // Stop does not wait out the hint
}

TEST_F(ServerLinkTest, AMalformedHintIsLoggedAndTheBackoffApplies) {
  HintingServer server(grpc::StatusCode::UNAVAILABLE, "soon");
  ASSERT_NE(server.server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server.address(), "h1", &sink);
  link->Start();
  // The backoff of these tests (50 ms doubling to 400 ms) keeps the link retrying.
  ASSERT_TRUE(WaitFor([&] { return server.service.calls.load() >= 3; })) << Log();
  link->Stop();
  EXPECT_THAT(Log(), HasSubstr("ignoring the server's retry hint: rxfleet-retry-after-ms must be "
                               "1 to 10 decimal digits (milliseconds), not 'soon'"));
  const LoggedRetry retry = *FirstRetry(Log());
  EXPECT_FALSE(retry.hint.has_value());
  EXPECT_LE(retry.delay, absl::Milliseconds(400));
}

// On reconnect the Hello names the bundle version in force (the server's version 2 from the
// stream before), so the server knows what the agent runs before it ACKs anything.
TEST_F(ServerLinkTest, TheReconnectHelloCarriesTheLastAppliedVersion) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->ApplyHold("usb3-short", 32).ok());
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLink(server->address(), "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return sink.active_version() == 2; }));
  const int port = std::stoi(server->address().substr(server->address().rfind(':') + 1));
  server->Stop();
  // The next server on that port records the Hello and ends the stream.
  HintingServer next(grpc::StatusCode::UNAVAILABLE, "100", port);
  ASSERT_NE(next.server, nullptr);
  ASSERT_TRUE(WaitFor([&] { return !next.service.hellos().empty(); })) << Log();
  link->Stop();
  EXPECT_EQ(next.service.hellos().front().host_id(), "h1");
  EXPECT_EQ(next.service.hellos().front().last_good_version(), 2u);
}

// ---- several servers (--server a:7443,b:7443) ----

TEST_F(ServerLinkTest, CreateRefusesAnEmptyOrOverlongServerList) {
  FakeSink sink;
  ServerLinkOptions options;
  options.hello.set_host_id("h1");
  EXPECT_TRUE(absl::IsInvalidArgument(ServerLink::Create(options, &sink).status()));
  options.server_addresses = {"127.0.0.1:1", ""};
  EXPECT_TRUE(absl::IsInvalidArgument(ServerLink::Create(options, &sink).status()));
  options.server_addresses.clear();
  for (size_t i = 0; i <= kMaxServerAddresses; ++i) {
    options.server_addresses.push_back(absl::StrCat("127.0.0.1:", 1000 + i));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(ServerLink::Create(options, &sink).status()));
  options.server_addresses.pop_back();
  EXPECT_TRUE(ServerLink::Create(options, &sink).ok());
}

// A fleet spreads over its servers: each link starts at a random entry, which its status names
// before the first connect. 64 links all on one entry would happen with probability 2^-63.
TEST_F(ServerLinkTest, LinksStartAtARandomEntryOfTheList) {
  FakeSink sink;
  std::map<std::string, int> first;
  for (int i = 0; i < 64; ++i) {
    std::unique_ptr<ServerLink> link =
        MakeLinkTo({"127.0.0.1:7001", "127.0.0.1:7002"}, absl::StrCat("h", i), &sink);
    ASSERT_NE(link, nullptr);
    ++first[link->status().server_address()];
  }
  EXPECT_EQ(first.size(), 2u);
  EXPECT_GT(first["127.0.0.1:7001"], 0);
  EXPECT_GT(first["127.0.0.1:7002"], 0);
}

// A TCP port on loopback where nothing listens (bound, never listening: connects are refused,
// and no other test can take the port while it is held).
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~RefusingPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Every "retrying in D at NEXT" line of the log, in order.
struct LoggedAttempt {
  absl::Duration delay;
  std::string next;
};
std::vector<LoggedAttempt> Retries(const std::string& log) {
  std::vector<LoggedAttempt> retries;
  for (size_t at = log.find("retrying in "); at != std::string::npos;
       at = log.find("retrying in ", at + 1)) {
    const size_t start = at + 12;
    const size_t end = log.find_first_of(" \n", start);
    LoggedAttempt retry;
    if (!absl::ParseDuration(log.substr(start, end - start), &retry.delay)) break;
    const size_t line_end = log.find('\n', start);
    const size_t next = log.find(" at ", start);
    if (next != std::string::npos && next < line_end) {
      retry.next = log.substr(next + 4, log.find_first_of(" \n", next + 4) - (next + 4));
    }
    retries.push_back(retry);
  }
  return retries;
}

// The rule between entries: after one entry fails the next is tried after the backoff's first
// step (50 ms here, times the jitter), however long the backoff has grown; once both failed in
// turn, the growing backoff applies (50, 100, 200, 400 ms, times the jitter in [0.5, 1]).
TEST_F(ServerLinkTest, TheNextEntryComesPromptlyAndAFailedRoundBacksOff) {
  RefusingPort a, b;
  ASSERT_GT(a.port(), 0);
  ASSERT_GT(b.port(), 0);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLinkTo({a.address(), b.address()}, "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return Retries(Log()).size() >= 10; }, absl::Seconds(60))) << Log();
  link->Stop();
  const std::vector<LoggedAttempt> retries = Retries(Log());
  for (size_t i = 0; i + 1 < retries.size(); ++i) {
    EXPECT_NE(retries[i].next, retries[i + 1].next) << i << "\n" << Log();  // alternating
    EXPECT_TRUE(retries[i].next == a.address() || retries[i].next == b.address()) << Log();
  }
  for (size_t i = 0; i < 10; i += 2) {
    EXPECT_LE(retries[i].delay, absl::Milliseconds(50)) << i << "\n" << Log();  // within a round
  }
  // The 4th and 5th failed rounds wait the backoff's maximum (400 ms) times the jitter.
  EXPECT_GE(retries[7].delay, absl::Milliseconds(199)) << Log();
  EXPECT_GE(retries[9].delay, absl::Milliseconds(199)) << Log();
  EXPECT_LE(retries[9].delay, absl::Milliseconds(400)) << Log();
}

// A list with a dead entry still connects, whichever entry the link starts at, and the status
// names the address in use.
TEST_F(ServerLinkTest, ADeadEntryIsSkipped) {
  RefusingPort dead;
  ASSERT_GT(dead.port(), 0);
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLinkTo({dead.address(), server->address()}, "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return host.ok() && host->status().connected() && host->status().last_acked_version() == 1;
  })) << Log();
  EXPECT_EQ(link->status().state(), v1::SERVER_LINK_STATE_CONNECTED);
  EXPECT_EQ(link->status().server_address(), server->address());
}

// Two replicas: the agent connects to one; when that one stops, it moves to the other, whose
// bundle it applies and ACKs, and whose address the status shows.
TEST_F(ServerLinkTest, FailsOverToTheOtherServerAndAcksItsBundle) {
  std::unique_ptr<TestServer> one = TestServer::Start();
  std::unique_ptr<TestServer> two = TestServer::Start();
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  ASSERT_TRUE(one->ApplyHold("usb3-short", 32).ok());  // version 2 on both
  ASSERT_TRUE(two->ApplyHold("usb2-long", 1024).ok());
  ASSERT_TRUE(two->ApplyHold("usb2-mid", 512).ok());  // version 3 on the second only
  FakeSink sink;
  std::unique_ptr<ServerLink> link = MakeLinkTo({one->address(), two->address()}, "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return link->status().state() == v1::SERVER_LINK_STATE_CONNECTED; }))
      << Log();
  TestServer* first = link->status().server_address() == one->address() ? one.get() : two.get();
  TestServer* other = first == one.get() ? two.get() : one.get();
  const uint64_t other_version = other == one.get() ? 2 : 3;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = first->GetHost("h1");
    return host.ok() && host->status().connected() && host->status().last_acked_version() > 1;
  })) << Log();
  const std::string other_address = other->address();

  first->Stop();
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<v1::Host> host = other->GetHost("h1");
        return host.ok() && host->status().connected() &&
               host->status().last_acked_version() == other_version;
      },
      absl::Seconds(60)))
      << Log();
  EXPECT_EQ(sink.active_version(), other_version);
  EXPECT_EQ(link->status().state(), v1::SERVER_LINK_STATE_CONNECTED);
  EXPECT_EQ(link->status().server_address(), other_address);
  EXPECT_THAT(Log(), HasSubstr(absl::StrCat("connected to ", other_address)));
}

// The Hello of the stream to the next server names the bundle version applied from the one
// before (nothing else: the Hello has no nonce).
TEST_F(ServerLinkTest, TheHelloToTheNextServerCarriesTheLastAppliedVersion) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->ApplyHold("usb3-short", 32).ok());
  HintingServer next(grpc::StatusCode::UNAVAILABLE, "100");
  ASSERT_NE(next.server, nullptr);
  FakeSink sink;
  // The recording server first would record a Hello of version 0: wait until the real one
  // served the link, whichever it started at.
  std::unique_ptr<ServerLink> link = MakeLinkTo({server->address(), next.address()}, "h1", &sink);
  link->Start();
  ASSERT_TRUE(WaitFor([&] { return sink.active_version() == 2; }, absl::Seconds(60))) << Log();
  const size_t before = next.service.hellos().size();
  server->Stop();
  ASSERT_TRUE(WaitFor([&] { return next.service.hellos().size() > before; })) << Log();
  link->Stop();
  const v1::Hello hello = next.service.hellos().back();
  EXPECT_EQ(hello.host_id(), "h1");
  EXPECT_EQ(hello.last_good_version(), 2u);
}

}  // namespace
}  // namespace rxfleet::agent
