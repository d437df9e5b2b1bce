#include "cli/commands/tune.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/client/paging.h"
#include "cli/commands/experiment.h"
#include "cli/output/describe.h"
#include "cli/output/format.h"
#include "cli/output/resources.h"
#include "cli/output/structured.h"
#include "cli/output/table.h"
#include "common/proto/tuning.h"
#include "common/string_view_compat.h"
#include "common/tuning/hold_tuning.h"
#include "common/validation.h"

namespace rxfleet::cli {
namespace {

constexpr char kDocumentExample[] =
    "Document (docs/EXPERIMENTS.md, \"Tuning a hold\"):\n"
    "  apiVersion: rxfleet/v1\n  kind: HoldTuning\n  metadata: {name: hold-usb3}\n  spec:\n"
    "    selector: {chips: [rtl8922au]}\n    segments: [usb_speed, board]\n"
    "    candidates: [32us, 64us, 128us, 256us, 512us, 1024us]\n"
    "    objective: {metric: rx_throughput_bps, direction: maximize}\n"
    "    guardrails: [{metric: rx_drop_ratio, op: \"<=\", threshold: 0.05}]\n"
    "    budget: {adapterShare: 0.2, maxWindows: 20000}\n"
    "    periodLength: 30m\n    burnIn: 5m";

std::string Plural(size_t n, std::string_view one, std::string_view many) {
  return absl::StrCat(n, " ", common::ToAbslView(n == 1 ? one : many));
}

absl::Status WithName(const absl::Status& status, std::string_view name) {
  return absl::Status(
      status.code(), absl::StrCat("holdtuning/", common::ToAbslView(name), ": ", status.message()));
}

// Runs `run` with a connected client, as every server verb does.
template <typename Options, typename Run>
void Select(CLI::App* sub, SelectedCommand* selected, std::string path,
            std::shared_ptr<Options> options, Run run) {
  sub->callback([selected, path = std::move(path), options, run] {
    selected->path = path;
    selected->target = CommandTarget::kServer;
    selected->run = [options, run](const CommandContext& ctx) -> absl::Status {
      auto client = ctx.fleet();
      if (!client.ok()) return client.status();
      return run(*options, **client, ctx);
    };
  });
}

CLI::Option* AddName(CLI::App* sub, std::string* name) {
  return sub->add_option("NAME", *name, "Hold tuning name")
      ->required()
      ->check(RuleCheck(&common::ValidateExperimentName));
}

// Every --segment value (each "k=v" or "k=v,k2=v2") as one map; a key given twice fails.
absl::StatusOr<std::map<std::string, std::string>> MergeSegments(
    const std::vector<std::string>& values) {
  std::map<std::string, std::string> segment;
  for (const std::string& value : values) {
    auto parsed = ParseSegment(value);
    if (!parsed.ok()) return parsed.status();
    if (parsed->empty()) {
      return absl::InvalidArgumentError("--segment: empty value; expected key=value");
    }
    for (auto& [key, v] : *parsed) {
      if (!segment.emplace(key, v).second) {
        return absl::InvalidArgumentError(absl::StrCat("--segment: key '", key, "' given twice"));
      }
    }
  }
  return segment;
}

}  // namespace

void AddTuneCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* tune = root.add_subcommand(
      "tune", "Tune the hold per segment of adapters: create, list, inspect, approve, stop");
  tune->alias("tuning");
  tune->require_subcommand(1);
  tune->footer(
      "Examples:\n  rxfleetctl tune create -f hold-usb3.yaml\n  rxfleetctl tune get\n"
      "  rxfleetctl tune describe hold-usb3\n"
      "  rxfleetctl tune approve hold-usb3 --segment usb_speed=super --segment board=x86\n"
      "  rxfleetctl tune stop hold-usb3\n\n"
      "Reference: docs/EXPERIMENTS.md (\"Tuning a hold\"), docs/CLI.md");

