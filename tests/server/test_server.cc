#include "tests/server/test_server.h"

#include "absl/strings/str_cat.h"

namespace rxfleet::server::testing {

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

TestAgent::TestAgent(const std::string& address)
    : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
      stub_(v1::AgentService::NewStub(channel_)) {
  stream_ = stub_->Connect(&context_);
  reader_ = std::thread([this] {
    v1::ServerMessage message;
    while (stream_->Read(&message)) {
      absl::MutexLock lock(&mu_);
      received_.push_back(message);
    }
    const grpc::Status status = stream_->Finish();
    std::multimap<std::string, std::string> trailers;
    for (const auto& [key, value] : context_.GetServerTrailingMetadata()) {
      trailers.emplace(std::string(key.data(), key.size()),
                       std::string(value.data(), value.size()));
    }
    absl::MutexLock lock(&mu_);
    status_ = status;
    trailers_ = std::move(trailers);
    ended_ = true;
  });
}

std::optional<std::string> TestAgent::TrailingMetadata(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = trailers_.find(key);
  if (it == trailers_.end()) return std::nullopt;
  return it->second;
}

TestAgent::~TestAgent() {
  context_.TryCancel();
  reader_.join();
}

bool TestAgent::Send(const v1::AgentMessage& message) { return stream_->Write(message); }

bool TestAgent::Connect(const std::string& host_id, const std::vector<v1::Adapter>& adapters,
                        const std::string& board) {
  v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id(host_id);
  (*hello.mutable_hello()->mutable_labels())["board"] = board;
  hello.mutable_hello()->set_agent_version("test");
  hello.mutable_hello()->set_metrics_address(host_id + ":9477");
  v1::AgentMessage inventory;
  inventory.mutable_inventory();
  for (const v1::Adapter& adapter : adapters) {
    *inventory.mutable_inventory()->add_adapters() = adapter;
  }
  return Send(hello) && Send(inventory);
}

bool TestAgent::Ack(const v1::PolicyBundle& bundle) {
  v1::AgentMessage message;
  message.mutable_ack()->set_version(bundle.version());
  message.mutable_ack()->set_nonce(bundle.nonce());
  return Send(message);
}

bool TestAgent::Nack(const v1::PolicyBundle& bundle, const std::string& detail) {
  v1::AgentMessage message;
  message.mutable_nack()->set_version(bundle.version());
  message.mutable_nack()->set_nonce(bundle.nonce());
  message.mutable_nack()->set_error_detail(detail);
  return Send(message);
}

std::vector<v1::ServerMessage> TestAgent::received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

std::optional<v1::PolicyBundle> TestAgent::last_bundle() const {
  absl::MutexLock lock(&mu_);
  for (auto it = received_.rbegin(); it != received_.rend(); ++it) {
    if (it->has_bundle()) return it->bundle();
  }
  return std::nullopt;
}

std::optional<v1::PolicyBundle> TestAgent::WaitForBundle(uint64_t version, absl::Duration timeout) {
  std::optional<v1::PolicyBundle> bundle;
  WaitFor(
      [&] {
        bundle = last_bundle();
        return bundle.has_value() && bundle->version() >= version;
      },
      timeout);
  if (!bundle.has_value() || bundle->version() < version) return std::nullopt;
  return bundle;
}

bool TestAgent::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

grpc::Status TestAgent::WaitForEnd(absl::Duration timeout) {
  if (!WaitFor([&] { return ended(); }, timeout)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "stream still open");
  }
  absl::MutexLock lock(&mu_);
  return status_;
}

v1::Adapter ReportedAdapter(const std::string& id, v1::UsbSpeed speed, uint32_t hold_us,
                            bool observed) {
  v1::Adapter adapter;
  adapter.mutable_metadata()->set_name(id);
  v1::AdapterStatus* status = adapter.mutable_status();
  status->set_vid(0x0bda);
  status->set_pid(0x8912);
  status->set_chip("rtl8922au");
  status->set_layout(v1::RX_AGG_LAYOUT_V3);
  status->set_usb_speed(speed);
  status->set_state(v1::ADAPTER_STATE_APPLIED);
  status->mutable_desired()->mutable_settings()->set_hold_us(hold_us);
  (*status->mutable_desired()->mutable_provenance())["hold_us"].set_source(
      v1::SETTING_SOURCE_BUILT_IN_DEFAULT);
  if (observed) {
    v1::DecodedRxAgg* decoded = status->mutable_observed()->mutable_decoded();
    decoded->set_enable(true);
    decoded->set_hold_us(hold_us);
    decoded->set_count_threshold(255);
    decoded->set_buffer_kib(20);
  }
  return adapter;
}

}  // namespace rxfleet::server::testing
