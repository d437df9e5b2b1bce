#include "cli/commands/experiment.h"

#include <algorithm>
#include <array>
#include <istream>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/commands/diff.h"
#include "cli/output/changes.h"
#include "cli/output/format.h"
#include "cli/output/structured.h"
#include "cli/output/table.h"
#include "common/experiment/experiment.h"
#include "common/proto/experiment.h"
#include "common/string_view_compat.h"
#include "common/validation.h"

namespace rxfleet::cli {
namespace {

constexpr char kDocumentExample[] =
    "Document (docs/EXPERIMENTS.md):\n"
    "  apiVersion: rxfleet/v1\n  kind: Experiment\n  metadata: {name: hold-ab}\n  spec:\n"
    "    selector: {usbSpeeds: [super, high]}\n    arms:\n"
    "      - {name: control, settings: {hold: 1024us}}\n"
    "      - {name: short, settings: {hold: 32us}}\n"
    "    design: switchback\n    duration: 24h\n    periodLength: 30m\n    burnIn: 5m\n"
    "    primaryMetric: rx_throughput_bps\n"
    "    guardrails: [{metric: rx_drop_ratio, op: \"<=\", threshold: 0.05}]\n"
    "    segments: [usb_speed, board]";

// The experiment as the API carries it. ExperimentToProto covers the document's fields the
// API had when it was written; the per-arm minimums were added to the API later and are set
// here so a document's values always reach the server.
v1::Experiment ToProto(const experiments::Experiment& experiment) {
  v1::Experiment out = experiments::ExperimentToProto(experiment);
  v1::ExperimentSpec& spec = *out.mutable_spec();
  spec.set_min_adapters_per_arm(experiment.min_adapters_per_arm);
  spec.set_min_windows_per_arm(experiment.min_windows_per_arm);
  for (int i = 0; i < spec.guardrails_size() && i < static_cast<int>(experiment.guardrails.size());
       ++i) {
    const experiments::Guardrail& guardrail = experiment.guardrails[static_cast<size_t>(i)];
    if (guardrail.min_adapters)
      spec.mutable_guardrails(i)->set_min_adapters(*guardrail.min_adapters);
    if (guardrail.min_windows) spec.mutable_guardrails(i)->set_min_windows(*guardrail.min_windows);
  }
  return out;
}

absl::StatusOr<std::vector<experiments::Experiment>> ReadExperimentFiles(
    const std::vector<std::string>& files, std::istream& stdin_stream) {
  std::vector<experiments::Experiment> all;
  std::map<std::string, std::string> seen;  // name -> source
  for (const std::string& file : files) {
    auto text = ReadInputFile(file, stdin_stream);
    if (!text.ok()) return text.status();
    const std::string source = file == "-" ? "<stdin>" : file;
    auto parsed = experiments::ParseExperimentDocuments(*text, source);
    if (!parsed.ok()) return parsed.status();
    for (auto& experiment : *parsed) {
      auto [it, inserted] = seen.emplace(experiment.name, experiment.source);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(experiment.source, ": experiment '",
                                                       experiment.name, "' is also defined at ",
                                                       it->second));
      }
      all.push_back(std::move(experiment));
    }
  }
  if (all.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no Experiment documents in ",
                     files.size() == 1 ? (files[0] == "-" ? "<stdin>" : files[0]) : "the files"));
  }
  return all;
}

absl::Status ValidateFiles(const std::vector<std::string>& files) {
  if (files.empty()) return absl::InvalidArgumentError("-f/--filename is required");
  int stdin_count = 0;
  for (const auto& file : files) {
    if (file.empty()) return absl::InvalidArgumentError("-f/--filename: empty file name");
    if (file == "-") ++stdin_count;
  }
  if (stdin_count > 1) {
    return absl::InvalidArgumentError("-f/--filename: standard input (-) can be read only once");
  }
  return absl::OkStatus();
}

