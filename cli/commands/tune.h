#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

// `rxfleetctl tune create|get|describe|approve|stop|delete`: hold auto-tuning (kind
// HoldTuning, docs/TUNING-DESIGN.md). Per segment the server searches candidate
// holds against the segment's current hold and proposes the winner; `approve` writes it as a
// policy. Names are shared with experiments. Messages name the tuning as "holdtuning/NAME".

/// Options of `tune create -f FILE|- [--dry-run]`.
struct TuneCreateOptions {
  /// -f/--filename: one HoldTuning document (YAML or JSON); "-" reads standard input.
  std::string file;
  /// --dry-run: the server validates and counts the eligible adapters, stores nothing.
  bool dry_run = false;
};

/// Options of `tune get [NAME] [-o table|wide|json|yaml|name]`.
struct TuneGetOptions {
  /// Empty: list every tuning.
  std::string name;
  std::string output = "table";
};

/// Options of `tune describe NAME`.
struct TuneDescribeOptions {
  std::string name;
};

/// Options of `tune approve NAME [--segment KEY=VALUE ...] [--dry-run] [--resource-version V]`.
struct TuneApproveOptions {
  std::string name;
  /// --segment, repeatable, each "key=value" or "k=v,k2=v2"; together they name one segment
  /// (all keys of the tuning). None: every segment with a proposal.
  std::vector<std::string> segment;
  bool dry_run = false;
  std::string resource_version;
};

/// Options of `tune stop NAME [--reason TEXT] [--resource-version V]`.
struct TuneStopOptions {
  std::string name;
  std::string reason;
  std::string resource_version;
};

/// Options of `tune delete NAME [--resource-version V]`.
struct TuneDeleteOptions {
  std::string name;
  std::string resource_version;
};

/// Adds `tune` (alias `tuning`) with its verbs to `root`.
void AddTuneCommand(CLI::App& root, SelectedCommand* selected);

/// Reads the file with tuning::ParseHoldTuning (strict: FILE:LINE:COLUMN for malformed YAML,
/// unknown fields, bad holds, metrics, durations, budgets; nothing is sent then), sends
/// CreateHoldTuning with the document's values all explicit (tuning::HoldTuningToProto) and
/// prints "holdtuning/NAME created[ (dry run)]: N eligible adapters in S segments" and, when
/// the server reports segments, a SEGMENT/ADAPTERS table. ALREADY_EXISTS (also a name taken
/// by an experiment): exit 4.
absl::Status RunTuneCreate(const TuneCreateOptions& options, FleetClient& client,
                           const CommandContext& ctx);

/// One tuning (GetHoldTuning) or all (ListHoldTunings, every page): the table of
/// PrintHoldTuningTable (wide: more columns), -o json|yaml the resource or
/// {"tunings": [...]}, -o name "holdtuning/NAME". An empty list prints "No resources
/// found." on stderr. InvalidArgument for another -o value.
absl::Status RunTuneGet(const TuneGetOptions& options, FleetClient& client,
                        const CommandContext& ctx);

/// GetHoldTuning and DescribeHoldTuning (cli/output/describe.h).
absl::Status RunTuneDescribe(const TuneDescribeOptions& options, FleetClient& client,
                             const CommandContext& ctx);

/// ApproveHoldTuning; prints "holdtuning/NAME approved[ (dry run)]: N policies written|would be
/// written" and a POLICY/HOLD/SELECTOR table of them. A --segment that is not key=value, or
/// repeats a key: InvalidArgument before any call.
absl::Status RunTuneApprove(const TuneApproveOptions& options, FleetClient& client,
                            const CommandContext& ctx);

/// StopHoldTuning; prints the phase. Adapters return to their policies.
absl::Status RunTuneStop(const TuneStopOptions& options, FleetClient& client,
                         const CommandContext& ctx);

/// DeleteHoldTuning; prints "holdtuning/NAME deleted".
absl::Status RunTuneDelete(const TuneDeleteOptions& options, FleetClient& client,
                           const CommandContext& ctx);

}  // namespace rxfleet::cli
