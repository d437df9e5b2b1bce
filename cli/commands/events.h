#pragma once

#include <cstddef>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Options of `rxfleetctl get events [--audit]`.
struct GetEventsOptions {
  /// --audit: the audit log (who changed what through the API) instead of fleet events.
  bool audit = false;
  /// --limit: the newest N events, [1, 10000].
  size_t limit = 500;
  /// -o/--output: table, wide, json, yaml, name.
  std::string output = "table";
};

/// Adds `events` (alias `event`) under the existing `get` subcommand of `root`.
void AddGetEventsCommand(CLI::App& root, SelectedCommand* selected);

/// Lists the newest events, oldest first. Table columns: fleet events TIME, TYPE, REASON,
/// OBJECT, MESSAGE; audit events TIME, ACTOR, ACTION, OBJECT, VERSIONS (old -> new), RESULT.
/// An empty list prints "No resources found." on stderr and succeeds.
absl::Status RunGetEvents(const GetEventsOptions& options, FleetClient& client,
                          const CommandContext& ctx);

}  // namespace rxfleet::cli