absl::Status WithName(const absl::Status& status, std::string_view name) {
  return absl::Status(
      status.code(), absl::StrCat("experiment/", common::ToAbslView(name), ": ", status.message()));
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

// Reads one answer line; true for y/yes (any case).
bool Confirmed(std::istream& in) {
  std::string line;
  if (!std::getline(in, line)) return false;
  const std::string answer = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line));
  return answer == "y" || answer == "yes";
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseSegment(std::string_view text) {
  std::map<std::string, std::string> segment;
  for (absl::string_view raw :
       absl::StrSplit(common::ToAbslView(text), ',', absl::SkipWhitespace())) {
    const absl::string_view term = absl::StripAsciiWhitespace(raw);
    const size_t eq = term.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--segment: '", term, "' must be key=value, e.g. usb_speed=high"));
    }
    const std::string key(absl::StripAsciiWhitespace(term.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(term.substr(eq + 1)));
    if (key.empty() || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--segment: '", term, "' needs both a key and a value"));
    }
    if (!segment.emplace(key, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("--segment: key '", key, "' given twice"));
    }
  }
  return segment;
}

void AddExperimentCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* experiment = root.add_subcommand(
      "experiment",
      "Create, report on, stop and promote A/B experiments of RX aggregation settings");
  experiment->alias("experiments");
  experiment->require_subcommand(1);
  experiment->footer(
      "Examples:\n  rxfleetctl experiment create -f hold-ab.yaml\n"
      "  rxfleetctl get experiments\n  rxfleetctl experiment report hold-ab\n"
      "  rxfleetctl experiment promote hold-ab short --segment usb_speed=super\n"
      "  rxfleetctl experiment stop hold-ab\n\n"
      "List and inspect with 'rxfleetctl get experiments' and 'rxfleetctl describe experiment "
      "NAME'. Reference: docs/EXPERIMENTS.md");

  {
    auto options = std::make_shared<ExperimentCreateOptions>();
    CLI::App* create = experiment->add_subcommand(
        "create", "Create experiments from YAML/JSON documents (kind Experiment)");
    create->footer(
        absl::StrCat("Examples:\n  rxfleetctl experiment create -f hold-ab.yaml\n"
                     "  rxfleetctl experiment create -f hold-ab.yaml --dry-run\n"
                     "  cat hold-ab.yaml | rxfleetctl experiment create -f -\n\n",
                     kDocumentExample));
    create->add_option("-f,--filename", options->files, "Experiment file, or - for standard input")
        ->type_name("FILE")
        ->required();
    create->add_flag("--dry-run", options->dry_run,
                     "Validate on the server and list the eligible adapters; store nothing");
    Select(create, selected, "experiment create", options,
           [](const ExperimentCreateOptions& o, FleetClient& client, const CommandContext& ctx) {
             if (auto s = ValidateFiles(o.files); !s.ok()) return s;
             return RunExperimentCreate(o, client, ctx);
           });
  }
  {
    auto options = std::make_shared<ExperimentReportOptions>();
    CLI::App* report =
        experiment->add_subcommand("report", "Show an experiment's results per segment");
    report->footer(
        "Examples:\n  rxfleetctl experiment report hold-ab\n"
        "  rxfleetctl experiment report hold-ab --segment usb_speed=high\n"
        "  rxfleetctl experiment report hold-ab -o json");
    report->add_option("NAME", options->name, "Experiment name")
        ->required()
        ->check(RuleCheck(&common::ValidateExperimentName));
    report->add_option("--segment", options->segment,
                       "Only segments with these values, e.g. usb_speed=high,board=pi1");
    report->add_option("-o,--output", options->output, "Output format")
        ->check(CLI::IsMember({"table", "json", "yaml"}))
        ->capture_default_str();
    Select(report, selected, "experiment report", options, RunExperimentReport);
  }
  {
    auto options = std::make_shared<ExperimentStopOptions>();
    CLI::App* stop = experiment->add_subcommand(
        "stop", "Stop an experiment; its adapters return to their policies");
    stop->footer(
        "Examples:\n  rxfleetctl experiment stop hold-ab\n"
        "  rxfleetctl experiment stop hold-ab --reason \"pi1 drops frames\"");
    stop->add_option("NAME", options->name, "Experiment name")
        ->required()
        ->check(RuleCheck(&common::ValidateExperimentName));
    stop->add_option("--reason", options->reason, "Why, recorded in status and the audit log");
    stop->add_option("--resource-version", options->resource_version,
                     "Stop only if the experiment still has this resource version");
    Select(stop, selected, "experiment stop", options, RunExperimentStop);
  }
  {
    auto options = std::make_shared<ExperimentPromoteOptions>();
    CLI::App* promote = experiment->add_subcommand(
        "promote", "Write an arm's settings as a policy (shows what changes first)");
    promote->footer(
        "Examples:\n  rxfleetctl experiment promote hold-ab short --dry-run\n"
        "  rxfleetctl experiment promote hold-ab short --segment usb_speed=super "
        "--name usb3-short-hold\n"
        "  rxfleetctl experiment promote hold-ab short --yes\n\n"
        "Without --yes it asks for confirmation when standard input is a terminal; otherwise it "
        "prints what would change and exits 1.");
    promote->add_option("NAME", options->name, "Experiment name")
        ->required()
        ->check(RuleCheck(&common::ValidateExperimentName));
    promote->add_option("ARM", options->arm, "Arm to promote")->required();
    promote->add_option("--segment", options->segment,
                        "Only this segment, e.g. usb_speed=super or usb_speed=super,board=x86: "
                        "any of the experiment's segment keys, each named one becomes a "
                        "selector term");
    promote->add_option("--name", options->policy_name, "Policy to write (default EXPERIMENT-ARM)");
    promote->add_option_function<int32_t>(
        "--priority", [options](const int32_t& priority) { options->priority = priority; },
        "Priority of the policy (default: the experiment's), -1000..1000");
    promote->add_flag("--dry-run", options->dry_run, "Show what would change; write nothing");
    promote->add_flag("-y,--yes", options->yes, "Write without asking for confirmation");
    Select(promote, selected, "experiment promote", options, RunExperimentPromote);
  }
}

