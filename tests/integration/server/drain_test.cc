// rxfleet-server as a real process on loopback, probed the way load balancers and operators'
// tools do: the standard health protocol (grpc.health.v1.Health Check and Watch) reports
// SERVING, then NOT_SERVING as soon as SIGTERM starts the drain while calls are still answered;
// server reflection lists the API and serves its schema (and is off with --no-reflection); at
// SIGTERM every agent stream ends with UNAVAILABLE and a retry delay in the trailing metadata,
// the server exits within its drain bound, and the agents converge again on a server restarted
// on the same port. Agents here are protocol-level clients of AgentService.Connect, so the test
// sees each stream's status and trailing metadata.

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::StartedServer;
using ::rxfleet::testing::StartServerProcess;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WaitFor;
using ::testing::Contains;
using ::testing::IsSupersetOf;

constexpr char kRetryAfterKey[] = "rxfleet-retry-after-ms";

grpc::ClientContext* WithDeadline(grpc::ClientContext* context,
                                  absl::Duration timeout = absl::Seconds(10)) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  // A channel of its own per caller, so one caller's connection state never hides another's.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// rxfleet-server as a child process (--insecure) with its database in `dir`.
class ServerProcess {
 public:
  ServerProcess(const TempDir& dir, std::vector<std::string> flags)
      : db_(dir.File("server.db")), flags_(std::move(flags)) {}

  // Starts on the port of the previous run (any free port the first time).
  bool Start() {
    const std::string listen = absl::StrCat("127.0.0.1:", port_);
    std::vector<std::string> argv = {BinaryPath("server/rxfleet-server"),
                                     "--insecure",
                                     "--listen",
                                     listen,
                                     "--db",
                                     db_,
                                     "--http-listen",
                                     "127.0.0.1:0",
                                     "--push-debounce",
                                     "20ms"};
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    absl::StatusOr<StartedServer> started = StartServerProcess(argv);
    if (!started.ok() || started->port <= 0) return false;
    port_ = started->port;
    http_port_ = ::rxfleet::testing::NumberAfter(started->start_line, "HTTP on port ");
    child_ = std::move(started->child);
    return true;
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // GET /healthz on the HTTP endpoint: "STATUS BODY", e.g. "200 ok".
  std::string Healthz() const {
    ::rxfleet::testing::ProcessResult curl =
        ::rxfleet::testing::RunProcess({"curl", "-s", "-w", " %{http_code}",
                                        absl::StrCat("http://127.0.0.1:", http_port_, "/healthz")},
                                       absl::Seconds(30));
    const std::string out = curl.stdout_text;  // "BODY\n STATUS"
    const size_t space = out.rfind(' ');
    if (space == std::string::npos) return out;
    std::string body = out.substr(0, space);
    while (!body.empty() && body.back() == '\n') body.pop_back();
    return out.substr(space + 1) + " " + body;
  }
  ChildProcess& child() { return *child_; }
  std::string log() const { return child_ != nullptr ? child_->Text(Stream::kStderr) : ""; }

 private:
  const std::string db_;
  const std::vector<std::string> flags_;
  int port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> child_;
};

// grpc.health.v1.Health/Check on a fresh channel: the status, or the call's error.
absl::StatusOr<HealthCheckResponse::ServingStatus> Check(const std::string& address,
                                                         const std::string& service) {
  std::unique_ptr<Health::Stub> health = Health::NewStub(Channel(address));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::ClientContext context;
  const grpc::Status status = health->Check(WithDeadline(&context), request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response.status();
}

// One agent stream spoken at the protocol level: Hello, then every bundle is ACKed; Run()
// returns when the server ends the stream, with its status and trailing metadata.
class ProtocolAgent {
 public:
  ProtocolAgent(std::string address, std::string host_id, uint64_t last_good_version = 0)
      : stub_(v1::AgentService::NewStub(Channel(address))),
        host_id_(std::move(host_id)),
        last_good_version_(last_good_version) {}

  ~ProtocolAgent() {
    context_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }

  void Start() {
    stream_ = stub_->Connect(&context_);
    v1::AgentMessage hello;
    hello.mutable_hello()->set_host_id(host_id_);
    hello.mutable_hello()->set_agent_version("drain-test");
    hello.mutable_hello()->set_last_good_version(last_good_version_);
    (*hello.mutable_hello()->mutable_labels())["board"] = "drain";
    stream_->Write(hello);
    thread_ = std::thread([this] { ReadLoop(); });
  }

  // The bundle version this agent ACKed last (0 before any).
  uint64_t acked() const {
    absl::MutexLock lock(&mu_);
    return acked_;
  }
  bool ended() const {
    absl::MutexLock lock(&mu_);
    return ended_.has_value();
  }
  // Waits for the end of the stream: its status and the value of kRetryAfterKey (if any).
  std::optional<std::pair<grpc::Status, std::optional<std::string>>> WaitEnded(
      absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::optional<grpc::Status>* ended) { return ended->has_value(); }, &ended_),
        timeout);
    if (!ended_.has_value()) return std::nullopt;
    return std::make_pair(*ended_, retry_after_);
  }

 private:
  void ReadLoop() {
    v1::ServerMessage message;
    while (stream_->Read(&message)) {
      if (!message.has_bundle()) continue;
      v1::AgentMessage ack;
      ack.mutable_ack()->set_version(message.bundle().version());
      ack.mutable_ack()->set_nonce(message.bundle().nonce());
      if (!stream_->Write(ack)) break;
      absl::MutexLock lock(&mu_);
      acked_ = message.bundle().version();
    }
    const grpc::Status status = stream_->Finish();
    absl::MutexLock lock(&mu_);
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailers =
        context_.GetServerTrailingMetadata();
    if (auto it = trailers.find(kRetryAfterKey); it != trailers.end()) {
      retry_after_ = std::string(it->second.data(), it->second.size());
    }
    ended_ = status;
  }

  std::unique_ptr<v1::AgentService::Stub> stub_;
  const std::string host_id_;
  const uint64_t last_good_version_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<grpc::Status> ended_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> retry_after_ ABSL_GUARDED_BY(mu_);
};

