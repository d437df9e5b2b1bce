#pragma once

// The fleet of the experiment and tuning acceptance runs, every part real: rxfleet-server on
// a temporary SQLite file and one rxfleet-agent per host under rxfleet-emulate with the host's
// lab (tests/labs/), labelled board=<board>, talking to the server over loopback. Tests derive
// from EmulatedFleetTest and read the fleet through fleet_ (FleetService) or rxfleetctl.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::testing {

/// A 10-second deadline on `context`; returns it.
inline grpc::ClientContext* WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

/// One emulated host: its id, lab (tests/labs/<lab>.yaml), board label, the emulator running
/// its agent, and the emulator's state file (registers at exit).
struct EmulatedHost {
  std::string id;
  std::string lab;
  std::string board;
  std::unique_ptr<ChildProcess> process;
  std::string state_file;
};

class EmulatedFleetTest : public ::testing::Test {
 protected:
  /// `prefix` names the temporary directory; `hosts` are started by SetUp.
  EmulatedFleetTest(std::string_view prefix, std::vector<EmulatedHost> hosts)
      : dir_(prefix), hosts_(std::move(hosts)) {}

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ChildProcess>> server = ChildProcess::Start(
        {BinaryPath("server/rxfleet-server"), "--insecure", "--listen", "127.0.0.1:0", "--db",
         dir_.File("server.db"), "--http-listen", "none", "--push-debounce", "50ms"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::string> line =
        server_->WaitForLineContaining(Stream::kStderr, "(port ", absl::Seconds(30));
    ASSERT_TRUE(line.ok()) << server_->Text(Stream::kStderr);
    const size_t at = line->find("(port ") + 6;
    int port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(line->substr(at, line->find(',', at) - at), &port)) << *line;
    address_ = absl::StrCat("127.0.0.1:", port);
    fleet_ = v1::FleetService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));

    for (EmulatedHost& host : hosts_) {
      const std::filesystem::path home = dir_.path() / host.id;
      std::filesystem::create_directories(home / "tmp");
      host.state_file = (home / "state.json").string();
      absl::StatusOr<std::unique_ptr<ChildProcess>> agent =
          ChildProcess::Start({EmulatorPath(),
                               "--lab",
                               LabPath(host.lab),
                               "--state-out",
                               host.state_file,
                               "--timeout",
                               "600",
                               "--",
                               BinaryPath("agent/rxfleet-agent"),
                               "--standalone",
                               "--server",
                               address_,
                               "--insecure",
                               "--host-id",
                               host.id,
                               "--label",
                               "board=" + host.board,
                               "--state-dir",
                               (home / "state").string(),
                               "--policy-file",
                               (home / "policies.d").string(),
                               "--status-socket",
                               "none",
                               "--metrics-address",
                               "none",
                               "--probe-target",
                               "none",
                               "--reconcile-period",
                               "200ms"},
                              {"TMPDIR=" + (home / "tmp").string()});
      ASSERT_TRUE(agent.ok()) << agent.status();
      host.process = *std::move(agent);
    }
  }

  void TearDown() override {
    for (EmulatedHost& host : hosts_) {
      if (host.process != nullptr) host.process->Terminate(absl::Seconds(15));
    }
    if (server_ != nullptr) server_->Terminate(absl::Seconds(15));
  }

  /// The server's and every running agent's stderr, for failure messages.
  std::string Logs() const {
    std::string logs = server_ ? "--- server\n" + server_->Text(Stream::kStderr) : "";
    for (const EmulatedHost& host : hosts_) {
      if (host.process) {
        absl::StrAppend(&logs, "--- ", host.id, "\n", host.process->Text(Stream::kStderr));
      }
    }
    return logs;
  }

  /// The adapters `label_selector` matches (empty when the call fails).
  std::vector<v1::Adapter> Adapters(const std::string& label_selector = "") {
    v1::ListAdaptersRequest request;
    request.set_label_selector(label_selector);
    v1::ListAdaptersResponse response;
    grpc::ClientContext context;
    if (!fleet_->ListAdapters(WithDeadline(&context), request, &response).ok()) return {};
    return {response.adapters().begin(), response.adapters().end()};
  }

  /// Every adapter matched by `label_selector` (at least `count`) observes `hold_us`.
  bool AllObserve(const std::string& label_selector, size_t count, uint32_t hold_us) {
    const std::vector<v1::Adapter> adapters = Adapters(label_selector);
    if (adapters.size() < count) return false;
    for (const v1::Adapter& a : adapters) {
      if (!a.status().has_observed() || a.status().observed().decoded().hold_us() != hold_us) {
        return false;
      }
    }
    return true;
  }

  TempDir dir_;
  std::unique_ptr<ChildProcess> server_;
  std::string address_;
  std::unique_ptr<v1::FleetService::Stub> fleet_;
  std::vector<EmulatedHost> hosts_;
};

}  // namespace rxfleet::testing