absl::Status RunExperimentCreate(const ExperimentCreateOptions& options, FleetClient& client,
                                 const CommandContext& ctx) {
  auto parsed = ReadExperimentFiles(options.files, *ctx.streams.in);
  if (!parsed.ok()) return parsed.status();
  std::ostream& out = *ctx.streams.out;
  for (const experiments::Experiment& experiment : *parsed) {
    v1::CreateExperimentRequest request;
    *request.mutable_experiment() = ToProto(experiment);
    request.set_dry_run(options.dry_run);
    auto response = client.CreateExperiment(request);
    if (!response.ok()) {
      return absl::Status(response.status().code(),
                          absl::StrCat("experiment/", experiment.name, " (", experiment.source,
                                       "): ", response.status().message()));
    }
    const int eligible = response->eligible_adapters_size();
    out << "experiment/" << experiment.name << " created" << (options.dry_run ? " (dry run)" : "")
        << ": " << eligible << (eligible == 1 ? " eligible adapter" : " eligible adapters") << '\n';
    std::vector<std::pair<std::string, std::string>> adapters;
    for (const auto& ref : response->eligible_adapters()) {
      adapters.emplace_back(ref.host_id(), ref.name());
    }
    std::sort(adapters.begin(), adapters.end());
    if (!adapters.empty()) {
      Table table({"HOST", "ADAPTER"});
      for (auto& [host, adapter] : adapters) table.AddRow({host.empty() ? "-" : host, adapter});
      table.Print(out, "  ");
    }
    // Adapters the selector matches that will not take part, with the server's reason.
    const int ineligible = response->ineligible_adapters_size();
    if (ineligible > 0) {
      out << ineligible << (ineligible == 1 ? " adapter" : " adapters")
          << " matched but not eligible:\n";
      std::vector<std::array<std::string, 3>> rows;
      for (const v1::IneligibleAdapter& a : response->ineligible_adapters()) {
        rows.push_back({a.adapter().host_id().empty() ? "-" : a.adapter().host_id(),
                        a.adapter().name(), a.reason()});
      }
      std::sort(rows.begin(), rows.end());
      Table table({"HOST", "ADAPTER", "REASON"});
      for (const auto& row : rows) table.AddRow({row[0], row[1], row[2]});
      table.Print(out, "  ");
    }
  }
  return absl::OkStatus();
}