// The host as the server has it: connected and the last version it ACKed.
std::optional<v1::Host> GetHost(const std::string& address, const std::string& id) {
  std::unique_ptr<v1::FleetService::Stub> fleet = v1::FleetService::NewStub(Channel(address));
  v1::GetHostRequest request;
  request.set_name(id);
  v1::Host host;
  grpc::ClientContext context;
  if (!fleet->GetHost(WithDeadline(&context), request, &host).ok()) return std::nullopt;
  return host;
}

absl::StatusOr<uint64_t> ApplyHoldPolicy(const std::string& address, const std::string& name,
                                         uint32_t hold_us) {
  std::unique_ptr<v1::FleetService::Stub> fleet = v1::FleetService::NewStub(Channel(address));
  v1::ApplyPolicyRequest request;
  request.mutable_policy()->mutable_metadata()->set_name(name);
  request.mutable_policy()->mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  v1::ApplyPolicyResponse response;
  grpc::ClientContext context;
  const grpc::Status status = fleet->ApplyPolicy(WithDeadline(&context), request, &response);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return response.bundle_version();
}

bool AllConnected(const std::vector<std::unique_ptr<ProtocolAgent>>& agents, uint64_t version) {
  for (const std::unique_ptr<ProtocolAgent>& agent : agents) {
    if (agent->acked() != version) return false;
  }
  return true;
}

