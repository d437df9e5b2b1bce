#include "cli/commands/diff.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/commands/apply.h"
#include "cli/output/changes.h"
#include "common/proto/convert.h"

namespace rxfleet::cli {

absl::StatusOr<std::string> PolicyDocument(const v1::Policy& policy) {
  auto value = common::PolicyFromProto(policy, "server");
  if (!value.ok()) return value.status();
  value->resource_version.clear();
  return common::PolicyToYaml(*value);
}

void AddDiffCommand(CLI::App& root, SelectedCommand* selected) {
  auto options = std::make_shared<DiffOptions>();
  CLI::App* diff = root.add_subcommand(
      "diff", "Show what applying policy files would change, and which adapters it would touch");
  diff->footer(
      "Examples:\n  rxfleetctl diff -f pi1-long-hold.yaml\n  cat policies.yaml | rxfleetctl "
      "diff -f -");
  diff->add_option("-f,--filename", options->files, "Policy file, or - for standard input")
      ->type_name("FILE")
      ->required();
  diff->callback([options, selected] {
    selected->path = "diff";
    selected->target = CommandTarget::kServer;
    selected->run = [options](const CommandContext& ctx) -> absl::Status {
      if (auto s = ValidateDiffOptions(*options); !s.ok()) return s;
      auto client = ctx.fleet();
      if (!client.ok()) return client.status();
      return RunDiff(*options, **client, ctx);
    };
  });
}

absl::Status ValidateDiffOptions(const DiffOptions& options) {
  return ValidateApplyOptions(ApplyOptions{options.files, /*dry_run=*/true});
}

absl::Status RunDiff(const DiffOptions& options, FleetClient& client, const CommandContext& ctx) {
  auto policies = ReadPolicyFiles(options.files, *ctx.streams.in);
  if (!policies.ok()) return policies.status();
  std::ostream& out = *ctx.streams.out;
  for (const common::Policy& policy : *policies) {
    auto fail = [&policy](const absl::Status& s) {
      return absl::Status(
          s.code(), absl::StrCat("policy/", policy.name, " (", policy.source, "): ", s.message()));
    };
    std::string before;
    v1::GetPolicyRequest get;
    get.set_name(policy.name);
    auto stored = client.GetPolicy(get);
    const bool exists = stored.ok();
    if (exists) {
      auto text = PolicyDocument(*stored);
      if (!text.ok()) return fail(text.status());
      before = *std::move(text);
    } else if (!absl::IsNotFound(stored.status())) {
      return fail(stored.status());
    }

    v1::ApplyPolicyRequest request;
    *request.mutable_policy() = common::PolicyToProto(policy);
    request.set_dry_run(true);
    auto response = client.ApplyPolicy(request);
    if (!response.ok()) return fail(response.status());
    auto after = PolicyDocument(response->policy());
    if (!after.ok()) return fail(after.status());

    const int affected = response->affected_adapters_size();
    const char* state = !exists ? "new" : (before == *after ? "unchanged" : "changed");
    out << "policy/" << policy.name << " (" << state << "): " << affected
        << (affected == 1 ? " adapter" : " adapters") << " would change\n";
    if (before != *after) out << LineDiff(before, *after);
    PrintAffectedAdapters(response->affected_adapters(), out);
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
