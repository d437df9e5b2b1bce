#pragma once

#include <memory>
#include <stop_token>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/client/connection.h"
#include "cli/client/fleet_client.h"
#include "cli/client/local_status_client.h"

namespace rxfleet::cli {

/// Creates a FleetService client for `settings`: grpc::SslCredentials built from the TLS files
/// when settings.tls, else a plaintext channel; every unary call gets the deadline
/// settings.timeout and, with a token, `authorization: Bearer TOKEN` metadata. Calls in flight
/// are cancelled when `stop` is triggered.
/// Errors: InvalidArgument naming a TLS file that cannot be read. Connection failures surface
/// on the first call as UNAVAILABLE / DEADLINE_EXCEEDED with a message that names the server
/// address and where it came from.
absl::StatusOr<std::unique_ptr<FleetClient>> ConnectFleet(const ConnectionSettings& settings,
                                                          std::stop_token stop);

/// Creates a LocalStatusService client on the agent's Unix socket `socket_path` (plaintext;
/// access is controlled by the socket's file mode) with per-call deadline `timeout`.
/// Connection failures surface on the first call as UNAVAILABLE naming the socket.
std::unique_ptr<LocalStatusClient> ConnectLocalStatus(std::string_view socket_path,
                                                      absl::Duration timeout, std::stop_token stop);

}  // namespace rxfleet::cli
