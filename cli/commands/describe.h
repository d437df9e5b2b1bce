#pragma once

#include <cstddef>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"
#include "cli/commands/get.h"

namespace rxfleet::cli {

/// How many of an object's most recent events describe shows.
inline constexpr size_t kDescribeEventCount = 20;

/// Options of `rxfleetctl describe host|adapter|policy NAME`.
struct DescribeOptions {
  ResourceKind kind = ResourceKind::kAdapter;
  /// Host name, HOST/ADAPTER, or policy name.
  std::string name;
};

/// Adds `describe` with the subcommands `host`, `adapter`, `policy` (plural aliases).
void AddDescribeCommand(CLI::App& root, SelectedCommand* selected);

/// NAME present; for adapters HOST/ADAPTER. InvalidArgument otherwise.
absl::Status ValidateDescribeOptions(const DescribeOptions& options);

/// Fetches the object (adapters through ExplainAdapter, for the provenance), what belongs to
/// it (a host's adapters) and its kDescribeEventCount most recent events, and prints them.
/// NOT_FOUND if the object does not exist.
absl::Status RunDescribe(const DescribeOptions& options, FleetClient& client,
                         const CommandContext& ctx);

}  // namespace rxfleet::cli
