#pragma once

#include "absl/status/statusor.h"
#include "rxfleet/v1/local_status.pb.h"

namespace rxfleet::cli {

/// The agent's LocalStatusService, reached over its Unix socket (`rxfleetctl --local`).
/// The gRPC implementation is in grpc_clients.h; tests use a mock.
class LocalStatusClient {
 public:
  virtual ~LocalStatusClient() = default;

  /// Returns the agent's status. UNAVAILABLE if no agent listens on the socket.
  virtual absl::StatusOr<v1::GetStatusResponse> GetStatus(const v1::GetStatusRequest& request) = 0;
};

}  // namespace rxfleet::cli
