// The gRPC FleetClient against an in-process FleetService on loopback: the bearer token and
// user agent reach the server, status codes come back unchanged, and a stop request ends a
// watch cleanly (OK) and cancels a unary call (CANCELLED).
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cli/client/grpc_clients.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "rxfleet/version.h"

namespace rxfleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The sync server API has no cancellation callback: check the flag until the client cancels,
// bounded so a broken client fails the test instead of hanging it.
grpc::Status AwaitCancellation(grpc::ServerContext* context) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!context->IsCancelled() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  return context->IsCancelled() ? grpc::Status::CANCELLED
                                : grpc::Status(grpc::StatusCode::INTERNAL, "never cancelled");
}

class FakeFleetService final : public v1::FleetService::Service {
 public:
  grpc::Status GetPolicy(grpc::ServerContext* context, const v1::GetPolicyRequest* request,
                         v1::Policy* response) override {
    {
      std::lock_guard lock(mu_);
      auto auth = context->client_metadata().find("authorization");
      if (auth != context->client_metadata().end()) {
        authorization_ = std::string(auth->second.data(), auth->second.size());
      }
      auto agent = context->client_metadata().find("user-agent");
      if (agent != context->client_metadata().end()) {
        user_agent_ = std::string(agent->second.data(), agent->second.size());
      }
    }
    if (request->name() == "slow") {
      slow_call_started_.Notify();
      return AwaitCancellation(context);
    }
    if (request->name() == "db-down") {  // what rxfleet-server says while PostgreSQL is down
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "cannot load policy db-down (PostgreSQL rxfleet@db:5432/rxfleet): "
                          "cannot connect: connection refused");
    }
    if (request->name() != "usb3-short") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "policy " + request->name() + " does not exist");
    }
    response->mutable_metadata()->set_name("usb3-short");
    return grpc::Status::OK;
  }

  grpc::Status WatchEvents(grpc::ServerContext* context, const v1::WatchEventsRequest*,
                           grpc::ServerWriter<v1::Event>* writer) override {
    v1::Event event;
    event.set_reason("Connected");
    writer->Write(event);
    return AwaitCancellation(context);
  }

  std::string authorization() {
    std::lock_guard lock(mu_);
    return authorization_;
  }
  std::string user_agent() {
    std::lock_guard lock(mu_);
    return user_agent_;
  }
  absl::Notification slow_call_started_;

 private:
  std::mutex mu_;
  std::string authorization_;
  std::string user_agent_;
};

class GrpcClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    settings_.server = "127.0.0.1:" + std::to_string(port_);
    settings_.server_origin = "--server";
    settings_.timeout = absl::Seconds(10);
  }
  void TearDown() override { server_->Shutdown(); }

  FakeFleetService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  ConnectionSettings settings_;
};

TEST_F(GrpcClientTest, SendsTheTokenAsBearerMetadataAndKeepsStatusCodes) {
  settings_.token = "s3cret";
  std::stop_source stop;
  auto client = ConnectFleet(settings_, stop.get_token());
  ASSERT_TRUE(client.ok()) << client.status();
  v1::GetPolicyRequest request;
  request.set_name("usb3-short");
  auto policy = (*client)->GetPolicy(request);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->metadata().name(), "usb3-short");
  EXPECT_EQ(service_.authorization(), "Bearer s3cret");
  EXPECT_THAT(service_.user_agent(), StartsWith(std::string("rxfleetctl/") + kVersion));

  request.set_name("nope");
  auto missing = (*client)->GetPolicy(request);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "policy nope does not exist");
}

TEST_F(GrpcClientTest, NoTokenNoAuthorizationHeader) {
  std::stop_source stop;
  auto client = ConnectFleet(settings_, stop.get_token());
  ASSERT_TRUE(client.ok());
  v1::GetPolicyRequest request;
  request.set_name("usb3-short");
  ASSERT_TRUE((*client)->GetPolicy(request).ok());
  EXPECT_EQ(service_.authorization(), "");
}

TEST_F(GrpcClientTest, StopEndsAWatchCleanly) {
  std::stop_source stop;
  auto client = ConnectFleet(settings_, stop.get_token());
  ASSERT_TRUE(client.ok());
  std::promise<void> first_event;
  int events = 0;
  auto watch = std::async(std::launch::async, [&] {
    return (*client)->WatchEvents(
        v1::WatchEventsRequest(),
        [&](const v1::Event& event) {
          EXPECT_EQ(event.reason(), "Connected");
          if (++events == 1) first_event.set_value();
        },
        std::stop_token());
  });
  first_event.get_future().wait();
  stop.request_stop();
  EXPECT_TRUE(watch.get().ok());
  EXPECT_EQ(events, 1);
}

TEST_F(GrpcClientTest, StopCancelsAUnaryCall) {
  std::stop_source stop;
  auto client = ConnectFleet(settings_, stop.get_token());
  ASSERT_TRUE(client.ok());
  auto call = std::async(std::launch::async, [&] {
    v1::GetPolicyRequest request;
    request.set_name("slow");
    return (*client)->GetPolicy(request).status();
  });
  service_.slow_call_started_.WaitForNotification();
  stop.request_stop();
  const absl::Status status = call.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(), "interrupted");
}

TEST(GrpcClientTlsTest, UnreadableTlsFileIsNamed) {
  ConnectionSettings settings;
  settings.server = "127.0.0.1:1";
  settings.tls = true;
  settings.ca_file = "/nonexistent/ca.pem";
  auto client = ConnectFleet(settings, std::stop_token());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("CA file /nonexistent/ca.pem: cannot be read"));
}

// A server that answered UNAVAILABLE because its database is down is not "unreachable".
TEST_F(GrpcClientTest, AServerWhoseDatabaseIsDownIsNotCalledUnreachable) {
  std::stop_source stop;
  auto client = ConnectFleet(settings_, stop.get_token());
  ASSERT_TRUE(client.ok()) << client.status();
  v1::GetPolicyRequest request;
  request.set_name("db-down");
  auto down = (*client)->GetPolicy(request);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr("answered but cannot reach its database"));
  EXPECT_THAT(down.status().message(), ::testing::Not(HasSubstr("cannot reach rxfleet-server")));
}

}  // namespace
}  // namespace rxfleet::cli
