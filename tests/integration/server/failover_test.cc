// Server replicas: rxfleet-agent (under rxfleet-emulate) started with two rxfleet-server
// processes in --server connects to one; when that one dies (kill -9) it reconnects to the
// other and ACKs that server's bundle; when the other drains (SIGTERM) while the first is back
// on its port, it moves back.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::StartedServer;
using ::rxfleet::testing::StartServerProcess;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WaitFor;
using ::testing::HasSubstr;

grpc::ClientContext* WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

// rxfleet-server as a child process (--insecure) with its own database.
class ServerProcess {
 public:
  ServerProcess(const TempDir& dir, const std::string& name)
      : db_(dir.File(absl::StrCat(name, ".db"))) {}

  // Starts on the port of the previous run (any free port the first time).
  bool Start() {
    absl::StatusOr<StartedServer> started =
        StartServerProcess({BinaryPath("server/rxfleet-server"), "--insecure", "--listen",
                            absl::StrCat("127.0.0.1:", port_), "--db", db_, "--http-listen", "none",
                            "--push-debounce", "20ms", "--drain-timeout", "2s"});
    if (!started.ok() || started->port <= 0) return false;
    port_ = started->port;
    child_ = std::move(started->child);
    fleet_ = v1::FleetService::NewStub(
        grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    return true;
  }
  void Kill() {
    log_ += child_->Text(Stream::kStderr);
    child_->Signal(SIGKILL);
    child_->Wait(absl::Seconds(20)).IgnoreError();
    child_.reset();
  }
  // SIGTERM (the drain); the exit code.
  int Stop() {
    log_ += child_->Text(Stream::kStderr);
    const int code = child_->Terminate(absl::Seconds(20));
    child_.reset();
    return code;
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string log() const { return log_ + (child_ ? child_->Text(Stream::kStderr) : ""); }

  absl::StatusOr<uint64_t> ApplyHold(const std::string& name, uint32_t hold_us) {
    v1::ApplyPolicyRequest request;
    request.mutable_policy()->mutable_metadata()->set_name(name);
    request.mutable_policy()->mutable_spec()->mutable_settings()->set_hold_us(hold_us);
    v1::ApplyPolicyResponse response;
    grpc::ClientContext context;
    const grpc::Status status = fleet_->ApplyPolicy(WithDeadline(&context), request, &response);
    if (!status.ok()) return absl::InternalError(status.error_message());
    return response.bundle_version();
  }
  // The host is connected here and has ACKed `version`.
  bool Acked(const std::string& host_id, uint64_t version) {
    if (child_ == nullptr) return false;
    v1::GetHostRequest request;
    request.set_name(host_id);
    v1::Host host;
    grpc::ClientContext context;
    if (!fleet_->GetHost(WithDeadline(&context), request, &host).ok()) return false;
    return host.status().connected() && host.status().last_acked_version() == version;
  }

 private:
  const std::string db_;
  int port_ = 0;
  std::string log_;
  std::unique_ptr<ChildProcess> child_;
  std::unique_ptr<v1::FleetService::Stub> fleet_;
};

TEST(FailoverTest, TheAgentMovesToTheOtherServerAndAcksItsBundle) {
  TempDir dir("rxfleet-failover");
  ServerProcess a(dir, "a");
  ServerProcess b(dir, "b");
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  // Different bundles on the two (separate databases): version 2 on a, 3 on b.
  absl::StatusOr<uint64_t> version_a = a.ApplyHold("hold-64", 64);
  ASSERT_TRUE(version_a.ok()) << version_a.status();
  ASSERT_TRUE(b.ApplyHold("hold-96", 96).ok());
  absl::StatusOr<uint64_t> version_b = b.ApplyHold("hold-128", 128);
  ASSERT_TRUE(version_b.ok()) << version_b.status();
  ASSERT_NE(*version_a, *version_b);

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
                           "--server",
                           absl::StrCat(a.address(), ",", b.address()),
                           "--insecure",
                           "--host-id",
                           "pi5-replicas",
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
  const auto agent_log = [&] { return (*agent)->Text(Stream::kStderr); };

  // It starts at a random entry; whichever it is serves it.
  ASSERT_TRUE(WaitFor(
      [&] { return a.Acked("pi5-replicas", *version_a) || b.Acked("pi5-replicas", *version_b); },
      absl::Seconds(90)))
      << agent_log() << a.log() << b.log();
  const bool on_a = a.Acked("pi5-replicas", *version_a);
  ServerProcess& first = on_a ? a : b;
  ServerProcess& other = on_a ? b : a;
  const uint64_t first_version = on_a ? *version_a : *version_b;
  const uint64_t other_version = on_a ? *version_b : *version_a;

  // The server in use dies without a word; the agent moves to the other and ACKs its bundle.
  first.Kill();
  ASSERT_TRUE(
      WaitFor([&] { return other.Acked("pi5-replicas", other_version); }, absl::Seconds(90)))
      << agent_log() << other.log();
  EXPECT_THAT(agent_log(), HasSubstr(absl::StrCat("connected to ", other.address())));
  EXPECT_THAT(agent_log(), HasSubstr(absl::StrCat("at ", other.address())));

  // The first one is back on its port; the other drains: the agent moves back (the list wraps).
  ASSERT_TRUE(first.Start()) << first.log();
  EXPECT_EQ(other.Stop(), 0) << other.log();
  ASSERT_TRUE(
      WaitFor([&] { return first.Acked("pi5-replicas", first_version); }, absl::Seconds(90)))
      << agent_log() << first.log();
  (*agent)->Terminate(absl::Seconds(15));
  first.Stop();
}

// Usage errors of the list stop the agent before it starts anything.
TEST(FailoverTest, ABadServerListIsAUsageError) {
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1:7443,,127.0.0.1:7444", "entry 2 is empty"},
           {"127.0.0.1:7443,127.0.0.1:7443", "already in the list"},
           {"127.0.0.1:7443,127.0.0.1:99999", "port must be a number"},
           {"127.0.0.1:7443,127.0.0.1:0", "port 0"}}) {
    ::rxfleet::testing::ProcessResult run = ::rxfleet::testing::RunProcess(
        {BinaryPath("agent/rxfleet-agent"), "--server", list, "--insecure"}, absl::Seconds(30));
    EXPECT_EQ(run.exit_code, 2) << list << "\n" << run.stderr_text;
    EXPECT_THAT(run.stderr_text, HasSubstr(message)) << list;
    EXPECT_THAT(run.stderr_text, HasSubstr("--server: ")) << list;
  }
}

}  // namespace
}  // namespace rxfleet
