// Security of rxfleet-server as real processes over TLS on loopback (docs/SECURITY.md): a
// throwaway fleet CA from scripts/rxfleet-certs; agents speak AgentService with client
// certificates (a raw gRPC stream here, so each refusal is observed exactly); operators use
// rxfleetctl with bearer tokens made by `rxfleet-server tokens` and through the token API.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::LabPath;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kCall = absl::Seconds(30);

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

// The gRPC address a started rxfleet-server reports in its start line ("... (port N, ...").
std::string ListenAddress(ChildProcess& server) {
  auto line = server.WaitForLineContaining(Stream::kStderr, "(port ", kCall);
  EXPECT_TRUE(line.ok()) << line.status();
  if (!line.ok()) return "";
  const size_t at = line->find("(port ") + 6;
  return absl::StrCat("127.0.0.1:",
                      line->substr(at, line->find_first_not_of("0123456789", at) - at));
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string certs = SourcePath("scripts/rxfleet-certs");
    const std::string tls = dir_.File("tls");
    for (std::vector<std::string> args : {std::vector<std::string>{"ca"},
                                          {"server", "localhost", "--ip", "127.0.0.1"},
                                          {"agent", "host-a"},
                                          {"agent", "host-b"}}) {
      std::vector<std::string> argv = {certs, "--dir", tls};
      argv.insert(argv.end(), args.begin(), args.end());
      ProcessResult r = RunProcess(argv, kCall);
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    }
    // A CA the server does not trust, with its own certificate for host-a.
    for (std::vector<std::string> args : {std::vector<std::string>{"ca"}, {"agent", "host-a"}}) {
      std::vector<std::string> argv = {certs, "--dir", dir_.File("rogue")};
      argv.insert(argv.end(), args.begin(), args.end());
      ProcessResult r = RunProcess(argv, kCall);
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    }
    db_ = dir_.File("fleet.db");
    auto server =
        ChildProcess::Start({BinaryPath("server/rxfleet-server"), "--listen", "127.0.0.1:0", "--db",
                             db_, "--http-listen", "none", "--push-debounce", "0s", "--tls-cert",
                             tls + "/server-localhost.crt", "--tls-key",
                             tls + "/server-localhost.key", "--tls-client-ca", tls + "/ca.crt"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = ListenAddress(*server_);
    ASSERT_FALSE(address_.empty());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Terminate(absl::Seconds(10));
  }

  std::string Tls(const std::string& name) const { return dir_.File("tls/" + name); }

  // `rxfleet-server tokens ...` on the running server's database.
  ProcessResult Tokens(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("server/rxfleet-server"), "tokens"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--db", db_});
    return RunProcess(argv, kCall);
  }

  std::string NewToken(const std::string& name, const std::string& role) {
    ProcessResult r = Tokens({"create", name, "--role", role});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    std::string token = r.stdout_text;
    while (!token.empty() && token.back() == '\n') token.pop_back();
    EXPECT_THAT(token, ::testing::StartsWith("rxf_"));
    return token;
  }

  // rxfleetctl over TLS (verifying the server with the fleet CA) with `token` (none if empty).
  ProcessResult Ctl(const std::string& token, std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("cli/rxfleetctl"), "--server", address_,
                                     "--ca-file", Tls("ca.crt")};
    if (!token.empty()) argv.insert(argv.end(), {"--token", token});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, kCall, {"HOME=" + dir_.path().string()});
  }

  std::string PolicyFile() {
    const std::string path = dir_.File("policy.yaml");
    EXPECT_TRUE(WriteTextFile(
                    path, Read(SourcePath("tests/fixtures/cli/policies/integration-pi1-hold.yaml")))
                    .ok());
    return path;
  }

  // A small experiment document (no adapter needs to match for it to run).
  std::string ExperimentFile() {
    const std::string path = dir_.File("experiment.yaml");
    EXPECT_TRUE(WriteTextFile(path, R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: audit-hold}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: parallel
  duration: 1h
  primaryMetric: rx_throughput_bps
)")
                    .ok());
    return path;
  }

  // A TLS channel to the server, with the client certificate `agent` ("" = none) of CA `ca_dir`.
  std::shared_ptr<grpc::Channel> Channel(const std::string& agent,
                                         const std::string& ca_dir = "tls") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(Tls("ca.crt"));
    if (!agent.empty()) {
      ssl.pem_cert_chain = Read(dir_.File(ca_dir + "/agent-" + agent + ".crt"));
      ssl.pem_private_key = Read(dir_.File(ca_dir + "/agent-" + agent + ".key"));
    }
    return grpc::CreateChannel(address_, grpc::SslCredentials(ssl));
  }

  // Opens AgentService.Connect, sends a Hello for `host_id` and returns the stream's end status
  // (or OK with *config_received if the server answered with its ServerConfig).
  grpc::Status Hello(const std::shared_ptr<grpc::Channel>& channel, const std::string& host_id,
                     bool* config_received) {
    *config_received = false;
    auto stub = v1::AgentService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCall));
    auto stream = stub->Connect(&context);
    v1::AgentMessage hello;
    hello.mutable_hello()->set_host_id(host_id);
    hello.mutable_hello()->set_agent_version("0.1.0");
    stream->Write(hello);
    v1::ServerMessage reply;
    if (stream->Read(&reply)) {
      *config_received = reply.has_config();
      context.TryCancel();
    }
    stream->WritesDone();
    return stream->Finish();
  }

  // rxfleet-agent under the emulator (lab "demo"), linked to the server over TLS with the
  // certificate of `cert_host`, saying Hello as `host_id`.
  std::unique_ptr<ChildProcess> StartAgent(const std::string& host_id,
                                           const std::string& cert_host) {
    return StartAgentWith(host_id, Tls("agent-" + cert_host + ".crt"),
                          Tls("agent-" + cert_host + ".key"));
  }

  std::unique_ptr<ChildProcess> StartAgentWith(const std::string& host_id, const std::string& cert,
                                               const std::string& key) {
    const std::string dir = dir_.File("agent-" + host_id);
    std::filesystem::create_directories(dir + "/tmp");
    auto child = ChildProcess::Start({EmulatorPath(),
                                      "--lab",
                                      LabPath("demo"),
                                      "--state-out",
                                      dir + "/state.json",
                                      "--timeout",
                                      "300",
                                      "--",
                                      BinaryPath("agent/rxfleet-agent"),
                                      "--standalone",
                                      "--server",
                                      address_,
                                      "--tls-ca",
                                      Tls("ca.crt"),
                                      "--tls-cert",
                                      cert,
                                      "--tls-key",
                                      key,
                                      "--host-id",
                                      host_id,
                                      "--state-dir",
                                      dir + "/state",
                                      "--status-socket",
                                      "none",
                                      "--metrics-address",
                                      "none"},
                                     {"TMPDIR=" + dir + "/tmp"});
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  TempDir dir_{"rxfleet-security"};
  std::string db_;
  std::string address_;
  std::unique_ptr<ChildProcess> server_;
};

