#include "cli/commands/get.h"

#include <algorithm>
#include <map>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cli/client/paging.h"
#include "cli/commands/watch.h"
#include "cli/output/events.h"
#include "cli/output/resources.h"
#include "cli/output/structured.h"
#include "cli/output/table.h"
#include "common/policy/selectors.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::cli {
namespace {

// `get events` shows at most this many of the newest events.

struct KindInfo {
  ResourceKind kind;
  const char* name;   // subcommand (plural)
  const char* alias;  // singular
  const char* name_help;
  const char* description;
  const char* example;
};

constexpr KindInfo kKinds[] = {
    {ResourceKind::kHost, "hosts", "host", "Host name (omit to list)",
     "List hosts (connection, agent, bundle ACKs) or show one",
     "  rxfleetctl get hosts\n  rxfleetctl get hosts -l board=pi1 -o wide\n"
     "  rxfleetctl get host pi1 -o yaml"},
    {ResourceKind::kAdapter, "adapters", "adapter",
     "HOST/ADAPTER, e.g. pi1/port-2-2 (omit to list)",
     "List adapters (chip, USB speed, hold desired/observed, state) or show one",
     "  rxfleetctl get adapters\n"
     "  rxfleetctl get adapters -l board=pi1 --field-selector usb_speed=super,chip=rtl8922au\n"
     "  rxfleetctl get adapter pi1/port-2-2 -o json"},
    {ResourceKind::kPolicy, "policies", "policy", "Policy name (omit to list)",
     "List RX aggregation policies or show one",
     "  rxfleetctl get policies\n  rxfleetctl get policy usb3-short -o yaml"},
    {ResourceKind::kExperiment, "experiments", "experiment", "Experiment name (omit to list)",
     "List experiments (phase, arms, progress) or show one",
     "  rxfleetctl get experiments -o wide\n  rxfleetctl get experiment hold-ab -o yaml"},
    {ResourceKind::kEvent, "events", "event", "",
     "List recent fleet events (newest 500, or --limit)",
     "  rxfleetctl get events\n  rxfleetctl get events --host pi1 --type warning\n"
     "  rxfleetctl get events --kind adapter --name port-2-2 -o json"},
};

// "usb_speed=super, chip!=x" -> the keys, in order; terms without '=' yield the whole term.
std::vector<std::string> SelectorKeys(std::string_view text) {
  std::vector<std::string> keys;
  for (absl::string_view term :
       absl::StrSplit(common::ToAbslView(text), ',', absl::SkipWhitespace())) {
    size_t end = term.find_first_of("!=");
    absl::string_view key = absl::StripAsciiWhitespace(term.substr(0, end));
    keys.emplace_back(key);
  }
  return keys;
}

absl::Status PrintEmptyOrList(const google::protobuf::Message& list, std::string_view field,
                              size_t count, OutputFormat format, const CommandContext& ctx) {
  if (count == 0) PrintNoResources(ctx.streams);
  if (format == OutputFormat::kJson || format == OutputFormat::kYaml) {
    return PrintStructured(list, format, *ctx.streams.out, field);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status PrintNames(const std::vector<T>& items, std::ostream& out) {
  std::vector<std::string> names;
  for (const auto& item : items) names.push_back(ResourceName(item));
  std::sort(names.begin(), names.end());
  for (const auto& name : names) out << name << '\n';
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, v1::Host>> HostsById(
    FleetClient& client, const std::vector<v1::Adapter>& adapters) {
  std::map<std::string, v1::Host> hosts;
  if (adapters.empty()) return hosts;
  if (adapters.size() == 1) {
    v1::GetHostRequest request;
    request.set_name(adapters[0].host_id());
    auto host = client.GetHost(request);
    if (host.ok()) {
      hosts.emplace(adapters[0].host_id(), *std::move(host));
    } else if (!absl::IsNotFound(host.status())) {
      return host.status();
    }
    return hosts;
  }
  auto all = ListAllHosts(client, v1::ListHostsRequest());
  if (!all.ok()) return all.status();
  for (auto& host : *all) {
    std::string name = host.metadata().name();
    hosts.emplace(std::move(name), std::move(host));
  }
  return hosts;
}

absl::Status GetHosts(const GetOptions& options, OutputFormat format, FleetClient& client,
                      const CommandContext& ctx) {
  std::vector<v1::Host> hosts;
  if (!options.name.empty()) {
    v1::GetHostRequest request;
    request.set_name(options.name);
    auto host = client.GetHost(request);
    if (!host.ok()) return host.status();
    if (format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return PrintStructured(*host, format, *ctx.streams.out);
    }
    hosts.push_back(*std::move(host));
  } else {
    v1::ListHostsRequest request;
    request.set_label_selector(options.label_selector);
    request.set_field_selector(options.field_selector);
    auto listed = ListAllHosts(client, request);
    if (!listed.ok()) return listed.status();
    hosts = *std::move(listed);
    v1::ListHostsResponse list;
    for (const auto& host : hosts) *list.add_hosts() = host;
    if (auto s = PrintEmptyOrList(list, "hosts", hosts.size(), format, ctx); !s.ok()) {
      return s;
    }
    if (hosts.empty() || format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return absl::OkStatus();
    }
  }
  if (format == OutputFormat::kName) return PrintNames(hosts, *ctx.streams.out);
  PrintHostTable(hosts, format == OutputFormat::kWide, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status GetAdapters(const GetOptions& options, OutputFormat format, FleetClient& client,
                         const CommandContext& ctx) {
  std::vector<v1::Adapter> adapters;
  if (!options.name.empty()) {
    auto ref = ParseAdapterRef(options.name);
    if (!ref.ok()) return ref.status();
    v1::GetAdapterRequest request;
    request.set_host_id(ref->first);
    request.set_name(ref->second);
    auto adapter = client.GetAdapter(request);
    if (!adapter.ok()) return adapter.status();
    if (format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return PrintStructured(*adapter, format, *ctx.streams.out);
    }
    adapters.push_back(*std::move(adapter));
  } else {
    v1::ListAdaptersRequest request;
    request.set_label_selector(options.label_selector);
    request.set_field_selector(options.field_selector);
    request.set_include_gone(options.include_gone);
    auto listed = ListAllAdapters(client, request);
    if (!listed.ok()) return listed.status();
    adapters = *std::move(listed);
    v1::ListAdaptersResponse list;
    for (const auto& adapter : adapters) *list.add_adapters() = adapter;
    if (auto s = PrintEmptyOrList(list, "adapters", adapters.size(), format, ctx); !s.ok()) {
      return s;
    }
    if (adapters.empty() || format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return absl::OkStatus();
    }
  }
  if (format == OutputFormat::kName) return PrintNames(adapters, *ctx.streams.out);
  std::map<std::string, v1::Host> hosts;
  if (format == OutputFormat::kWide) {
    auto by_id = HostsById(client, adapters);
    if (!by_id.ok()) return by_id.status();
    hosts = *std::move(by_id);
  }
  PrintAdapterTable(adapters, hosts, format == OutputFormat::kWide, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status GetPolicies(const GetOptions& options, OutputFormat format, FleetClient& client,
                         const CommandContext& ctx) {
  std::vector<v1::Policy> policies;
  if (!options.name.empty()) {
    v1::GetPolicyRequest request;
    request.set_name(options.name);
    auto policy = client.GetPolicy(request);
    if (!policy.ok()) return policy.status();
    if (format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return PrintStructured(*policy, format, *ctx.streams.out);
    }
    policies.push_back(*std::move(policy));
  } else {
    v1::ListPoliciesRequest request;
    request.set_label_selector(options.label_selector);
    auto listed = ListAllPolicies(client, request);
    if (!listed.ok()) return listed.status();
    policies = *std::move(listed);
    v1::ListPoliciesResponse list;
    for (const auto& policy : policies) *list.add_policies() = policy;
    if (auto s = PrintEmptyOrList(list, "policies", policies.size(), format, ctx); !s.ok()) {
      return s;
    }
    if (policies.empty() || format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return absl::OkStatus();
    }
  }
  if (format == OutputFormat::kName) return PrintNames(policies, *ctx.streams.out);
  PrintPolicyTable(policies, format == OutputFormat::kWide, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status GetExperiments(const GetOptions& options, OutputFormat format, FleetClient& client,
                            const CommandContext& ctx) {
  std::vector<v1::Experiment> experiments;
  if (!options.name.empty()) {
    v1::GetExperimentRequest request;
    request.set_name(options.name);
    auto experiment = client.GetExperiment(request);
    if (!experiment.ok()) return experiment.status();
    if (format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return PrintStructured(*experiment, format, *ctx.streams.out);
    }
    experiments.push_back(*std::move(experiment));
  } else {
    v1::ListExperimentsRequest request;
    request.set_label_selector(options.label_selector);
    auto listed = ListAllExperiments(client, request);
    if (!listed.ok()) return listed.status();
    experiments = *std::move(listed);
    v1::ListExperimentsResponse list;
    for (const auto& experiment : experiments) *list.add_experiments() = experiment;
    if (auto s = PrintEmptyOrList(list, "experiments", experiments.size(), format, ctx); !s.ok()) {
      return s;
    }
    if (experiments.empty() || format == OutputFormat::kJson || format == OutputFormat::kYaml) {
      return absl::OkStatus();
    }
  }
  if (format == OutputFormat::kName) return PrintNames(experiments, *ctx.streams.out);
  PrintExperimentTable(experiments, format == OutputFormat::kWide, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

// The audit log as TIME, ACTOR, ACTION, OBJECT, VERSIONS (before -> after), RESULT.
void PrintAuditTable(const std::vector<v1::Event>& events, std::ostream& out) {
  Table table({"TIME", "ACTOR", "ACTION", "OBJECT", "VERSIONS", "RESULT"});
  for (const v1::Event& event : events) {
    const v1::AuditRecord& audit = event.audit();
    const std::string versions =
        audit.old_resource_version().empty() && audit.new_resource_version().empty()
            ? "-"
            : absl::StrCat(
                  audit.old_resource_version().empty() ? "-" : audit.old_resource_version(), " -> ",
                  audit.new_resource_version().empty() ? "-" : audit.new_resource_version());
    table.AddRow({absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", common::TimeFromProto(event.last_time()),
                                   absl::UTCTimeZone()),
                  audit.actor(), absl::StrCat(audit.action(), audit.dry_run() ? " (dry run)" : ""),
                  EventObject(event), versions, audit.result_code()});
  }
  table.Print(out);
}

absl::Status GetEvents(const GetOptions& options, OutputFormat format, FleetClient& client,
                       const CommandContext& ctx) {
  auto filter = EventFilterRequest(options.event_host, options.event_kind, options.event_name,
                                   options.event_type);
  if (!filter.ok()) return filter.status();
  filter->set_audit(options.event_audit);
  auto events = ListRecentEvents(client, *filter, options.event_limit);
  if (!events.ok()) return events.status();
  v1::ListEventsResponse list;
  for (const auto& event : *events) *list.add_events() = event;
  if (auto s = PrintEmptyOrList(list, "events", events->size(), format, ctx); !s.ok()) return s;
  if (events->empty() || format == OutputFormat::kJson || format == OutputFormat::kYaml) {
    return absl::OkStatus();
  }
  if (format == OutputFormat::kName) {
    for (const auto& event : *events) *ctx.streams.out << ResourceName(event) << '\n';
    return absl::OkStatus();
  }
  if (options.event_audit) {
    PrintAuditTable(*events, *ctx.streams.out);
    return absl::OkStatus();
  }
  PrintEventTable(*events, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> FieldSelectorKeys(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kHost:
      return {"connected", "stale"};
    case ResourceKind::kAdapter:
      return {"usb_speed", "chip", "vid_pid", "host", "adapter"};
    default:
      return {};
  }
}

void AddGetCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* get = root.add_subcommand(
      "get", "List hosts, adapters, policies, experiments or events, or show one");
  get->require_subcommand(0, 1);
  get->footer(
      "Examples:\n  rxfleetctl get adapters -l board=pi1 -o wide\n"
      "  rxfleetctl get experiments\n\n"
      "Resources: hosts (host), adapters (adapter), policies (policy), experiments "
      "(experiment), events (event).");
  RejectUnknownResourceTypes(*get, kGetResourceTypes);
  for (const KindInfo& info : kKinds) {
    auto options = std::make_shared<GetOptions>();
    options->kind = info.kind;
    CLI::App* sub = get->add_subcommand(info.name, info.description);
    sub->alias(info.alias);
    sub->footer(std::string("Examples:\n") + info.example);
    if (info.kind != ResourceKind::kEvent) {
      sub->add_option("NAME", options->name, info.name_help);
      sub->add_option("-l,--selector", options->label_selector,
                      info.kind == ResourceKind::kPolicy ? "Label selector over policy labels"
                      : info.kind == ResourceKind::kExperiment
                          ? "Label selector over experiment labels"
                          : "Label selector over host labels, "
                            "e.g. board=pi1,arch!=armv6l");
    } else {
      sub->add_option("--host", options->event_host, "Only events of this host");
      sub->add_option("--limit", options->event_limit, "Newest events to show (default 500)")
          ->check(CLI::Range(size_t{1}, size_t{10000}));
      sub->add_option("--kind", options->event_kind, "Only events about this kind of object")
          ->check(CLI::IsMember({"host", "adapter", "policy", "experiment", "holdtuning"},
                                CLI::ignore_case));
      sub->add_option("--name", options->event_name, "Only events about objects with this name");
      sub->add_option("--type", options->event_type, "Only normal or warning events")
          ->check(CLI::IsMember({"normal", "warning"}, CLI::ignore_case));
      sub->add_flag("--audit", options->event_audit,
                    "The audit log instead: API changes with actor, action, object, resource "
                    "versions and result");
    }
    if (info.kind == ResourceKind::kHost || info.kind == ResourceKind::kAdapter) {
      sub->add_option("--field-selector", options->field_selector,
                      info.kind == ResourceKind::kAdapter
                          ? "Field selector: usb_speed, chip, vid_pid, host, adapter "
                            "(e.g. usb_speed=super,chip=rtl8922au)"
                          : "Field selector: connected, stale (e.g. connected=true)");
    }
    if (info.kind == ResourceKind::kAdapter) {
      sub->add_flag("--include-gone", options->include_gone, "Also list unplugged adapters");
    }
    sub->add_option("-o,--output", options->output, "Output format")
        ->check(CLI::IsMember(OutputFormatNames()))
        ->capture_default_str();
    const std::string path = std::string("get ") + info.name;
    sub->callback([options, selected, path] {
      selected->path = path;
      selected->target = CommandTarget::kServer;
      selected->run = [options](const CommandContext& ctx) -> absl::Status {
        if (auto s = ValidateGetOptions(*options); !s.ok()) return s;
        auto client = ctx.fleet();
        if (!client.ok()) return client.status();
        return RunGet(*options, **client, ctx);
      };
    });
  }
}

absl::Status ValidateGetOptions(const GetOptions& options) {
  if (auto format = ParseOutputFormat(options.output); !format.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("-o/--output: ", format.status().message()));
  }
  if (!options.label_selector.empty()) {
    if (auto parsed = common::ParseLabelSelector(options.label_selector); !parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("-l/--selector: ", parsed.status().message()));
    }
  }
  if (!options.field_selector.empty()) {
    const std::vector<std::string> valid = FieldSelectorKeys(options.kind);
    if (valid.empty()) {
      return UsageError("--field-selector: only hosts and adapters have a field selector");
    }
    for (const std::string& key : SelectorKeys(options.field_selector)) {
      if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
        return UsageError(absl::StrCat("--field-selector: unknown field '", key,
                                       "'; valid fields: ", absl::StrJoin(valid, ", ")));
      }
    }
    if (options.kind == ResourceKind::kHost) {
      for (absl::string_view term :
           absl::StrSplit(options.field_selector, ',', absl::SkipWhitespace())) {
        const size_t eq = term.find('=');
        absl::string_view value = absl::StripAsciiWhitespace(
            eq == absl::string_view::npos ? absl::string_view() : term.substr(eq + 1));
        if (!value.empty() && value[0] == '=') value.remove_prefix(1);
        const std::string lower = absl::AsciiStrToLower(value);
        if (lower != "true" && lower != "false") {
          return absl::InvalidArgumentError(
              absl::StrCat("--field-selector: '", absl::StripAsciiWhitespace(term),
                           "': connected and stale take true or false (e.g. connected=true)"));
        }
      }
    }
    if (options.kind == ResourceKind::kAdapter) {
      if (auto parsed = common::ParseFieldSelector(options.field_selector); !parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--field-selector: ", parsed.status().message()));
      }
    }
  }
  if (options.include_gone && options.kind != ResourceKind::kAdapter) {
    return absl::InvalidArgumentError("--include-gone: only adapters can be gone");
  }
  if (!options.name.empty()) {
    if (!options.label_selector.empty() || !options.field_selector.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NAME '", options.name, "' cannot be combined with selectors"));
    }
    if (options.kind == ResourceKind::kAdapter) {
      if (auto ref = ParseAdapterRef(options.name); !ref.ok()) return ref.status();
    }
  }
  return absl::OkStatus();
}

absl::Status RunGet(const GetOptions& options, FleetClient& client, const CommandContext& ctx) {
  auto format = ParseOutputFormat(options.output);
  if (!format.ok()) return format.status();
  switch (options.kind) {
    case ResourceKind::kHost:
      return GetHosts(options, *format, client, ctx);
    case ResourceKind::kAdapter:
      return GetAdapters(options, *format, client, ctx);
    case ResourceKind::kPolicy:
      return GetPolicies(options, *format, client, ctx);
    case ResourceKind::kExperiment:
      return GetExperiments(options, *format, client, ctx);
    case ResourceKind::kEvent:
      return GetEvents(options, *format, client, ctx);
  }
  return absl::InternalError("unknown resource kind");
}

}  // namespace rxfleet::cli