TEST(DrainTest, HealthIsServingThenNotServingWhileDraining) {
  TempDir dir("rxfleet-drain");
  // 6 s drain: the agent streams end over its first 3 s, which the probes below fall into.
  ServerProcess server(dir, {"--drain-timeout", "6s"});
  ASSERT_TRUE(server.Start());
  for (const char* service : {"", "rxfleet.v1.AgentService", "rxfleet.v1.FleetService"}) {
    absl::StatusOr<HealthCheckResponse::ServingStatus> status = Check(server.address(), service);
    ASSERT_TRUE(status.ok()) << service << ": " << status.status();
    EXPECT_EQ(*status, HealthCheckResponse::SERVING) << service;
  }
  EXPECT_EQ(server.Healthz(), "200 ok");
  absl::StatusOr<HealthCheckResponse::ServingStatus> unknown =
      Check(server.address(), "rxfleet.v1.NoSuchService");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);

  std::vector<std::unique_ptr<ProtocolAgent>> agents;
  for (int i = 0; i < 4; ++i) {
    agents.push_back(std::make_unique<ProtocolAgent>(server.address(), absl::StrCat("host-", i)));
    agents.back()->Start();
  }
  ASSERT_TRUE(WaitFor([&] {
    return AllConnected(agents, agents[0]->acked()) && agents[0]->acked() != 0;
  })) << server.log();

  // A Watch opened before the drain: SERVING now, NOT_SERVING once SIGTERM arrives.
  std::unique_ptr<Health::Stub> health = Health::NewStub(Channel(server.address()));
  grpc::ClientContext watch_context;
  WithDeadline(&watch_context, absl::Seconds(30));
  HealthCheckRequest request;
  request.set_service("rxfleet.v1.AgentService");
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch =
      health->Watch(&watch_context, request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);

  ASSERT_TRUE(server.child().Signal(SIGTERM));
  ASSERT_TRUE(watch->Read(&update)) << server.log();
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);

  // While agent streams are still being ended, new Check calls are answered, NOT_SERVING.
  bool all_ended_before = true;
  for (const std::unique_ptr<ProtocolAgent>& agent : agents) {
    all_ended_before = all_ended_before && agent->ended();
  }
  ASSERT_FALSE(all_ended_before) << "the drain ended the agent streams before it could be probed";
  for (const char* service : {"", "rxfleet.v1.AgentService", "rxfleet.v1.FleetService"}) {
    absl::StatusOr<HealthCheckResponse::ServingStatus> status = Check(server.address(), service);
    ASSERT_TRUE(status.ok()) << service << ": " << status.status() << "\n" << server.log();
    EXPECT_EQ(*status, HealthCheckResponse::NOT_SERVING) << service;
  }
  // The HTTP health check too: load balancers using `option httpchk` take the replica out.
  EXPECT_EQ(server.Healthz(), "503 draining") << server.log();
  watch_context.TryCancel();
  watch->Finish().IgnoreError();

  absl::StatusOr<int> exit_code = server.child().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok()) << server.log();
  EXPECT_EQ(*exit_code, 0) << server.log();
}

