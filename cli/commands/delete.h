#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Options of `rxfleetctl delete policy NAME` and `rxfleetctl delete experiment NAME`.
struct DeleteOptions {
  /// Policy or experiment name.
  std::string name;
  /// --resource-version: delete only if the stored policy still has this version (else
  /// ABORTED, exit 4). Empty = unconditional.
  std::string resource_version;
  /// --dry-run (policies only): report the adapters that would change, delete nothing.
  bool dry_run = false;
  /// Resource type: "policy" or "experiment".
  std::string kind = "policy";
};

/// Adds `delete policy NAME` (alias `policies`) and `delete experiment NAME` (alias
/// `experiments`) to `root`.
void AddDeleteCommand(CLI::App& root, SelectedCommand* selected);

/// NAME present. InvalidArgument otherwise.
absl::Status ValidateDeleteOptions(const DeleteOptions& options);

/// Deletes the policy and prints "policy/NAME deleted" with the adapters whose settings
/// change (they fall back to lower-precedence policies or the built-in default); or deletes
/// the ended experiment with its metric windows and prints "experiment/NAME deleted".
/// NOT_FOUND (exit 3) for an unknown name, ABORTED (exit 4) for a stale resource version,
/// FAILED_PRECONDITION for an experiment that still runs.
absl::Status RunDelete(const DeleteOptions& options, FleetClient& client,
                       const CommandContext& ctx);

}  // namespace rxfleet::cli
