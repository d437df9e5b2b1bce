#include "cli/commands/delete.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/output/changes.h"

namespace rxfleet::cli {

void AddDeleteCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* del = root.add_subcommand("delete", "Delete a policy");
  del->require_subcommand(0, 1);
  del->footer(
      "Example:\n  rxfleetctl delete policy pi1-long-hold\n\n"
      "Experiments are ended with 'rxfleetctl experiment stop NAME', not deleted.");
  RejectUnknownResourceTypes(*del, "policy");
  auto options = std::make_shared<DeleteOptions>();
  CLI::App* policy = del->add_subcommand("policy",
                                         "Delete a policy; its adapters fall back to "
                                         "other policies or the built-in default");
  policy->alias("policies");
  policy->footer(
      "Examples:\n  rxfleetctl delete policy pi1-long-hold\n"
      "  rxfleetctl delete policy pi1-long-hold --dry-run\n"
      "  rxfleetctl delete policy pi1-long-hold --resource-version 7");
  policy->add_option("NAME", options->name, "Policy name")->required();
  policy->add_option("--resource-version", options->resource_version,
                     "Delete only if the policy still has this resource version");
  policy->add_flag("--dry-run", options->dry_run,
                   "Show the adapters that would change; delete nothing");
  policy->callback([options, selected] {
    selected->path = "delete policy";
    selected->target = CommandTarget::kServer;
    selected->run = [options](const CommandContext& ctx) -> absl::Status {
      if (auto s = ValidateDeleteOptions(*options); !s.ok()) return s;
      auto client = ctx.fleet();
      if (!client.ok()) return client.status();
      return RunDelete(*options, **client, ctx);
    };
  });
}

absl::Status ValidateDeleteOptions(const DeleteOptions& options) {
  if (options.name.empty()) return absl::InvalidArgumentError("NAME is required");
  return absl::OkStatus();
}

absl::Status RunDelete(const DeleteOptions& options, FleetClient& client,
                       const CommandContext& ctx) {
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
