#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace rxfleet::server {

/// Maps an absl::Status to a grpc::Status at the API boundary: the codes have the same numbers
/// and meanings; the message is kept.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace rxfleet::server