TEST(DrainTest, ASecondSignalDuringTheDrainExitsAtOnce) {
  TempDir dir("rxfleet-drain");
  // A 60 s drain that an open health Watch holds to its end: only the second signal ends it.
  ServerProcess server(dir, {"--drain-timeout", "60s"});
  ASSERT_TRUE(server.Start());
  std::unique_ptr<Health::Stub> health = Health::NewStub(Channel(server.address()));
  grpc::ClientContext watch_context;
  WithDeadline(&watch_context, absl::Seconds(120));
  HealthCheckRequest request;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch =
      health->Watch(&watch_context, request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  ASSERT_TRUE(server.child().Signal(SIGTERM));
  ASSERT_TRUE(watch->Read(&update)) << server.log();
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  // Still draining: the first signal alone does not end the process.
  EXPECT_FALSE(server.child().Wait(absl::Seconds(1)).ok()) << server.log();

  ASSERT_TRUE(server.child().Signal(SIGINT));
  absl::StatusOr<int> exit_code = server.child().Wait(absl::Seconds(20));
  ASSERT_TRUE(exit_code.ok()) << "the second signal did not end the drain\n" << server.log();
  EXPECT_EQ(*exit_code, 128 + SIGTERM) << server.log();
  EXPECT_THAT(server.log(), ::testing::HasSubstr("second stop signal during the drain"));
  watch_context.TryCancel();
  watch->Finish().IgnoreError();
}

// One ServerReflectionInfo exchange: `request` out, the answer back.
absl::StatusOr<grpc::reflection::v1alpha::ServerReflectionResponse> Reflect(
    const std::string& address, const grpc::reflection::v1alpha::ServerReflectionRequest& request) {
  std::unique_ptr<grpc::reflection::v1alpha::ServerReflection::Stub> stub =
      grpc::reflection::v1alpha::ServerReflection::NewStub(Channel(address));
  grpc::ClientContext context;
  auto stream = stub->ServerReflectionInfo(WithDeadline(&context));
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  const bool answered = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse rest;
  while (stream->Read(&rest)) {
  }
  const grpc::Status status = stream->Finish();
  if (!answered || !status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        answered ? status.error_message() : "no answer: " + status.error_message());
  }
  return response;
}

TEST(DrainTest, ReflectionListsTheApiAndServesItsSchema) {
  TempDir dir("rxfleet-reflect");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.Start());

  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("*");
  absl::StatusOr<grpc::reflection::v1alpha::ServerReflectionResponse> listed =
      Reflect(server.address(), list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> names;
  for (const auto& service : listed->list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_THAT(names, IsSupersetOf({"rxfleet.v1.FleetService", "rxfleet.v1.AgentService",
                                   "grpc.health.v1.Health"}));

  grpc::reflection::v1alpha::ServerReflectionRequest symbol;
  symbol.set_file_containing_symbol("rxfleet.v1.FleetService");
  absl::StatusOr<grpc::reflection::v1alpha::ServerReflectionResponse> files =
      Reflect(server.address(), symbol);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_TRUE(files->has_file_descriptor_response()) << files->DebugString();
  std::vector<std::string> methods;
  for (const std::string& bytes : files->file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    for (const auto& service : file.service()) {
      if (service.name() != "FleetService") continue;
      for (const auto& method : service.method()) methods.push_back(method.name());
    }
  }
  EXPECT_THAT(methods, IsSupersetOf({"ApplyPolicy", "GetHost", "ListHosts"}));
}

TEST(DrainTest, NoReflectionFlagTurnsReflectionOff) {
  TempDir dir("rxfleet-noreflect");
  ServerProcess server(dir, {"--no-reflection"});
  ASSERT_TRUE(server.Start());
  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("*");
  absl::StatusOr<grpc::reflection::v1alpha::ServerReflectionResponse> listed =
      Reflect(server.address(), list);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kUnimplemented) << listed.status();
  // Health is not affected.
  absl::StatusOr<HealthCheckResponse::ServingStatus> status = Check(server.address(), "");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, HealthCheckResponse::SERVING);
}

