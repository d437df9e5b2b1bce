#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"
#include "common/policy/policy.h"

namespace rxfleet::cli {

/// Options of `rxfleetctl apply -f FILE|- [--dry-run]`.
struct ApplyOptions {
  /// -f/--filename, repeatable: policy documents (YAML or JSON, one or many per file, kind
  /// RxAggPolicy); "-" reads standard input.
  std::vector<std::string> files;
  /// --dry-run: the server validates and reports the affected adapters, stores nothing.
  bool dry_run = false;
};

/// Adds `apply` to `root`.
void AddApplyCommand(CLI::App& root, SelectedCommand* selected);

/// At least one file; "-" at most once. InvalidArgument otherwise.
absl::Status ValidateApplyOptions(const ApplyOptions& options);

/// Reads and parses every file with common::ParsePolicyDocuments (strict: unknown fields,
/// wrong apiVersion/kind, a hold that is not a multiple of 32 µs, ... are InvalidArgument with
/// FILE:LINE:COLUMN), standard input named "<stdin>". Names must be unique across files.
/// InvalidArgument if the files hold no policy at all.
absl::StatusOr<std::vector<common::Policy>> ReadPolicyFiles(const std::vector<std::string>& files,
                                                            std::istream& stdin_stream);

/// Parses everything first (nothing is sent if any document is invalid), then applies the
/// policies in file order, printing "policy/NAME created|configured: N adapters affected" and
/// the affected adapters for each. A document's metadata.resourceVersion is sent as the
/// precondition (stale: ABORTED, exit 4). Stops at the first failed call; earlier policies
/// stay applied.
absl::Status RunApply(const ApplyOptions& options, FleetClient& client, const CommandContext& ctx);

}  // namespace rxfleet::cli