  {
    auto options = std::make_shared<TuneCreateOptions>();
    CLI::App* create = tune->add_subcommand(
        "create", "Create and start a hold tuning from a YAML/JSON document (kind HoldTuning)");
    create->footer(
        absl::StrCat("Examples:\n  rxfleetctl tune create -f hold-usb3.yaml\n"
                     "  rxfleetctl tune create -f hold-usb3.yaml --dry-run\n"
                     "  cat hold-usb3.yaml | rxfleetctl tune create -f -\n\n",
                     kDocumentExample));
    create->add_option("-f,--filename", options->file, "HoldTuning file, or - for standard input")
        ->type_name("FILE")
        ->required();
    create->add_flag("--dry-run", options->dry_run,
                     "Validate on the server and count the eligible adapters; store nothing");
    Select(create, selected, "tune create", options,
           [](const TuneCreateOptions& o, FleetClient& client, const CommandContext& ctx) {
             if (o.file.empty()) {
               return absl::InvalidArgumentError("-f/--filename: empty file name");
             }
             return RunTuneCreate(o, client, ctx);
           });
  }
  {
    auto options = std::make_shared<TuneGetOptions>();
    CLI::App* get = tune->add_subcommand("get", "List hold tunings or show one");
    get->footer(
        "Examples:\n  rxfleetctl tune get\n  rxfleetctl tune get -o wide\n"
        "  rxfleetctl tune get hold-usb3 -o yaml");
    get->add_option("NAME", options->name, "Hold tuning name (omit to list)")
        ->check(RuleCheck(&common::ValidateExperimentName));
    get->add_option("-o,--output", options->output, "Output format")
        ->check(CLI::IsMember(OutputFormatNames()))
        ->capture_default_str();
    Select(get, selected, "tune get", options, RunTuneGet);
  }
  {
    auto options = std::make_shared<TuneDescribeOptions>();
    CLI::App* describe = tune->add_subcommand(
        "describe", "Show a hold tuning: spec, and per segment its candidates and evidence");
    describe->footer("Example:\n  rxfleetctl tune describe hold-usb3");
    AddName(describe, &options->name);
    Select(describe, selected, "tune describe", options, RunTuneDescribe);
  }
  {
    auto options = std::make_shared<TuneApproveOptions>();
    CLI::App* approve = tune->add_subcommand(
        "approve", "Write the proposed holds as policies (all segments with a proposal, or one)");
    approve->footer(
        "Examples:\n  rxfleetctl tune approve hold-usb3 --dry-run\n"
        "  rxfleetctl tune approve hold-usb3 --segment usb_speed=super --segment board=x86\n"
        "  rxfleetctl tune approve hold-usb3 --resource-version 12");
    AddName(approve, &options->name);
    approve
        ->add_option("--segment", options->segment,
                     "KEY=VALUE of the one segment to approve, repeatable (every key of the "
                     "tuning); omit for every segment with a proposal")
        ->allow_extra_args(false);
    approve->add_flag("--dry-run", options->dry_run, "Show the policies; write nothing");
    approve->add_option("--resource-version", options->resource_version,
                        "Approve only if the tuning still has this resource version");
    Select(approve, selected, "tune approve", options, RunTuneApprove);
  }
  {
    auto options = std::make_shared<TuneStopOptions>();
    CLI::App* stop =
        tune->add_subcommand("stop", "Stop a hold tuning; its adapters return to their policies");
    stop->footer(
        "Examples:\n  rxfleetctl tune stop hold-usb3\n"
        "  rxfleetctl tune stop hold-usb3 --reason \"pi1 drops frames\"");
    AddName(stop, &options->name);
    stop->add_option("--reason", options->reason, "Why, recorded in status and the audit log");
    stop->add_option("--resource-version", options->resource_version,
                     "Stop only if the tuning still has this resource version");
    Select(stop, selected, "tune stop", options, RunTuneStop);
  }
  {
    auto options = std::make_shared<TuneDeleteOptions>();
    CLI::App* del = tune->add_subcommand("delete", "Delete a hold tuning");
    del->footer(
        "Examples:\n  rxfleetctl tune delete hold-usb3\n"
        "  rxfleetctl tune delete hold-usb3 --resource-version 12");
    AddName(del, &options->name);
    del->add_option("--resource-version", options->resource_version,
                    "Delete only if the tuning still has this resource version");
    Select(del, selected, "tune delete", options, RunTuneDelete);
  }
}

absl::Status RunTuneCreate(const TuneCreateOptions& options, FleetClient& client,
                           const CommandContext& ctx) {
  auto text = ReadInputFile(options.file, *ctx.streams.in);
  if (!text.ok()) return text.status();
  const std::string source = options.file == "-" ? "<stdin>" : options.file;
  auto tuning = tuning::ParseHoldTuning(*text, source);
  if (!tuning.ok()) return tuning.status();
  v1::CreateHoldTuningRequest request;
  *request.mutable_tuning() = tuning::HoldTuningToProto(*tuning);
  request.set_dry_run(options.dry_run);
  auto response = client.CreateHoldTuning(request);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat("holdtuning/", tuning->name, " (", tuning->source,
                                     "): ", response.status().message()));
  }
  std::ostream& out = *ctx.streams.out;
  const auto& segments = response->tuning().status().segments();
  out << "holdtuning/" << tuning->name << " created" << (options.dry_run ? " (dry run)" : "")
      << ": " << Plural(response->eligible_adapters(), "eligible adapter", "eligible adapters")
      << " in " << Plural(static_cast<size_t>(segments.size()), "segment", "segments") << '\n';
  if (!segments.empty()) {
    Table table({"SEGMENT", "ADAPTERS"});
    for (const auto& segment : segments) {
      table.AddRow(
          {FormatSegmentValues(response->tuning().spec().segment_label_keys(), segment.segment()),
           absl::StrCat(segment.adapters())});
    }
    table.Print(out, "  ");
  }
  return absl::OkStatus();
}

