#include "cli/app.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/client/grpc_clients.h"
#include "cli/commands/apply.h"
#include "cli/commands/command.h"
#include "cli/commands/completion.h"
#include "cli/commands/delete.h"
#include "cli/commands/describe.h"
#include "cli/commands/diff.h"
#include "cli/commands/experiment.h"
#include "cli/commands/get.h"
#include "cli/commands/status.h"
#include "cli/commands/tune.h"
#include "cli/commands/watch.h"
#include "cli/exit_code.h"
#include "cli/output/terminal_stream.h"
#include "rxfleet/version.h"

namespace rxfleet::cli {
namespace {

constexpr char kProgram[] = "rxfleetctl";

// The deepest subcommand the parser reached, as "get adapters", for usage hints.
std::string ParsedPath(const CLI::App& app) {
  std::string path;
  const CLI::App* level = &app;
  while (true) {
    auto parsed = level->get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
    if (parsed.empty()) return path;
    level = parsed.front();
    absl::StrAppend(&path, path.empty() ? "" : " ", level->get_name());
  }
}

}  // namespace

std::unique_ptr<CLI::App> BuildApp(GlobalOptions* global, SelectedCommand* selected) {
  auto app = std::make_unique<CLI::App>(
      "rxfleetctl: query and steer the RX aggregation of a fleet of rtw89 USB Wi-Fi adapters "
      "through rxfleet-server, or the agent on this host with --local.",
      kProgram);
  // Subcommands created below inherit fall-through, so global flags work after them too.
  app->fallthrough();
  app->require_subcommand(0, 1);
  app->set_version_flag("--version", absl::StrCat(kProgram, " ", kVersion));
  app->footer(
      "Examples:\n  rxfleetctl get adapters -o wide\n  rxfleetctl apply -f policy.yaml\n"
      "  rxfleetctl experiment create -f hold-ab.yaml\n"
      "  rxfleetctl tune create -f hold-usb3.yaml\n"
      "  rxfleetctl --local status\n\n"
      "Connection: flag > RXFLEET_SERVER / RXFLEET_TOKEN > ~/.config/rxfleet/config.yaml > "
      "default (127.0.0.1:7443, TLS). Reference: docs/CLI.md, docs/SECURITY.md");

  const std::string conn = "Connection";
  app->add_option("--server", global->server,
                  "rxfleet-server address HOST:PORT (env RXFLEET_SERVER; default 127.0.0.1:7443)")
      ->group(conn);
  app->add_option("--token", global->token,
                  "Bearer token sent as 'authorization' metadata (env RXFLEET_TOKEN)")
      ->group(conn);
  app->add_flag("--insecure", global->insecure,
                "Plaintext connection (servers started with --insecure)")
      ->group(conn);
  app->add_option("--ca-file", global->ca_file,
                  "TLS: CA certificates (PEM) to verify the server (default: system roots)")
      ->type_name("FILE")
      ->group(conn);
  app->add_option("--cert-file", global->cert_file, "TLS: client certificate (PEM)")
      ->type_name("FILE")
      ->group(conn);
  app->add_option("--key-file", global->key_file, "TLS: client private key (PEM)")
      ->type_name("FILE")
      ->group(conn);
  app->add_option("--timeout", global->timeout,
                  "Deadline of each call, e.g. 10s, 500ms (default 10s)")
      ->group(conn);
  app->add_option("--config", global->config, "Config file (default ~/.config/rxfleet/config.yaml)")
      ->type_name("FILE")
      ->group(conn);
  app->add_flag("--local", global->local, "Talk to the agent on this host instead (status)")
      ->group(conn);
  app->add_option("--local-socket", global->local_socket, "The agent's status socket")
      ->type_name("FILE")
      ->capture_default_str()
      ->group(conn);

  // The verbs. Adding one means one file in cli/commands/ and one line here.
  AddGetCommand(*app, selected);
  AddDescribeCommand(*app, selected);
  AddApplyCommand(*app, selected);
  AddDiffCommand(*app, selected);
  AddDeleteCommand(*app, selected);
  AddExperimentCommand(*app, selected);
  AddTuneCommand(*app, selected);
  AddWatchCommand(*app, selected);
  AddStatusCommand(*app, selected);
  AddCompletionCommand(*app, selected);
  RejectUnknownCommands(*app);
  return app;
}

ConnectionFlags ConnectionFlagsFrom(const CLI::App& app, const GlobalOptions& global) {
  ConnectionFlags flags;
  auto given = [&app](const char* name) { return app.get_option(name)->count() > 0; };
  if (given("--server")) flags.server = global.server;
  if (given("--token")) flags.token = global.token;
  if (given("--ca-file")) flags.ca_file = global.ca_file;
  if (given("--cert-file")) flags.cert_file = global.cert_file;
  if (given("--key-file")) flags.key_file = global.key_file;
  if (given("--timeout")) flags.timeout = global.timeout;
  if (given("--config")) flags.config = global.config;
  flags.insecure = global.insecure;
  return flags;
}

Environment ProcessEnvironment(std::stop_token stop) {
  Environment env;
  env.streams = Streams{&std::cin, &std::cout, &std::cerr};
  env.getenv = [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  env.now = [] { return absl::Now(); };
  env.stdin_is_terminal = isatty(STDIN_FILENO) == 1;
  env.stop = std::move(stop);
  env.connect_fleet = [](const ConnectionSettings& settings, std::stop_token token) {
    return ConnectFleet(settings, std::move(token));
  };
  env.connect_local = [](std::string_view socket, absl::Duration timeout, std::stop_token token) {
    return ConnectLocalStatus(socket, timeout, std::move(token));
  };
  return env;
}

namespace {

int Run(const std::vector<std::string>& args, const Environment& env) {
  std::ostream& err = *env.streams.err;
  GlobalOptions global;
  SelectedCommand selected;
  std::unique_ptr<CLI::App> app = BuildApp(&global, &selected);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app->parse(std::move(reversed));
  } catch (const CLI::CallForHelp& e) {
    return app->exit(e, *env.streams.out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app->exit(e, *env.streams.out, err);
  } catch (const CLI::CallForVersion& e) {
    return app->exit(e, *env.streams.out, err);
  } catch (const CLI::ParseError& e) {
    const std::string path = ParsedPath(*app);
    err << "error: " << e.what() << "\n"
        << "Run '" << kProgram << (path.empty() ? "" : " ") << path << " --help' for usage.\n";
    return kExitUsage;
  }
  if (!selected.run) {
    err << "error: no command given\nRun '" << kProgram << " --help' for usage.\n";
    return kExitUsage;
  }
  if (global.local && selected.target == CommandTarget::kServer) {
    err << "error: --local works only with 'status' (" << selected.path
        << " talks to rxfleet-server)\n";
    return kExitUsage;
  }

  const ConnectionFlags flags = ConnectionFlagsFrom(*app, global);
  std::unique_ptr<FleetClient> fleet;
  std::unique_ptr<LocalStatusClient> local;
  CommandContext ctx;
  ctx.streams = env.streams;
  ctx.now = env.now();
  ctx.stdin_is_terminal = env.stdin_is_terminal;
  ctx.stop = env.stop;
  ctx.fleet = [&]() -> absl::StatusOr<FleetClient*> {
    if (!fleet) {
      auto settings = ResolveConnection(flags, env.getenv);
      if (!settings.ok()) return settings.status();
      auto client = env.connect_fleet(*settings, env.stop);
      if (!client.ok()) return client.status();
      fleet = *std::move(client);
    }
    return fleet.get();
  };
  ctx.local = [&]() -> absl::StatusOr<LocalStatusClient*> {
    if (!local) {
      absl::Duration timeout = kDefaultTimeout;
      if (flags.timeout) {
        auto parsed = ParseTimeout(*flags.timeout);
        if (!parsed.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("--timeout: ", parsed.status().message()));
        }
        timeout = *parsed;
      }
      local = env.connect_local(global.local_socket, timeout, env.stop);
    }
    return local.get();
  };

  const absl::Status status = selected.run(ctx);
  env.streams.out->flush();
  if (!status.ok()) err << "error: " << status.message() << "\n";
  if (IsUsageError(status)) {
    err << "Run '" << kProgram << " " << selected.path << " --help' for usage.\n";
  }
  return ExitCodeForStatus(status);
}

}  // namespace

int RunRxfleetctl(const std::vector<std::string>& args, const Environment& env) {
  // Everything rxfleetctl prints passes the one sanitiser (cli/output/terminal_stream.h).
  TerminalSafeStream out(*env.streams.out, /*unit_buffered=*/false);
  TerminalSafeStream err(*env.streams.err, /*unit_buffered=*/true);
  Environment safe = env;
  safe.streams.out = &out;
  safe.streams.err = &err;
  const int code = Run(args, safe);
  out.flush();
  err.flush();
  return code;
}

}  // namespace rxfleet::cli
