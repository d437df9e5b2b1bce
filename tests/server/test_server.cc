#include "tests/server/test_server.h"

#include "absl/strings/str_cat.h"

namespace rxfleet::server::testing {

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return condition();
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::unique_ptr<TestServer> TestServer::Start(FleetServerOptions options) {
  std::unique_ptr<TestServer> test(new TestServer());
  test->dir_ = std::make_unique<rxfleet::testing::TempDir>("rxfleet-server-test");
  if (options.db_path.empty()) options.db_path = test->dir_->File("server.db");
  if (options.listen == kDefaultListen) options.listen = "127.0.0.1:0";
  if (options.push_debounce == absl::Milliseconds(100)) {
    options.push_debounce = absl::Milliseconds(20);
  }
  test->options_ = options;
  if (!test->StartServer()) return nullptr;
  return test;
}

bool TestServer::StartServer() {
  FleetServerOptions options = options_;
  if (port_ != 0) options.listen = absl::StrCat("127.0.0.1:", port_);
  // The previous instance's port may linger briefly after a stop: retry for a while.
  absl::StatusOr<std::unique_ptr<FleetServer>> server;
  WaitFor(
      [&] {
        server = FleetServer::Start(options);
        return server.ok();
      },
      absl::Seconds(10));
  if (!server.ok()) return false;
  server_ = *std::move(server);
  port_ = server_->grpc_port();
  channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  fleet_ = v1::FleetService::NewStub(channel_);
  return true;
}

void TestServer::Stop() {
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
  server_.reset();
}

bool TestServer::Restart() {
  Stop();
  return StartServer();
}

std::string TestServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::StatusOr<v1::ApplyPolicyResponse> TestServer::ApplyHold(const std::string& name,
                                                              uint32_t hold_us,
                                                              const v1::AdapterSelector& selector,
                                                              const std::string& resource_version) {
  v1::ApplyPolicyRequest request;
  v1::Policy* policy = request.mutable_policy();
  policy->mutable_metadata()->set_name(name);
  policy->mutable_metadata()->set_resource_version(resource_version);
  *policy->mutable_spec()->mutable_selector() = selector;
  policy->mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  v1::ApplyPolicyResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  const grpc::Status status = fleet_->ApplyPolicy(&context, request, &response);
  if (!status.ok()) return ToAbsl(status);
  return response;
}

absl::StatusOr<v1::Host> TestServer::GetHost(const std::string& host_id) {
  v1::GetHostRequest request;
  request.set_name(host_id);
  v1::Host host;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  const grpc::Status status = fleet_->GetHost(&context, request, &host);
  if (!status.ok()) return ToAbsl(status);
  return host;
}

}  // namespace rxfleet::server::testing
