#include "cli/commands/apply.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/output/changes.h"
#include "common/proto/convert.h"

namespace rxfleet::cli {

void AddApplyCommand(CLI::App& root, SelectedCommand* selected) {
  auto options = std::make_shared<ApplyOptions>();
  CLI::App* apply = root.add_subcommand(
      "apply", "Create or update policies from YAML/JSON documents (kind RxAggPolicy)");
  apply->footer(
      "Examples:\n  rxfleetctl apply -f pi1-long-hold.yaml\n"
      "  rxfleetctl apply -f policies.yaml --dry-run\n"
      "  cat policy.json | rxfleetctl apply -f -\n\n"
      "Document:\n"
      "  apiVersion: rxfleet/v1\n  kind: RxAggPolicy\n  metadata:\n    name: pi1-long-hold\n"
      "  spec:\n    priority: 100\n    selector:\n      matchLabels: {board: pi1}\n"
      "      usbSpeeds: [high]\n    settings:\n      hold: 1024us");
  apply->add_option("-f,--filename", options->files, "Policy file, or - for standard input")
      ->type_name("FILE")
      ->required();
  apply->add_flag("--dry-run", options->dry_run,
                  "Validate on the server and show the affected adapters; store nothing");
  apply->callback([options, selected] {
    selected->path = "apply";
    selected->target = CommandTarget::kServer;
    selected->run = [options](const CommandContext& ctx) -> absl::Status {
      if (auto s = ValidateApplyOptions(*options); !s.ok()) return s;
      auto client = ctx.fleet();
      if (!client.ok()) return client.status();
      return RunApply(*options, **client, ctx);
    };
  });
}

absl::Status ValidateApplyOptions(const ApplyOptions& options) {
  if (options.files.empty()) return absl::InvalidArgumentError("-f/--filename is required");
  int stdin_count = 0;
  for (const auto& file : options.files) {
    if (file.empty()) return absl::InvalidArgumentError("-f/--filename: empty file name");
    if (file == "-") ++stdin_count;
  }
  if (stdin_count > 1) {
    return absl::InvalidArgumentError("-f/--filename: standard input (-) can be read only once");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<common::Policy>> ReadPolicyFiles(const std::vector<std::string>& files,
                                                            std::istream& stdin_stream) {
  std::vector<common::Policy> all;
  std::map<std::string, std::string> seen;  // name -> source
  for (const auto& file : files) {
    auto text = ReadInputFile(file, stdin_stream);
    if (!text.ok()) return text.status();
    const std::string source = file == "-" ? "<stdin>" : file;
    auto policies = common::ParsePolicyDocuments(*text, source);
    if (!policies.ok()) return policies.status();
    for (auto& policy : *policies) {
      auto [it, inserted] = seen.emplace(policy.name, policy.source);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(policy.source, ": policy '", policy.name,
                                                       "' is also defined at ", it->second));
      }
      all.push_back(std::move(policy));
    }
  }
  if (all.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no RxAggPolicy documents in ",
                     files.size() == 1 ? (files[0] == "-" ? "<stdin>" : files[0]) : "the files"));
  }
  return all;
}

absl::Status RunApply(const ApplyOptions& options, FleetClient& client, const CommandContext& ctx) {
  auto policies = ReadPolicyFiles(options.files, *ctx.streams.in);
  if (!policies.ok()) return policies.status();
  std::ostream& out = *ctx.streams.out;
  for (const common::Policy& policy : *policies) {
    v1::ApplyPolicyRequest request;
    *request.mutable_policy() = common::PolicyToProto(policy);
    request.set_dry_run(options.dry_run);
    auto response = client.ApplyPolicy(request);
    if (!response.ok()) {
      return absl::Status(response.status().code(),
                          absl::StrCat("policy/", policy.name, " (", policy.source,
                                       "): ", response.status().message()));
    }
    const int affected = response->affected_adapters_size();
    out << "policy/" << policy.name << ' ' << (response->created() ? "created" : "configured")
        << (options.dry_run ? " (dry run)" : "") << ": " << affected
        << (affected == 1 ? " adapter" : " adapters") << " affected";
    if (response->bundle_version() != 0) out << " (bundle " << response->bundle_version() << ")";
    out << '\n';
    PrintAffectedAdapters(response->affected_adapters(), out);
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
