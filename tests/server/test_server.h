#pragma once

// An in-process rxfleet-server on loopback for tests: a real FleetServer (gRPC on a free port,
// SQLite in a temporary directory, HTTP off unless asked), a FleetService client, and helpers
// to wait for conditions with a deadline (no sleeps for synchronisation).

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "server/fleet_server.h"
#include "tests/support/paths.h"

namespace rxfleet::server::testing {

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns the last result.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(20));

class TestServer {
 public:
  /// Starts a server with `options` (db_path and listen filled in when empty: a database in a
  /// fresh temporary directory and 127.0.0.1:0; push debounce 20 ms unless set).
  static std::unique_ptr<TestServer> Start(FleetServerOptions options = {});

  /// Stops the server (graceful), keeping the database for Restart().
  void Stop();
  /// Starts again on the same port and database. Returns false if it could not.
  bool Restart();

  FleetServer& server() { return *server_; }
  const FleetServerOptions& options() const { return options_; }
  const std::string& db_path() const { return options_.db_path; }
  /// "127.0.0.1:PORT".
  std::string address() const;
  v1::FleetService::Stub& fleet() { return *fleet_; }

  /// ApplyPolicy of a policy setting only the hold; InvalidArgument etc. as the server says.
  absl::StatusOr<v1::ApplyPolicyResponse> ApplyHold(const std::string& name, uint32_t hold_us,
                                                    const v1::AdapterSelector& selector = {},
                                                    const std::string& resource_version = "");
  absl::StatusOr<v1::Host> GetHost(const std::string& host_id);

 private:
  TestServer() = default;
  bool StartServer();

  std::unique_ptr<rxfleet::testing::TempDir> dir_;
  FleetServerOptions options_;
  int port_ = 0;
  std::unique_ptr<FleetServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::FleetService::Stub> fleet_;
};

/// grpc::Status -> absl::Status (same codes).
absl::Status ToAbsl(const grpc::Status& status);

}  // namespace rxfleet::server::testing