absl::Status RunTuneGet(const TuneGetOptions& options, FleetClient& client,
                        const CommandContext& ctx) {
  auto format = ParseOutputFormat(options.output);
  if (!format.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("-o/--output: ", format.status().message()));
  }
  const bool structured = *format == OutputFormat::kJson || *format == OutputFormat::kYaml;
  std::vector<v1::HoldTuning> tunings;
  if (!options.name.empty()) {
    v1::GetHoldTuningRequest request;
    request.set_name(options.name);
    auto tuning = client.GetHoldTuning(request);
    if (!tuning.ok()) return WithName(tuning.status(), options.name);
    if (structured) return PrintStructured(*tuning, *format, *ctx.streams.out);
    tunings.push_back(*std::move(tuning));
  } else {
    auto listed = ListAllHoldTunings(client, v1::ListHoldTuningsRequest());
    if (!listed.ok()) return listed.status();
    tunings = *std::move(listed);
    if (tunings.empty()) PrintNoResources(ctx.streams);
    if (structured) {
      v1::ListHoldTuningsResponse list;
      for (const auto& tuning : tunings) *list.add_tunings() = tuning;
      return PrintStructured(list, *format, *ctx.streams.out, "tunings");
    }
    if (tunings.empty()) return absl::OkStatus();
  }
  if (*format == OutputFormat::kName) {
    std::vector<std::string> names;
    names.reserve(tunings.size());
    for (const auto& tuning : tunings) names.push_back(ResourceName(tuning));
    std::sort(names.begin(), names.end());
    for (const auto& name : names) *ctx.streams.out << name << '\n';
    return absl::OkStatus();
  }
  PrintHoldTuningTable(tunings, *format == OutputFormat::kWide, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status RunTuneDescribe(const TuneDescribeOptions& options, FleetClient& client,
                             const CommandContext& ctx) {
  v1::GetHoldTuningRequest request;
  request.set_name(options.name);
  auto tuning = client.GetHoldTuning(request);
  if (!tuning.ok()) return WithName(tuning.status(), options.name);
  DescribeHoldTuning(*tuning, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status RunTuneApprove(const TuneApproveOptions& options, FleetClient& client,
                            const CommandContext& ctx) {
  auto segment = MergeSegments(options.segment);
  if (!segment.ok()) return segment.status();
  v1::ApproveHoldTuningRequest request;
  request.set_name(options.name);
  request.mutable_segment()->insert(segment->begin(), segment->end());
  request.set_resource_version(options.resource_version);
  request.set_dry_run(options.dry_run);
  auto response = client.ApproveHoldTuning(request);
  if (!response.ok()) return WithName(response.status(), options.name);
  std::ostream& out = *ctx.streams.out;
  const size_t count = static_cast<size_t>(response->policies_size());
  out << "holdtuning/" << options.name << " approved" << (options.dry_run ? " (dry run)" : "")
      << ": " << Plural(count, "policy", "policies")
      << (options.dry_run ? " would be written" : " written") << '\n';
  if (count > 0) {
    Table table({"POLICY", "HOLD", "SELECTOR"});
    for (const v1::Policy& policy : response->policies()) {
      table.AddRow({policy.metadata().name(),
                    FormatSettingsField(policy.spec().settings(), "hold_us").value_or("-"),
                    FormatSelector(policy.spec().selector())});
    }
    table.Print(out, "  ");
  }
  if (options.dry_run) out << "Dry run: nothing written.\n";
  return absl::OkStatus();
}

absl::Status RunTuneStop(const TuneStopOptions& options, FleetClient& client,
                         const CommandContext& ctx) {
  v1::StopHoldTuningRequest request;
  request.set_name(options.name);
  request.set_reason(options.reason);
  request.set_resource_version(options.resource_version);
  auto tuning = client.StopHoldTuning(request);
  if (!tuning.ok()) return WithName(tuning.status(), options.name);
  *ctx.streams.out << "holdtuning/" << options.name << " stopped (phase "
                   << HoldTuningPhaseWord(tuning->status().phase())
                   << "); its adapters return to their policies\n";
  return absl::OkStatus();
}

absl::Status RunTuneDelete(const TuneDeleteOptions& options, FleetClient& client,
                           const CommandContext& ctx) {
  v1::DeleteHoldTuningRequest request;
  request.set_name(options.name);
  request.set_resource_version(options.resource_version);
  auto deleted = client.DeleteHoldTuning(request);
  if (!deleted.ok()) return WithName(deleted.status(), options.name);
  *ctx.streams.out << "holdtuning/" << options.name << " deleted\n";
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
