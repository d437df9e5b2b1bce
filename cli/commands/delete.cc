#include "cli/commands/delete.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/output/changes.h"

namespace rxfleet::cli {

void AddDeleteCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* del = root.add_subcommand("delete", "Delete a policy or an ended experiment");
  del->require_subcommand(0, 1);
  del->footer(
      "Examples:\n  rxfleetctl delete policy pi1-long-hold\n"
      "  rxfleetctl delete experiment hold-ab\n\n"
      "A running experiment is ended with 'rxfleetctl experiment stop NAME' first.");
  RejectUnknownResourceTypes(*del, "policy, experiment");
  auto options = std::make_shared<DeleteOptions>();
  // One resource type: NAME, --resource-version and the selection of the command.
  auto add_type = [&](const std::string& kind, const std::string& title, const char* help,
                      const char* examples) {
    CLI::App* sub = del->add_subcommand(kind, help);
    sub->footer(examples);
    sub->add_option("NAME", options->name, absl::StrCat(title, " name"))->required();
    sub->add_option("--resource-version", options->resource_version,
                    absl::StrCat("Delete only if the ", kind, " still has this resource version"));
    sub->callback([options, selected, kind] {
      options->kind = kind;
      selected->path = absl::StrCat("delete ", kind);
      selected->target = CommandTarget::kServer;
      selected->run = [options](const CommandContext& ctx) -> absl::Status {
        if (auto s = ValidateDeleteOptions(*options); !s.ok()) return s;
        auto client = ctx.fleet();
        if (!client.ok()) return client.status();
        return RunDelete(*options, **client, ctx);
      };
    });
    return sub;
  };
  CLI::App* policy = add_type("policy", "Policy",
                              "Delete a policy; its adapters fall back to other policies or the "
                              "built-in default",
                              "Examples:\n  rxfleetctl delete policy pi1-long-hold\n"
                              "  rxfleetctl delete policy pi1-long-hold --dry-run\n"
                              "  rxfleetctl delete policy pi1-long-hold --resource-version 7");
  policy->alias("policies");
  policy->add_flag("--dry-run", options->dry_run,
                   "Show the adapters that would change; delete nothing");
  add_type("experiment", "Experiment",
           "Delete an ended (stopped or completed) experiment and its metric windows",
           "Examples:\n  rxfleetctl delete experiment hold-ab\n"
           "  rxfleetctl delete experiment hold-ab --resource-version 12")
      ->alias("experiments");
}

absl::Status ValidateDeleteOptions(const DeleteOptions& options) {
  if (options.name.empty()) return absl::InvalidArgumentError("NAME is required");
  return absl::OkStatus();
}

absl::Status RunDelete(const DeleteOptions& options, FleetClient& client,
                       const CommandContext& ctx) {
  if (options.kind == "experiment") {
    v1::DeleteExperimentRequest request;
    request.set_name(options.name);
    request.set_resource_version(options.resource_version);
    auto deleted = client.DeleteExperiment(request);
    if (!deleted.ok()) {
      return absl::Status(deleted.status().code(), absl::StrCat("experiment/", options.name, ": ",
                                                                deleted.status().message()));
    }
    *ctx.streams.out << "experiment/" << options.name << " deleted with its metric windows\n";
    return absl::OkStatus();
  }
  v1::DeletePolicyRequest request;
  request.set_name(options.name);
  request.set_resource_version(options.resource_version);
  request.set_dry_run(options.dry_run);
  auto response = client.DeletePolicy(request);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat("policy/", options.name, ": ", response.status().message()));
  }
  std::ostream& out = *ctx.streams.out;
  out << "policy/" << options.name
      << (options.dry_run ? " would be deleted (dry run)" : " deleted");
  const int affected = response->affected_adapters_size();
  out << ": " << affected << (affected == 1 ? " adapter" : " adapters") << " affected";
  if (response->bundle_version() != 0) out << " (bundle " << response->bundle_version() << ")";
  out << '\n';
  PrintAffectedAdapters(response->affected_adapters(), out);
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
