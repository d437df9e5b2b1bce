#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Options of `rxfleetctl diff -f FILE|-`.
struct DiffOptions {
  /// -f/--filename, repeatable; "-" reads standard input. Same documents as apply.
  std::vector<std::string> files;
};

/// The policy as a user would write it (an RxAggPolicy YAML document from
/// common::PolicyToYaml), without the server's resource version. InvalidArgument when the
/// server's policy does not convert.
absl::StatusOr<std::string> PolicyDocument(const v1::Policy& policy);

/// Adds `diff` to `root`.
void AddDiffCommand(CLI::App& root, SelectedCommand* selected);

/// At least one file; "-" at most once. InvalidArgument otherwise.
absl::Status ValidateDiffOptions(const DiffOptions& options);

/// For every policy in the files: the stored policy (GetPolicy; none if NOT_FOUND) against the
/// policy as ApplyPolicy with dry_run would store it, as a line diff of the policy documents
/// (metadata.resourceVersion left out), then the adapters whose effective settings would change
/// with before -> after per field. Nothing is stored. Exit 0 whether or not anything differs.
absl::Status RunDiff(const DiffOptions& options, FleetClient& client, const CommandContext& ctx);

}  // namespace rxfleet::cli
