#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/local_status_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Options of `rxfleetctl --local status`.
struct StatusOptions {
  /// -o/--output: table, json or yaml (the GetStatusResponse).
  std::string output = "table";
  /// --include-gone: also show unplugged adapters still in the agent's grace period.
  bool include_gone = false;
};

/// Adds `status` to `root`. It always talks to the agent on this host over its Unix socket
/// (the global --local-socket, default /run/rxfleet/agent.sock); no server is needed.
void AddStatusCommand(CLI::App& root, SelectedCommand* selected);

/// Checks -o. InvalidArgument otherwise.
absl::Status ValidateStatusOptions(const StatusOptions& options);

/// Reads the agent's status and prints it. UNAVAILABLE (exit 1) if no agent answers.
absl::Status RunStatus(const StatusOptions& options, LocalStatusClient& client,
                       const CommandContext& ctx);

}  // namespace rxfleet::cli
