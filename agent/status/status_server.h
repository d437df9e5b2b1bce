#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rxfleet/v1/local_status.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace rxfleet::agent {

/// Default path of the local status socket (systemd RuntimeDirectory=rxfleet).
inline constexpr char kDefaultStatusSocket[] = "/run/rxfleet/agent.sock";

/// Builds one GetStatus answer. Called on a gRPC callback thread; must not block (copy
/// snapshots, no device I/O) and must be thread-safe.
using StatusProvider = std::function<v1::GetStatusResponse(const v1::GetStatusRequest& request)>;

/// rxfleet.v1.LocalStatusService on a Unix domain socket (gRPC URI "unix:PATH"), for
/// `rxfleetctl --local status`. Read-only; access is controlled by the socket's file mode 0660
/// (owner and group) and the directory's permissions.
///
/// Start creates the socket's directory if missing (mode 0755), removes a stale socket left by
/// a dead agent, binds, and sets mode 0660. Destroying the server shuts it down (in-flight calls
/// finish) and removes the socket file.
class StatusServer {
 public:
  /// Errors (nothing is left behind on error):
  ///  - InvalidArgument: empty path, or longer than a Unix socket path can be (107 bytes);
  ///  - FailedPrecondition: the path exists and is not a socket, or another process is serving
  ///    on it (a live agent);
  ///  - PermissionDenied / Internal: the directory cannot be created, the stale socket cannot
  ///    be removed or the mode cannot be set (with the OS error text);
  ///  - Unavailable: gRPC could not bind the socket.
  static absl::StatusOr<std::unique_ptr<StatusServer>> Start(const std::string& socket_path,
                                                             StatusProvider provider);
  ~StatusServer();

  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  const std::string& socket_path() const { return socket_path_; }

 private:
  class Service;
  StatusServer(std::string socket_path, std::unique_ptr<Service> service,
               std::unique_ptr<grpc::Server> server);

  std::string socket_path_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace rxfleet::agent
