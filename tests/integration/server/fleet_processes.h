#pragma once

// rxfleet-server and rxfleet-agent (under rxfleet-emulate) as child processes, for the
// integration tests of tests/integration/server/ (fleet_test.cc, replicas_test.cc).

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::integration {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::LabPath;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::StartedServer;
using ::rxfleet::testing::StartServerProcess;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WaitFor;

inline grpc::ClientContext* WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

// rxfleet-server as a child process with its database in `dir`.
class ServerProcess {
 public:
  explicit ServerProcess(const TempDir& dir) : db_(dir.File("server.db")) {}
  // On a database given by path or URI (a PostgreSQL database).
  explicit ServerProcess(std::string db) : db_(std::move(db)) {}

  // Starts on `port` (0 = any free port the first time, then the same port again), with
  // `extra_args` after the default flags (e.g. {"--lease-ttl", "3s"}).
  bool Start(const std::vector<std::string>& extra_args = {}) {
    const std::string listen = absl::StrCat("127.0.0.1:", port_);
    std::vector<std::string> argv = {BinaryPath("server/rxfleet-server"),
                                     "--insecure",
                                     "--listen",
                                     listen,
                                     "--db",
                                     db_,
                                     "--http-listen",
                                     "none",
                                     "--push-debounce",
                                     "50ms",
                                     "--stale-after",
                                     "1m",
                                     "--drain-timeout",
                                     "2s"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    absl::StatusOr<StartedServer> started = StartServerProcess(argv);
    if (!started.ok() || started->port <= 0) return false;
    port_ = started->port;
    child_ = std::move(started->child);
    channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    fleet_ = v1::FleetService::NewStub(channel_);
    return true;
  }

  // SIGTERM; returns the exit code.
  int Stop() {
    if (child_ == nullptr) return -1;
    const int code = child_->Terminate(absl::Seconds(10));
    stderr_ += child_->Text(Stream::kStderr);
    child_.reset();
    return code;
  }

  // True while the process runs (false once it has exited, e.g. crashed).
  bool Alive() { return child_ != nullptr && !child_->Wait(absl::ZeroDuration()).ok(); }

  void Kill() {
    child_->Signal(SIGKILL);
    child_->Wait(absl::Seconds(10)).IgnoreError();
    child_.reset();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int port() const { return port_; }
  const std::string& db() const { return db_; }
  v1::FleetService::Stub& fleet() { return *fleet_; }
  std::string log() const { return stderr_ + (child_ ? child_->Text(Stream::kStderr) : ""); }

  absl::StatusOr<v1::ApplyPolicyResponse> Apply(const v1::Policy& policy) {
    v1::ApplyPolicyRequest request;
    *request.mutable_policy() = policy;
    v1::ApplyPolicyResponse response;
    grpc::ClientContext context;
    const grpc::Status status = fleet_->ApplyPolicy(WithDeadline(&context), request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response;
  }

  std::optional<v1::Host> Host(const std::string& id) {
    v1::GetHostRequest request;
    request.set_name(id);
    v1::Host host;
    grpc::ClientContext context;
    if (!fleet_->GetHost(WithDeadline(&context), request, &host).ok()) return std::nullopt;
    return host;
  }

  std::optional<v1::ExplainAdapterResponse> Explain(const std::string& host,
                                                    const std::string& adapter) {
    v1::ExplainAdapterRequest request;
    request.set_host_id(host);
    request.set_name(adapter);
    v1::ExplainAdapterResponse response;
    grpc::ClientContext context;
    if (!fleet_->ExplainAdapter(WithDeadline(&context), request, &response).ok()) {
      return std::nullopt;
    }
    return response;
  }

  // The host is connected and has ACKed `version`.
  bool Acked(const std::string& id, uint64_t version) {
    std::optional<v1::Host> host = Host(id);
    return host.has_value() && host->status().connected() &&
           host->status().last_acked_version() == version;
  }

 private:
  const std::string db_;
  int port_ = 0;
  std::string stderr_;
  std::unique_ptr<ChildProcess> child_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::FleetService::Stub> fleet_;
};

// rxfleet-agent --standalone --server under rxfleet-emulate with one lab.
class AgentProcess {
 public:
  AgentProcess(const TempDir& dir, std::string host_id, std::string lab, std::string board)
      : dir_(dir.path() / host_id),
        host_id_(std::move(host_id)),
        lab_(std::move(lab)),
        board_(std::move(board)) {
    std::filesystem::create_directories(dir_ / "tmp");
  }

  // Starts streaming to `server` (one address or a comma-separated list), with `extra_args`
  // after the default agent flags (e.g. {"--probe-target", "none"}).
  bool Start(const std::string& server, const std::vector<std::string>& extra_args = {}) {
    ++runs_;
    std::vector<std::string> argv = {EmulatorPath(),
                                     "--lab",
                                     LabPath(lab_),
                                     "--state-out",
                                     StatePath(),
                                     "--timeout",
                                     "600",
                                     "--",
                                     BinaryPath("agent/rxfleet-agent"),
                                     "--standalone",
                                     "--server",
                                     server,
                                     "--insecure",
                                     "--host-id",
                                     host_id_,
                                     "--label",
                                     "board=" + board_,
                                     "--state-dir",
                                     (dir_ / "state").string(),
                                     "--policy-file",
                                     (dir_ / "policies.d").string(),
                                     "--status-socket",
                                     "none",
                                     "--metrics-address",
                                     "none",
                                     "--reconcile-period",
                                     "200ms"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> child =
        ChildProcess::Start(argv, {"TMPDIR=" + (dir_ / "tmp").string()});
    if (!child.ok()) return false;
    child_ = *std::move(child);
    return true;
  }

  // SIGTERM through the emulator; returns the state file the emulator wrote.
  nlohmann::json Stop() {
    log_ += child_ != nullptr ? child_->Text(Stream::kStderr) : "";
    if (child_ != nullptr) child_->Terminate(absl::Seconds(15));
    child_.reset();
    absl::StatusOr<nlohmann::json> state = ReadJsonFile(StatePath());
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *state : nlohmann::json();
  }

  ChildProcess& child() { return *child_; }
  std::string log() const { return log_ + (child_ ? child_->Text(Stream::kStderr) : ""); }
  const std::string& host_id() const { return host_id_; }

 private:
  std::string StatePath() const { return (dir_ / absl::StrCat("state-", runs_, ".json")).string(); }

  const std::filesystem::path dir_;
  const std::string host_id_, lab_, board_;
  int runs_ = 0;
  std::string log_;
  std::unique_ptr<ChildProcess> child_;
};

// The hold (µs) in the RX aggregation register of the lab's only device, from a state file.
inline int64_t RegisterHold(const nlohmann::json& state) {
  return state.at("devices").at(0).at("hold_us").get<int64_t>();
}

// Holds written to the register during the run, in order.
inline std::vector<int64_t> WrittenHolds(const nlohmann::json& state) {
  std::vector<int64_t> holds;
  for (const nlohmann::json& t : state.at("devices").at(0).at("transfers")) {
    if (t.at("direction") != "out" || t.at("value").is_null()) continue;
    uint32_t word = 0;
    const std::string hex = t.at("value").get<std::string>();
    if (!absl::SimpleHexAtoi(hex, &word)) continue;
    holds.push_back(((word >> 8) & 0xff) * 32);
  }
  return holds;
}

inline v1::Policy HoldPolicy(const std::string& name, uint32_t hold_us,
                             const std::map<std::string, std::string>& labels,
                             std::vector<v1::UsbSpeed> speeds) {
  v1::Policy policy;
  policy.mutable_metadata()->set_name(name);
  for (const auto& [k, v] : labels) {
    (*policy.mutable_spec()->mutable_selector()->mutable_match_labels())[k] = v;
  }
  for (v1::UsbSpeed s : speeds) policy.mutable_spec()->mutable_selector()->add_usb_speeds(s);
  policy.mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  return policy;
}

// The observed hold of a host's only adapter as the server has it from the agent.
inline std::optional<uint32_t> ObservedHold(ServerProcess& server, const std::string& host,
                                            const std::string& adapter) {
  std::optional<v1::ExplainAdapterResponse> explained = server.Explain(host, adapter);
  if (!explained.has_value() || !explained->adapter().status().has_observed()) return std::nullopt;
  return explained->adapter().status().observed().decoded().hold_us();
}

}  // namespace rxfleet::integration
