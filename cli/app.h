#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/client/connection.h"
#include "cli/client/fleet_client.h"
#include "cli/client/local_status_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Flags every rxfleetctl command accepts (before or after the subcommand).
struct GlobalOptions {
  std::string server, token, ca_file, cert_file, key_file, timeout, config;
  bool insecure = false;
  /// --local: talk to the agent on this host (only `status` does).
  bool local = false;
  /// --local-socket: the agent's LocalStatusService socket.
  std::string local_socket = std::string(kDefaultAgentSocket);
};

/// Builds the command tree: global flags on the root and the verbs in this explicit list:
/// get, describe, apply, diff, delete, experiment, watch, status, completion. Parsing fills
/// `global` and `selected`, which must outlive the returned app.
std::unique_ptr<CLI::App> BuildApp(GlobalOptions* global, SelectedCommand* selected);

/// Reads the connection flags of `global` as given on the command line (`app` tells which
/// were given).
ConnectionFlags ConnectionFlagsFrom(const CLI::App& app, const GlobalOptions& global);

/// The world rxfleetctl runs in, injected so tests run it in-process.
struct Environment {
  Streams streams;
  EnvLookup getenv;
  std::function<absl::Time()> now;
  /// Whether standard input is a terminal (isatty), for confirmation prompts.
  bool stdin_is_terminal = false;
  /// Triggered on SIGINT/SIGTERM.
  std::stop_token stop;
  std::function<absl::StatusOr<std::unique_ptr<FleetClient>>(const ConnectionSettings&,
                                                             std::stop_token)>
      connect_fleet;
  std::function<std::unique_ptr<LocalStatusClient>(std::string_view socket_path,
                                                   absl::Duration timeout, std::stop_token)>
      connect_local;
};

/// The real environment: std::cin/cout/cerr, getenv, the system clock and gRPC clients.
Environment ProcessEnvironment(std::stop_token stop);

/// Runs rxfleetctl with `args` (without the program name) and returns the exit code
/// (cli/exit_code.h): help and --version print to stdout and return 0; parse errors print
/// "error: ..." and a usage hint on stderr and return 2; otherwise the selected command runs
/// and its status maps to the exit code, with "error: MESSAGE" on stderr when it failed.
int RunRxfleetctl(const std::vector<std::string>& args, const Environment& env);

}  // namespace rxfleet::cli
