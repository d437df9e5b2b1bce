#pragma once

// An in-process rxfleet-server on loopback for tests: a real FleetServer (gRPC on a free port,
// SQLite in a temporary directory, HTTP off unless asked), a FleetService client, and helpers
// to wait for conditions with a deadline (no sleeps for synchronisation).

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "server/fleet_server.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::server::testing {

using ::rxfleet::testing::WaitFor;

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

/// A protocol-level agent for server tests: one AgentService.Connect stream, a reader thread
/// collecting ServerMessages, and helpers to send Hello, inventories and ACK/NACKs. Not the
/// real agent (see agent/link); it does exactly what a test tells it.
class TestAgent {
 public:
  /// Opens a stream to `address` (nothing is sent yet).
  explicit TestAgent(const std::string& address);
  /// Cancels the stream and joins the reader.
  ~TestAgent();

  bool Send(const v1::AgentMessage& message);
  /// Hello for `host_id` (labels board=`board`, metrics address "<host_id>:9477"), then an
  /// inventory of `adapters`.
  bool Connect(const std::string& host_id, const std::vector<v1::Adapter>& adapters = {},
               const std::string& board = "pi5");
  bool Ack(const v1::PolicyBundle& bundle);
  bool Nack(const v1::PolicyBundle& bundle, const std::string& detail);

  /// Messages received so far.
  std::vector<v1::ServerMessage> received() const;
  /// The newest bundle received, if any.
  std::optional<v1::PolicyBundle> last_bundle() const;
  /// Waits until a bundle with version >= `version` arrived; returns it.
  std::optional<v1::PolicyBundle> WaitForBundle(uint64_t version,
                                                absl::Duration timeout = absl::Seconds(20));
  /// True once the server ended the stream; then status() is its final status.
  bool ended() const;
  /// Waits for the end of the stream and returns its status (DEADLINE_EXCEEDED if it did not
  /// end in time).
  grpc::Status WaitForEnd(absl::Duration timeout = absl::Seconds(20));
  /// After the end: the first value of the server's trailing metadata `key`, if sent.
  std::optional<std::string> TrailingMetadata(const std::string& key) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream_;
  mutable absl::Mutex mu_;
  std::vector<v1::ServerMessage> received_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, std::string> trailers_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

/// An adapter as an agent reports it: chip rtl8922au (0bda:8912, layout v3), `speed`, state
/// APPLIED, desired and observed hold `hold_us` (observed only when `observed` is set).
v1::Adapter ReportedAdapter(const std::string& id, v1::UsbSpeed speed, uint32_t hold_us,
                            bool observed = true);

/// grpc::Status -> absl::Status (same codes).
absl::Status ToAbsl(const grpc::Status& status);

/// Sets a 20 s deadline on `context` and returns it, for one unary call of a test.
inline grpc::ClientContext* Deadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  return context;
}

}  // namespace rxfleet::server::testing