TEST(DrainTest, SigtermEndsAgentStreamsWithRetryDelayAndAgentsConvergeAfterRestart) {
  TempDir dir("rxfleet-sigterm");
  ServerProcess server(dir, {"--drain-timeout", "2s"});
  ASSERT_TRUE(server.Start());
  absl::StatusOr<uint64_t> version = ApplyHoldPolicy(server.address(), "hold-64", 64);
  ASSERT_TRUE(version.ok()) << version.status();

  constexpr int kAgents = 8;
  std::vector<std::unique_ptr<ProtocolAgent>> agents;
  for (int i = 0; i < kAgents; ++i) {
    agents.push_back(std::make_unique<ProtocolAgent>(server.address(), absl::StrCat("host-", i)));
    agents.back()->Start();
  }
  ASSERT_TRUE(WaitFor([&] { return AllConnected(agents, *version); })) << server.log();

  const absl::Time sigterm = absl::Now();
  ASSERT_TRUE(server.child().Signal(SIGTERM));
  std::vector<int64_t> delays;
  for (const std::unique_ptr<ProtocolAgent>& agent : agents) {
    auto ended = agent->WaitEnded(absl::Seconds(30));
    ASSERT_TRUE(ended.has_value()) << server.log();
    EXPECT_EQ(ended->first.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(ended->first.error_message(), "server draining; reconnect");
    ASSERT_TRUE(ended->second.has_value()) << "no " << kRetryAfterKey << " trailing metadata";
    int64_t delay_ms = -1;
    ASSERT_TRUE(absl::SimpleAtoi(*ended->second, &delay_ms)) << *ended->second;
    // Uniform over the first half of the drain timeout.
    EXPECT_GE(delay_ms, 0);
    EXPECT_LE(delay_ms, 1000);
    delays.push_back(delay_ms);
  }
  absl::StatusOr<int> exit_code = server.child().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok()) << server.log();
  EXPECT_EQ(*exit_code, 0) << server.log();
  // The drain bound (2 s) plus generous room for writing the database and a loaded machine.
  EXPECT_LT(absl::Now() - sigterm, absl::Seconds(15)) << server.log();
  EXPECT_THAT(server.log(), ::testing::HasSubstr("draining: health NOT_SERVING, ending 8 agent"));

  // The same port again; the agents reconnect saying what they have applied and converge.
  ASSERT_TRUE(server.Start());
  std::vector<std::unique_ptr<ProtocolAgent>> again;
  for (int i = 0; i < kAgents; ++i) {
    again.push_back(
        std::make_unique<ProtocolAgent>(server.address(), absl::StrCat("host-", i), *version));
    again.back()->Start();
  }
  ASSERT_TRUE(WaitFor([&] { return AllConnected(again, *version); })) << server.log();
  for (int i = 0; i < kAgents; ++i) {
    std::optional<v1::Host> host = GetHost(server.address(), absl::StrCat("host-", i));
    ASSERT_TRUE(host.has_value());
    EXPECT_TRUE(host->status().connected());
    EXPECT_EQ(host->status().last_acked_version(), *version);
  }
  // A change after the restart reaches all of them.
  absl::StatusOr<uint64_t> next = ApplyHoldPolicy(server.address(), "hold-96", 96);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(WaitFor([&] { return AllConnected(again, *next); })) << server.log();
  server.child().Terminate(absl::Seconds(20));
}

