#include "cli/commands/status.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/output/status.h"
#include "cli/output/structured.h"

namespace rxfleet::cli {

void AddStatusCommand(CLI::App& root, SelectedCommand* selected) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* status = root.add_subcommand(
      "status", "Show the agent on this host (use with --local; no server needed)");
  status->footer(
      "Examples:\n  rxfleetctl --local status\n"
      "  rxfleetctl --local --local-socket /tmp/agent.sock status -o yaml");
  status->add_option("-o,--output", options->output, "Output format")
      ->check(CLI::IsMember({"table", "json", "yaml"}))
      ->capture_default_str();
  status->add_flag("--include-gone", options->include_gone, "Also show unplugged adapters");
  status->callback([options, selected] {
    selected->path = "status";
    selected->target = CommandTarget::kAgent;
    selected->run = [options](const CommandContext& ctx) -> absl::Status {
      if (auto s = ValidateStatusOptions(*options); !s.ok()) return s;
      auto client = ctx.local();
      if (!client.ok()) return client.status();
      return RunStatus(*options, **client, ctx);
    };
  });
}

absl::Status ValidateStatusOptions(const StatusOptions& options) {
  if (options.output != "table" && options.output != "json" && options.output != "yaml") {
    return absl::InvalidArgumentError(absl::StrCat("-o/--output: unknown format '", options.output,
                                                   "' (expected table, json or yaml)"));
  }
  return absl::OkStatus();
}

absl::Status RunStatus(const StatusOptions& options, LocalStatusClient& client,
                       const CommandContext& ctx) {
  v1::GetStatusRequest request;
  request.set_include_gone(options.include_gone);
  auto status = client.GetStatus(request);
  if (!status.ok()) return status.status();
  if (options.output == "json")
    return PrintStructured(*status, OutputFormat::kJson, *ctx.streams.out);
  if (options.output == "yaml")
    return PrintStructured(*status, OutputFormat::kYaml, *ctx.streams.out);
  PrintLocalStatus(*status, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
