#pragma once

#include <functional>
#include <istream>
#include <ostream>
#include <stop_token>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/client/fleet_client.h"
#include "cli/client/local_status_client.h"

namespace rxfleet::cli {

// Every verb follows the same shape: CLI11 flags bind to an options struct, Validate*
// checks it, Run* does the work with the streams and clients it is handed. Tests call Run*
// directly with string streams and mock clients.

/// Where a command reads input and writes data (stdout) and messages (stderr).
struct Streams {
  std::istream* in;
  std::ostream* out;
  std::ostream* err;
};

/// What a running command gets from the process.
struct CommandContext {
  Streams streams;
  /// The time ages are computed against (fixed in golden tests).
  absl::Time now;
  /// Triggered by SIGINT/SIGTERM: ends `watch` (exit 0) and cancels calls in flight.
  std::stop_token stop;
  /// True when standard input is a terminal: commands that ask for confirmation prompt only
  /// then (e.g. `experiment promote` without --yes).
  bool stdin_is_terminal = false;
  /// Connects to rxfleet-server on first use (flags > environment > config file > default).
  std::function<absl::StatusOr<FleetClient*>()> fleet;
  /// Connects to the local agent's Unix socket on first use.
  std::function<absl::StatusOr<LocalStatusClient*>()> local;
};

/// What a verb needs besides its streams.
enum class CommandTarget {
  kNone,    ///< e.g. `completion`
  kServer,  ///< rxfleet-server (FleetService)
  kAgent,   ///< the local agent (LocalStatusService, `--local`)
};

/// The command the parser selected: filled in by the leaf subcommand's CLI11 callback.
struct SelectedCommand {
  std::string path;  ///< e.g. "get adapters", for messages
  CommandTarget target = CommandTarget::kNone;
  std::function<absl::Status(const CommandContext&)> run;
};

/// Splits an adapter reference "HOST/ADAPTER" (adapter ids are unique per host only).
/// InvalidArgument with an example unless both parts are non-empty, and naming the rule when
/// HOST is not a valid host id or ADAPTER not a valid adapter id (common/validation.h).
absl::StatusOr<std::pair<std::string, std::string>> ParseAdapterRef(std::string_view ref);

/// A CLI11 check that runs one of common/validation.h's rules on an argument, so a bad name is
/// a usage error with the rule's message before any call (e.g. common::ValidateExperimentName).
CLI::Validator RuleCheck(absl::Status (*rule)(std::string_view));

/// Prints "No resources found." on the error stream (kubectl's wording for empty results).
void PrintNoResources(const Streams& streams);

/// A command-line usage error found after parsing (e.g. an unknown --field-selector key):
/// InvalidArgument marked so that ExitCodeForStatus returns 2 (kExitUsage) and rxfleetctl
/// prints the "--help" hint.
absl::Status UsageError(std::string_view message);

/// True for a status made by UsageError.
bool IsUsageError(const absl::Status& status);

/// The whole text of `file`, or of `stdin_stream` for "-". InvalidArgument naming the file
/// and the system's reason (strerror: "No such file or directory", "Permission denied",
/// "Is a directory") when it cannot be opened or read.
absl::StatusOr<std::string> ReadInputFile(const std::string& file, std::istream& stdin_stream);

/// Makes `verb` (`get`, `describe`, `delete`) reject a resource type none of its subcommands
/// matches with a usage error (exit 2) naming it and listing `valid_types`: "unknown resource
/// type 'widgets'; valid types: hosts, adapters, ...", or "VERB: a resource type is required;
/// valid types: ..." when none is given. Adds a positional TYPE that collects what no
/// subcommand took, so a stray extra argument is reported too.
void RejectUnknownResourceTypes(CLI::App& verb, std::string_view valid_types);

/// The same for rxfleetctl itself: "unknown command 'frobnicate'; commands: get, describe, ..."
/// or "a command is required; commands: ..." (exit 2). `app` must not require a subcommand
/// itself (require_subcommand(0, 1)).
void RejectUnknownCommands(CLI::App& app);

}  // namespace rxfleet::cli