absl::Status RunExperimentReport(const ExperimentReportOptions& options, FleetClient& client,
                                 const CommandContext& ctx) {
  auto segment = ParseSegment(options.segment);
  if (!segment.ok()) return segment.status();
  if (options.output != "table" && options.output != "json" && options.output != "yaml") {
    return absl::InvalidArgumentError(absl::StrCat("-o/--output: unknown format '", options.output,
                                                   "' (expected table, json or yaml)"));
  }
  v1::GetExperimentReportRequest request;
  request.set_name(options.name);
  request.mutable_segment()->insert(segment->begin(), segment->end());
  auto report = client.GetExperimentReport(request);
  if (!report.ok()) return WithName(report.status(), options.name);
  if (options.output == "json")
    return PrintStructured(*report, OutputFormat::kJson, *ctx.streams.out);
  if (options.output == "yaml")
    return PrintStructured(*report, OutputFormat::kYaml, *ctx.streams.out);
  if (report->text().empty()) {
    return absl::InternalError(absl::StrCat("experiment/", options.name,
                                            ": the server sent no text rendering of the report; "
                                            "use -o json or -o yaml"));
  }
  *ctx.streams.out << report->text();
  if (report->text().back() != '\n') *ctx.streams.out << '\n';
  return absl::OkStatus();
}

absl::Status RunExperimentStop(const ExperimentStopOptions& options, FleetClient& client,
                               const CommandContext& ctx) {
  v1::StopExperimentRequest request;
  request.set_name(options.name);
  request.set_reason(options.reason);
  request.set_resource_version(options.resource_version);
  auto experiment = client.StopExperiment(request);
  if (!experiment.ok()) return WithName(experiment.status(), options.name);
  *ctx.streams.out << "experiment/" << options.name << " stopped (phase "
                   << ExperimentPhaseWord(experiment->status().phase())
                   << "); its adapters return to their policies\n";
  return absl::OkStatus();
}

absl::Status RunExperimentPromote(const ExperimentPromoteOptions& options, FleetClient& client,
                                  const CommandContext& ctx) {
  auto segment = ParseSegment(options.segment);
  if (!segment.ok()) return segment.status();
  if (options.priority && (*options.priority < -1000 || *options.priority > 1000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--priority: ", *options.priority, " is out of range -1000..1000"));
  }
  v1::PromoteExperimentRequest request;
  request.set_name(options.name);
  request.set_arm(options.arm);
  request.mutable_segment()->insert(segment->begin(), segment->end());
  request.set_policy_name(options.policy_name);
  if (options.priority) request.set_priority(*options.priority);
  request.set_dry_run(true);
  auto preview = client.PromoteExperiment(request);
  if (!preview.ok()) return WithName(preview.status(), options.name);

  // What would be written: a diff against the stored policy of that name, if any.
  std::ostream& out = *ctx.streams.out;
  const std::string& policy_name = preview->policy().metadata().name();
  v1::GetPolicyRequest get;
  get.set_name(policy_name);
  auto stored = client.GetPolicy(get);
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  std::string before;
  if (stored.ok()) {
    auto text = PolicyDocument(*stored);
    if (!text.ok()) return text.status();
    before = *std::move(text);
  }
  auto after = PolicyDocument(preview->policy());
  if (!after.ok()) return after.status();
  const int affected = preview->affected_adapters_size();
  out << "experiment/" << options.name << " arm " << options.arm << " -> policy/" << policy_name
      << (stored.ok() ? " (changed)" : " (new)") << ": " << affected
      << (affected == 1 ? " adapter" : " adapters") << " affected once the experiment ends\n";
  out << LineDiff(before, *after);
  PrintAffectedAdapters(preview->affected_adapters(), out);
  out.flush();
  if (options.dry_run) {
    out << "Dry run: nothing written.\n";
    return absl::OkStatus();
  }
  if (!options.yes) {
    if (!ctx.stdin_is_terminal) {
      return absl::FailedPreconditionError(
          absl::StrCat("policy/", policy_name,
                       " not written: pass --yes to promote without a prompt (standard input is "
                       "not a terminal), or --dry-run to only show the change"));
    }
    *ctx.streams.err << "Write policy/" << policy_name << "? [y/N]: ";
    ctx.streams.err->flush();
    if (!Confirmed(*ctx.streams.in)) {
      return absl::FailedPreconditionError(
          absl::StrCat("policy/", policy_name, " not written (not confirmed)"));
    }
  }
  request.set_dry_run(false);
  auto written = client.PromoteExperiment(request);
  if (!written.ok()) return WithName(written.status(), options.name);
  out << "policy/" << written->policy().metadata().name() << " written from experiment/"
      << options.name << " arm " << options.arm;
  if (written->policy().metadata().generation() != 0) {
    out << " (generation " << written->policy().metadata().generation() << ")";
  }
  out << '\n';
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
