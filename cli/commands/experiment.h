#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

// `rxfleetctl experiment create|report|stop|promote`: the A/B experiments of RX aggregation
// settings the server runs (docs/EXPERIMENTS.md). Listing and describing experiments are
// `get experiments` and `describe experiment`.

/// Options of `experiment create -f FILE|- [--dry-run]`.
struct ExperimentCreateOptions {
  /// -f/--filename, repeatable: Experiment documents (YAML or JSON, `kind: Experiment`, one
  /// or many per file); "-" reads standard input.
  std::vector<std::string> files;
  /// --dry-run: the server validates and lists the eligible adapters, stores nothing.
  bool dry_run = false;
};

/// Options of `experiment report NAME [--segment k=v,...] [-o table|json|yaml]`.
struct ExperimentReportOptions {
  std::string name;
  /// --segment: only segments whose values include these, e.g. "usb_speed=high".
  std::string segment;
  /// -o/--output: table (the server's text rendering), json or yaml (the report message).
  std::string output = "table";
};

/// Options of `experiment stop NAME [--reason TEXT] [--resource-version V]`.
struct ExperimentStopOptions {
  std::string name;
  std::string reason;
  std::string resource_version;
};

/// Options of `experiment promote NAME ARM [--segment k=v,...] [--name POLICY]
/// [--priority P] [--dry-run] [--yes]`.
struct ExperimentPromoteOptions {
  std::string name;
  std::string arm;
  /// --segment: restrict the policy to one segment; its values become selector terms.
  std::string segment;
  /// --name: policy to write; empty = the server's default `<experiment>-<arm>`.
  std::string policy_name;
  /// --priority: priority of the policy; unset = the experiment's priority.
  std::optional<int32_t> priority;
  /// --dry-run: show what would be written and touched; write nothing.
  bool dry_run = false;
  /// --yes: write without asking.
  bool yes = false;
};

/// Adds `experiment` with `create`, `report`, `stop` and `promote` to `root`.
void AddExperimentCommand(CLI::App& root, SelectedCommand* selected);

/// Parses "--segment" text "usb_speed=high,board=pi1" into a map; empty text is an empty map.
/// InvalidArgument naming --segment for a term without '=', an empty key or value, or a key
/// given twice.
absl::StatusOr<std::map<std::string, std::string>> ParseSegment(std::string_view text);

/// Reads every file (strict parser common::ParseExperimentDocuments: unknown fields, wrong
/// apiVersion/kind, bad durations, holds and metrics fail with FILE:LINE:COLUMN), then creates
/// each experiment in order, printing "experiment/NAME created[ (dry run)]: N eligible
/// adapters" and the eligible adapters. Nothing is sent if any document is invalid; the first
/// failed call stops the run (ALREADY_EXISTS: exit 4).
absl::Status RunExperimentCreate(const ExperimentCreateOptions& options, FleetClient& client,
                                 const CommandContext& ctx);

/// Prints the report: table = ExperimentReport.text as the server rendered it (Internal if the
/// server sent none); json/yaml = the report message.
absl::Status RunExperimentReport(const ExperimentReportOptions& options, FleetClient& client,
                                 const CommandContext& ctx);

/// Stops the experiment and prints its phase; adapters return to their policies.
absl::Status RunExperimentStop(const ExperimentStopOptions& options, FleetClient& client,
                               const CommandContext& ctx);

/// Asks the server for the promotion as a dry run and prints it: the policy that would be
/// written (a line diff against the stored policy of that name, or the whole document when
/// new) and the adapters whose settings would change once the experiment ends. Then, unless
/// --dry-run: with --yes, or after "y"/"yes" at a prompt when stdin is a terminal, writes it;
/// otherwise FailedPrecondition (exit 1) saying to pass --yes.
absl::Status RunExperimentPromote(const ExperimentPromoteOptions& options, FleetClient& client,
                                  const CommandContext& ctx);

}  // namespace rxfleet::cli