// The real agent under the emulator: its stream ends with the drain's status, it reconnects by
// itself to the server restarted on the same port and ACKs the bundle again.
TEST(DrainTest, RealAgentReconnectsAfterTheDrainAndConverges) {
  TempDir dir("rxfleet-drain-agent");
  ServerProcess server(dir, {"--drain-timeout", "2s"});
  ASSERT_TRUE(server.Start());
  absl::StatusOr<uint64_t> version = ApplyHoldPolicy(server.address(), "hold-64", 64);
  ASSERT_TRUE(version.ok()) << version.status();
  const std::filesystem::path agent_dir = dir.path() / "agent";
  std::filesystem::create_directories(agent_dir / "tmp");
  absl::StatusOr<std::unique_ptr<ChildProcess>> agent =
      ChildProcess::Start({::rxfleet::testing::EmulatorPath(),
                           "--lab",
                           ::rxfleet::testing::LabPath("rtl8922au-superspeed"),
                           "--state-out",
                           (agent_dir / "state.json").string(),
                           "--timeout",
                           "600",
                           "--",
                           BinaryPath("agent/rxfleet-agent"),
                           "--standalone",
                           "--server",
                           server.address(),
                           "--insecure",
                           "--host-id",
                           "pi5-drain",
                           "--label",
                           "board=pi5",
                           "--state-dir",
                           (agent_dir / "state").string(),
                           "--policy-file",
                           (agent_dir / "policies.d").string(),
                           "--status-socket",
                           "none",
                           "--metrics-address",
                           "none",
                           "--reconcile-period",
                           "200ms"},
                          {"TMPDIR=" + (agent_dir / "tmp").string()});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const auto acked = [&](uint64_t want) {
    std::optional<v1::Host> host = GetHost(server.address(), "pi5-drain");
    return host.has_value() && host->status().connected() &&
           host->status().last_acked_version() == want;
  };
  ASSERT_TRUE(WaitFor([&] { return acked(*version); }, absl::Seconds(60)))
      << (*agent)->Text(Stream::kStderr);

  ASSERT_TRUE(server.child().Signal(SIGTERM));
  EXPECT_TRUE(
      (*agent)
          ->WaitForLineContaining(Stream::kStderr, "server draining; reconnect", absl::Seconds(30))
          .ok())
      << (*agent)->Text(Stream::kStderr);
  absl::StatusOr<int> exit_code = server.child().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok()) << server.log();
  EXPECT_EQ(*exit_code, 0) << server.log();

  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(WaitFor([&] { return acked(*version); }, absl::Seconds(90)))
      << (*agent)->Text(Stream::kStderr);
  absl::StatusOr<uint64_t> next = ApplyHoldPolicy(server.address(), "hold-64", 96);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(WaitFor([&] { return acked(*next); }, absl::Seconds(60)))
      << (*agent)->Text(Stream::kStderr);
  (*agent)->Terminate(absl::Seconds(15));
  server.child().Terminate(absl::Seconds(20));
}

TEST(DrainTest, MaxConnectionAgeEndsOldConnectionsAndAgentsReconnect) {
  TempDir dir("rxfleet-age");
  ServerProcess server(dir, {"--max-connection-age", "1s", "--max-connection-age-grace", "1s"});
  ASSERT_TRUE(server.Start());
  absl::StatusOr<uint64_t> version = ApplyHoldPolicy(server.address(), "hold-64", 64);
  ASSERT_TRUE(version.ok()) << version.status();
  ProtocolAgent agent(server.address(), "host-aged");
  agent.Start();
  // GOAWAY after about 1 s, then the stream still open at the end of the grace is cut.
  auto ended = agent.WaitEnded(absl::Seconds(30));
  ASSERT_TRUE(ended.has_value()) << "the stream outlived the connection age\n" << server.log();
  EXPECT_EQ(ended->first.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ended->first.error_message();
  EXPECT_EQ(agent.acked(), *version);
  // A new connection is served as before.
  ProtocolAgent again(server.address(), "host-aged", *version);
  again.Start();
  EXPECT_TRUE(WaitFor([&] { return again.acked() == *version; })) << server.log();
}

TEST(DrainTest, OutOfRangeDrainAndAgeFlagsStopTheStartWithUsageErrors) {
  TempDir dir("rxfleet-flags");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-connection-age", "500ms"}, "max-connection-age 500ms is out of range"},
      {{"--max-connection-age", "1000h"}, "max-connection-age 1000h is out of range"},
      {{"--max-connection-age", "30m", "--max-connection-age-grace", "1000h"},
       "max-connection-age-grace 1000h is out of range"},
      {{"--drain-timeout", "11m"}, "--drain-timeout 11m is out of range 0..10m"},
      {{"--drain-timeout", "soon"}, "must be a duration"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {BinaryPath("server/rxfleet-server"),
                                     "--insecure",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--db",
                                     dir.File("server.db"),
                                     "--http-listen",
                                     "none"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const ::rxfleet::testing::ProcessResult result =
        ::rxfleet::testing::RunProcess(argv, absl::Seconds(30));
    EXPECT_EQ(result.exit_code, 2) << flags[1] << ": " << result.stderr_text;
    EXPECT_THAT(result.stderr_text, ::testing::HasSubstr(message)) << flags[1];
  }
}

}  // namespace
}  // namespace rxfleet