TEST_F(SecurityTest, AgentWithoutClientCertificateCannotConnect) {
  bool config = false;
  grpc::Status status = Hello(Channel(""), "host-a", &config);
  EXPECT_FALSE(config);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("client certificate"));

  // A certificate from another CA fails the TLS handshake.
  status = Hello(Channel("host-a", "rogue"), "host-a", &config);
  EXPECT_FALSE(config);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_code(), grpc::StatusCode::CANCELLED);

  // Plaintext is not served at all.
  auto plain =
      v1::AgentService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  auto stream = plain->Connect(&context);
  v1::ServerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  EXPECT_FALSE(stream->Finish().ok());
}

// Health checks and reflection are for probes and tools: over TLS they need neither a client
// certificate nor a token, while FleetService still refuses the same caller.
TEST_F(SecurityTest, HealthAndReflectionNeedNoTokenButTheApiDoes) {
  std::shared_ptr<grpc::Channel> channel = Channel("");
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("rxfleet.v1.FleetService");
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext health_context;
  health_context.set_deadline(absl::ToChronoTime(absl::Now() + kCall));
  grpc::Status status = health->Check(&health_context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  grpc::ClientContext reflection_context;
  reflection_context.set_deadline(absl::ToChronoTime(absl::Now() + kCall));
  auto stream = reflection->ServerReflectionInfo(&reflection_context);
  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("*");
  grpc::reflection::v1alpha::ServerReflectionResponse listed;
  ASSERT_TRUE(stream->Write(list));
  ASSERT_TRUE(stream->Read(&listed));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  std::vector<std::string> names;
  for (const auto& service : listed.list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_THAT(names, ::testing::Contains("rxfleet.v1.FleetService"));

  auto fleet = v1::FleetService::NewStub(channel);
  grpc::ClientContext fleet_context;
  fleet_context.set_deadline(absl::ToChronoTime(absl::Now() + kCall));
  v1::ListHostsResponse hosts;
  status = fleet->ListHosts(&fleet_context, v1::ListHostsRequest(), &hosts);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
}

// VmRSS of `pid` in KiB (0 if unreadable).
long RssKib(pid_t pid) {
  absl::StatusOr<std::string> status = ReadTextFile(absl::StrCat("/proc/", pid, "/status"));
  if (!status.ok()) return 0;
  const size_t at = status->find("VmRSS:");
  return at == std::string::npos ? 0 : std::atol(status->c_str() + at + 6);
}

// An outsider without a certificate opens thousands of AgentService streams on a few
// connections and never says Hello. Each is refused with UNAUTHENTICATED at once (not after the
// Hello timeout), server memory stays bounded and operators are still answered.
TEST_F(SecurityTest, HelloLessStreamsWithoutCertificateAreRefusedAtOnce) {
  constexpr int kChannels = 8;
  constexpr int kStreams = 12000;
  const long rss_before = RssKib(server_->pid());
  ASSERT_GT(rss_before, 0);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs;
  for (int i = 0; i < kChannels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // one connection per channel
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(Tls("ca.crt"));
    channels.push_back(grpc::CreateCustomChannel(address_, grpc::SslCredentials(ssl), args));
    stubs.push_back(v1::AgentService::NewStub(channels.back()));
  }
  struct Call {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  grpc::CompletionQueue cq;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  for (int i = 0; i < kStreams; ++i) {
    auto call = std::make_unique<Call>();
    call->context.set_deadline(absl::ToChronoTime(deadline));
    // Tag 2i: started; tag 2i+1: finished.
    call->stream = stubs[i % kChannels]->AsyncConnect(&call->context, &cq,
                                                      reinterpret_cast<void*>(intptr_t{2} * i));
    calls.push_back(std::move(call));
  }
  long rss_peak = rss_before;
  int finished = 0;
  std::map<grpc::StatusCode, int> codes;
  void* tag = nullptr;
  bool ok = false;
  while (finished < kStreams && cq.AsyncNext(&tag, &ok, absl::ToChronoTime(deadline)) ==
                                    grpc::CompletionQueue::GOT_EVENT) {
    const intptr_t n = reinterpret_cast<intptr_t>(tag);
    Call& call = *calls[n / 2];
    if (n % 2 == 0) {
      call.stream->Finish(&call.status, reinterpret_cast<void*>(n + 1));
    } else {
      ++finished;
      ++codes[call.status.error_code()];
      if (finished % 1000 == 0) rss_peak = std::max(rss_peak, RssKib(server_->pid()));
    }
  }
  rss_peak = std::max(rss_peak, RssKib(server_->pid()));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  EXPECT_EQ(finished, kStreams);
  EXPECT_EQ(codes[grpc::StatusCode::UNAUTHENTICATED], kStreams)
      << "streams were not refused at once (DEADLINE_EXCEEDED: "
      << codes[grpc::StatusCode::DEADLINE_EXCEEDED] << ")";
  // Streams kept until the Hello timeout took ~17 KiB each (12,000: ~200 MiB); refused ones
  // leave nothing behind. 100 MiB leaves room for allocator noise on a loaded machine.
  EXPECT_LT(rss_peak - rss_before, 100 * 1024)
      << "server RSS grew from " << rss_before << " KiB to " << rss_peak << " KiB";
  const std::string admin = NewToken("admin-bounds", "admin");
  ProcessResult hosts = Ctl(admin, {"get", "hosts"});
  EXPECT_EQ(hosts.exit_code, 0) << hosts.stderr_text;
}

TEST_F(SecurityTest, HelloMustMatchTheCertificateHost) {
  bool config = false;
  grpc::Status status = Hello(Channel("host-a"), "host-b", &config);
  EXPECT_FALSE(config);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("host-b"));
  auto logged =
      server_->WaitForLineContaining(Stream::kStderr, "Hello claims host_id 'host-b'", kCall);
  EXPECT_TRUE(logged.ok()) << logged.status();

  // The certificate's own host is served.
  Hello(Channel("host-a"), "host-a", &config);
  EXPECT_TRUE(config);
  // The refused Hello left no host-b behind.
  const std::string admin = NewToken("root", "admin");
  ProcessResult hosts = Ctl(admin, {"get", "hosts", "-o", "name"});
  EXPECT_EQ(hosts.exit_code, 0) << hosts.stderr_text;
  EXPECT_THAT(hosts.stdout_text, HasSubstr("host-a"));
  EXPECT_THAT(hosts.stdout_text, Not(HasSubstr("host-b")));
}

// docs/SECURITY.md: an agent's identity is its certificate's CN or a DNS SAN. gRPC's
// x509_subject_alternative_name property also holds URI, email and IP SANs, so a certificate
// with the IP SAN 10.1.2.3 or the URI SAN uri-host used to speak for hosts of those names.
TEST_F(SecurityTest, OnlyTheCommonNameAndDnsSansAreHostIdentities) {
  const std::string key = Tls("agent-multi.key");
  const std::string csr = Tls("agent-multi.csr");
  const std::string ext = Tls("agent-multi.ext");
  ASSERT_TRUE(WriteTextFile(ext,
                            "basicConstraints=critical,CA:FALSE\n"
                            "keyUsage=critical,digitalSignature\n"
                            "extendedKeyUsage=clientAuth\n"
                            "subjectAltName=DNS:dns-host,IP:10.1.2.3,URI:uri-host,"
                            "email:mail-host@example.net\n")
                  .ok());
  for (std::vector<std::string> argv :
       {std::vector<std::string>{"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                                 "ec_paramgen_curve:P-256", "-out", key},
        {"openssl", "req", "-new", "-key", key, "-subj", "/O=rxfleet/CN=cn-host", "-out", csr},
        {"openssl", "x509", "-req", "-in", csr, "-CA", Tls("ca.crt"), "-CAkey", Tls("ca.key"),
         "-CAcreateserial", "-days", "1", "-sha256", "-extfile", ext, "-out",
         Tls("agent-multi.crt")}}) {
    ProcessResult r = RunProcess(argv, kCall);
    ASSERT_EQ(r.exit_code, 0) << argv[1] << ": " << r.stderr_text;
  }
  for (const char* claimed : {"10.1.2.3", "uri-host"}) {
    SCOPED_TRACE(claimed);
    bool config = false;
    grpc::Status status = Hello(Channel("multi"), claimed, &config);
    EXPECT_FALSE(config);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  }
  for (const char* claimed : {"cn-host", "dns-host"}) {
    SCOPED_TRACE(claimed);
    bool config = false;
    Hello(Channel("multi"), claimed, &config);
    EXPECT_TRUE(config);
  }
}

TEST_F(SecurityTest, RolesTokensAndAudit) {
  const std::string viewer = NewToken("watcher", "viewer");
  const std::string ops = NewToken("ops", "operator");
  const std::string admin = NewToken("root", "admin");
  const std::string policy = PolicyFile();

  // No token: refused.
  ProcessResult anonymous = Ctl("", {"get", "policies"});
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_THAT(anonymous.stderr_text, HasSubstr("bearer token"));
  // A made-up token: refused.
  ProcessResult forged = Ctl("rxf_forged", {"get", "policies"});
  EXPECT_NE(forged.exit_code, 0);
  EXPECT_THAT(forged.stderr_text, HasSubstr("not valid"));

  // A viewer can read but not apply; nothing is stored.
  ProcessResult read = Ctl(viewer, {"get", "policies"});
  EXPECT_EQ(read.exit_code, 0) << read.stderr_text;
  ProcessResult denied = Ctl(viewer, {"apply", "-f", policy});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_THAT(denied.stderr_text, HasSubstr("needs role operator"));
  ProcessResult none = Ctl(viewer, {"get", "policies", "-o", "json"});
  ASSERT_EQ(none.exit_code, 0) << none.stderr_text;
  EXPECT_THAT(none.stdout_text, Not(HasSubstr("pi1-hold")));
  auto denial = server_->WaitForLineContaining(Stream::kStderr, "denied ApplyPolicy", kCall);
  EXPECT_TRUE(denial.ok()) << denial.status();

  // An operator applies and deletes.
  ProcessResult applied = Ctl(ops, {"apply", "-f", policy});
  EXPECT_EQ(applied.exit_code, 0) << applied.stderr_text;
  ProcessResult stored = Ctl(viewer, {"get", "policies", "-o", "name"});
  EXPECT_THAT(stored.stdout_text, HasSubstr("pi1-hold"));
  ProcessResult deleted = Ctl(ops, {"delete", "policy", "pi1-hold"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.stderr_text;

  // Experiments: a viewer may not start one, an operator starts and stops it.
  const std::string experiment = ExperimentFile();
  ProcessResult not_started = Ctl(viewer, {"experiment", "create", "-f", experiment});
  EXPECT_NE(not_started.exit_code, 0);
  EXPECT_THAT(not_started.stderr_text, HasSubstr("needs role operator"));
  ProcessResult started = Ctl(ops, {"experiment", "create", "-f", experiment});
  EXPECT_EQ(started.exit_code, 0) << started.stderr_text;
  ProcessResult stopped = Ctl(ops, {"experiment", "stop", "audit-hold"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.stderr_text;

  // Token administration needs admin; an admin creates and revokes through the API.
  auto fleet = v1::FleetService::NewStub(Channel(""));
  auto call = [](const std::string& token) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", "Bearer " + token);
    context->set_deadline(absl::ToChronoTime(absl::Now() + kCall));
    return context;
  };
  v1::ListTokensResponse listed;
  grpc::Status by_ops = fleet->ListTokens(call(ops).get(), {}, &listed);
  EXPECT_EQ(by_ops.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(by_ops.error_message(), HasSubstr("needs role admin"));
  v1::CreateTokenRequest create;
  create.set_name("ci");
  create.set_role("viewer");
  v1::CreateTokenResponse created;
  grpc::Status made = fleet->CreateToken(call(admin).get(), create, &created);
  ASSERT_TRUE(made.ok()) << made.error_message();
  EXPECT_EQ(created.info().created_by(), "token:root");
  ProcessResult with_new = Ctl(created.token(), {"get", "hosts"});
  EXPECT_EQ(with_new.exit_code, 0) << with_new.stderr_text;
  grpc::Status all = fleet->ListTokens(call(admin).get(), {}, &listed);
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(listed.tokens_size(), 4);
  for (const v1::TokenInfo& info : listed.tokens()) {
    EXPECT_THAT(info.DebugString(), Not(HasSubstr("rxf_")));
  }
  v1::RevokeTokenRequest revoke;
  revoke.set_name("ci");
  v1::RevokeTokenResponse revoked;
  ASSERT_TRUE(fleet->RevokeToken(call(admin).get(), revoke, &revoked).ok());
  ProcessResult after_api_revoke = Ctl(created.token(), {"get", "hosts"});
  EXPECT_NE(after_api_revoke.exit_code, 0);

  // A token revoked with `rxfleet-server tokens revoke` while the server runs stops at once.
  ProcessResult listed_cli = Tokens({"list"});
  EXPECT_THAT(listed_cli.stdout_text, HasSubstr("ops\toperator"));
  ProcessResult gone = Tokens({"revoke", "ops"});
  EXPECT_EQ(gone.exit_code, 0) << gone.stderr_text;
  ProcessResult after_revoke = Ctl(ops, {"apply", "-f", policy});
  EXPECT_NE(after_revoke.exit_code, 0);
  EXPECT_THAT(after_revoke.stderr_text, HasSubstr("not valid"));

  // Every change has an audit entry naming its token.
  ProcessResult audit = Ctl(viewer, {"get", "events", "--audit", "-o", "json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.stderr_text;
  const nlohmann::json events = nlohmann::json::parse(audit.stdout_text)["events"];
  std::vector<std::string> seen;
  for (const auto& event : events) {
    const auto& record = event["audit"];
    if (record.value("resultCode", "") != "OK") continue;
    seen.push_back(absl::StrCat(record.value("action", ""), " by ", record.value("actor", "")));
  }
  EXPECT_THAT(
      seen, ::testing::IsSupersetOf({"ApplyPolicy by token:ops", "DeletePolicy by token:ops",
                                     "CreateExperiment by token:ops", "StopExperiment by token:ops",
                                     "CreateToken by token:root", "RevokeToken by token:root"}));
  ProcessResult table = Ctl(viewer, {"get", "events", "--audit"});
  EXPECT_EQ(table.exit_code, 0) << table.stderr_text;
  EXPECT_THAT(table.stdout_text, HasSubstr("token:ops"));
}

// A dry run changes nothing, so a viewer may ask for one (`diff`, `apply --dry-run`); the real
// apply still needs an operator.
TEST_F(SecurityTest, ViewerMayDiffAndDryRunButNotApply) {
  const std::string viewer = NewToken("watcher", "viewer");
  const std::string policy = PolicyFile();
  ProcessResult diff = Ctl(viewer, {"diff", "-f", policy});
  EXPECT_THAT(diff.stderr_text, Not(HasSubstr("needs role")));
  EXPECT_THAT(diff.stdout_text, HasSubstr("pi1-hold"));
  ProcessResult dry = Ctl(viewer, {"apply", "-f", policy, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.stderr_text;
  EXPECT_THAT(dry.stdout_text, HasSubstr("(dry run)"));
  ProcessResult real = Ctl(viewer, {"apply", "-f", policy});
  EXPECT_NE(real.exit_code, 0);
  EXPECT_THAT(real.stderr_text, HasSubstr("ApplyPolicy needs role operator"));
  ProcessResult delete_dry = Ctl(viewer, {"delete", "policy", "pi1-hold", "--dry-run"});
  EXPECT_THAT(delete_dry.stderr_text, Not(HasSubstr("needs role")));
  ProcessResult stored = Ctl(viewer, {"get", "policies", "-o", "json"});
  ASSERT_EQ(stored.exit_code, 0) << stored.stderr_text;
  EXPECT_THAT(stored.stdout_text, Not(HasSubstr("pi1-hold")));
}

// Token changes made with the local command reach the audit log, naming the OS user.
TEST_F(SecurityTest, LocalTokenCommandsAreAudited) {
  const std::string viewer = NewToken("watcher", "viewer");
  ProcessResult made = Tokens({"create", "ci", "--role", "viewer"});
  ASSERT_EQ(made.exit_code, 0) << made.stderr_text;
  ProcessResult revoked = Tokens({"revoke", "ci"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.stderr_text;
  ProcessResult missing = Tokens({"revoke", "nobody"});
  EXPECT_NE(missing.exit_code, 0);

  std::vector<std::string> seen;
  ProcessResult audit;
  const bool all = rxfleet::testing::WaitFor(
      [&] {
        audit = Ctl(viewer, {"get", "events", "--audit", "-o", "json"});
        if (audit.exit_code != 0) return false;
        const nlohmann::json parsed = nlohmann::json::parse(audit.stdout_text, nullptr, false);
        if (!parsed.is_object() || !parsed.contains("events")) return false;
        seen.clear();
        for (const auto& event : parsed["events"]) {
          const auto& record = event["audit"];
          seen.push_back(absl::StrCat(
              record.value("action", ""), " ", event["involvedObject"].value("name", ""), " ",
              record.value("resultCode", ""), " by ", record.value("actor", "")));
        }
        return seen.size() >= 4;
      },
      kCall);
  EXPECT_TRUE(all) << audit.stdout_text << audit.stderr_text;
  std::vector<std::string> local;
  for (const std::string& line : seen) {
    if (absl::StrContains(line, "by local administrator (OS user ")) local.push_back(line);
  }
  EXPECT_THAT(local,
              ::testing::ElementsAre(HasSubstr("CreateToken watcher OK"),
                                     HasSubstr("CreateToken ci OK"), HasSubstr("RevokeToken ci OK"),
                                     HasSubstr("RevokeToken nobody NOT_FOUND")));
  ProcessResult listed = Tokens({"list"});
  EXPECT_THAT(listed.stdout_text, HasSubstr("local administrator (OS user "));
}

// TLS failures are explained: which side refused which certificate, and what to check.
TEST_F(SecurityTest, TlsFailuresAreExplainedInPlainWords) {
  const std::string viewer = NewToken("watcher", "viewer");
  auto ctl = [&](std::vector<std::string> transport) {
    std::vector<std::string> argv = {BinaryPath("cli/rxfleetctl")};
    argv.insert(argv.end(), transport.begin(), transport.end());
    argv.insert(argv.end(), {"--token", viewer, "--timeout", "10s", "get", "hosts"});
    return RunProcess(argv, kCall, {"HOME=" + dir_.path().string()});
  };
  // The server's certificate is not signed by the CA the client trusts.
  ProcessResult wrong_ca = ctl({"--server", address_, "--ca-file", dir_.File("rogue/ca.crt")});
  EXPECT_NE(wrong_ca.exit_code, 0);
  EXPECT_THAT(wrong_ca.stderr_text, HasSubstr("does not trust the server's certificate"));
  EXPECT_THAT(wrong_ca.stderr_text, HasSubstr(dir_.File("rogue/ca.crt")));
  EXPECT_THAT(wrong_ca.stderr_text, Not(HasSubstr("Socket closed")));

  // The address connected to is not in the server's certificate: a second server whose
  // certificate names only "elsewhere".
  ProcessResult issued = RunProcess(
      {SourcePath("scripts/rxfleet-certs"), "--dir", dir_.File("tls"), "server", "elsewhere"},
      kCall);
  ASSERT_EQ(issued.exit_code, 0) << issued.stderr_text;
  auto other = ChildProcess::Start({BinaryPath("server/rxfleet-server"), "--listen", "127.0.0.1:0",
                                    "--db", dir_.File("other.db"), "--http-listen", "none",
                                    "--tls-cert", Tls("server-elsewhere.crt"), "--tls-key",
                                    Tls("server-elsewhere.key"), "--tls-client-ca", Tls("ca.crt")});
  ASSERT_TRUE(other.ok()) << other.status();
  const std::string other_address = ListenAddress(**other);
  ProcessResult mismatch = ctl({"--server", other_address, "--ca-file", Tls("ca.crt")});
  EXPECT_NE(mismatch.exit_code, 0);
  EXPECT_THAT(mismatch.stderr_text, HasSubstr("is for elsewhere, not for '127.0.0.1'"));
  (*other)->Terminate(absl::Seconds(10));

  // A plaintext client against the TLS server.
  ProcessResult plaintext = ctl({"--server", address_, "--insecure"});
  EXPECT_NE(plaintext.exit_code, 0);
  EXPECT_THAT(plaintext.stderr_text, HasSubstr("speaks TLS but this client connects in plaintext"));

  // A client certificate from a CA the server does not trust.
  ProcessResult refused =
      ctl({"--server", address_, "--ca-file", Tls("ca.crt"), "--cert-file",
           dir_.File("rogue/agent-host-a.crt"), "--key-file", dir_.File("rogue/agent-host-a.key")});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.stderr_text, HasSubstr("the server refused the client certificate"));
  EXPECT_THAT(refused.stderr_text, HasSubstr("--tls-client-ca"));

  // The agent's link log says the same about its refused certificate.
  std::unique_ptr<ChildProcess> agent = StartAgentWith(
      "host-a", dir_.File("rogue/agent-host-a.crt"), dir_.File("rogue/agent-host-a.key"));
  ASSERT_NE(agent, nullptr);
  auto logged = agent->WaitForLineContaining(
      Stream::kStderr, "the server refused the client certificate", absl::Seconds(120));
  EXPECT_TRUE(logged.ok()) << logged.status() << agent->Text(Stream::kStderr);
  agent->Terminate(absl::Seconds(15));
}

// A plaintext server behind a TLS client.
TEST(TlsDiagnosisTest, TlsClientAgainstAPlaintextServer) {
  TempDir dir{"rxfleet-tls-plain"};
  auto server =
      ChildProcess::Start({BinaryPath("server/rxfleet-server"), "--listen", "127.0.0.1:0", "--db",
                           dir.File("fleet.db"), "--http-listen", "none", "--insecure"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = ListenAddress(**server);
  ProcessResult r = RunProcess(
      {BinaryPath("cli/rxfleetctl"), "--server", address, "--timeout", "10s", "get", "hosts"},
      kCall, {"HOME=" + dir.path().string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_text, HasSubstr("does not speak TLS (was it started with --insecure?)"));
  (*server)->Terminate(absl::Seconds(10));
}

// Listing or revoking tokens on a mistyped --db path fails instead of creating an empty
// database that looks like "no tokens".
TEST_F(SecurityTest, TokensOnAMissingDatabaseFail) {
  const std::string missing = dir_.File("typo/server.db");
  for (const std::string verb : {"list", "revoke"}) {
    std::vector<std::string> argv = {BinaryPath("server/rxfleet-server"), "tokens", verb};
    if (verb == "revoke") argv.push_back("ops");
    argv.insert(argv.end(), {"--db", missing});
    ProcessResult r = RunProcess(argv, kCall);
    EXPECT_EQ(r.exit_code, 1) << verb;
    EXPECT_THAT(r.stderr_text, HasSubstr("no database at " + missing)) << verb;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.File("typo")));
}

// The real agent links over TLS with its own certificate; with another host's certificate it
// is refused and never registers.
TEST_F(SecurityTest, AgentProcessesLinkWithTheirOwnCertificateOnly) {
  std::unique_ptr<ChildProcess> good = StartAgent("host-a", "host-a");
  std::unique_ptr<ChildProcess> impostor = StartAgent("host-c", "host-b");
  ASSERT_NE(good, nullptr);
  ASSERT_NE(impostor, nullptr);
  auto denied = server_->WaitForLineContaining(
      Stream::kStderr, "Hello claims host_id 'host-c' but the client certificate is for 'host-b'",
      absl::Seconds(120));
  EXPECT_TRUE(denied.ok()) << denied.status();
  const std::string viewer = NewToken("watcher", "viewer");
  // Poll the API until host-a is connected (deadline 120 s).
  ProcessResult hosts;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  bool host_a_connected = false;
  while (!host_a_connected && absl::Now() < deadline) {
    hosts = Ctl(viewer, {"get", "hosts", "host-a", "-o", "json"});
    const nlohmann::json host = nlohmann::json::parse(hosts.stdout_text, nullptr, false);
    host_a_connected = hosts.exit_code == 0 && host.is_object() && host.contains("status") &&
                       host["status"].is_object() && host["status"].value("connected", false);
    if (!host_a_connected) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(host_a_connected) << hosts.stdout_text << hosts.stderr_text;
  hosts = Ctl(viewer, {"get", "hosts", "-o", "json"});
  ASSERT_EQ(hosts.exit_code, 0) << hosts.stderr_text;
  EXPECT_THAT(hosts.stdout_text, HasSubstr("host-a"));
  EXPECT_THAT(hosts.stdout_text, Not(HasSubstr("host-c")));
  good->Terminate(absl::Seconds(15));
  impostor->Terminate(absl::Seconds(15));
}

}  // namespace
}  // namespace rxfleet
