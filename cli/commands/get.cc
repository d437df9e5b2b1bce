#include "cli/commands/get.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/client/paging.h"
#include "cli/output/resources.h"
#include "cli/output/structured.h"
#include "common/policy/selectors.h"

namespace rxfleet::cli {
namespace {

struct KindInfo {
  ResourceKind kind;
  const char* name;   // subcommand (plural)
  const char* alias;  // singular
  const char* name_help;
  const char* example;
};

constexpr KindInfo kKinds[] = {
    {ResourceKind::kHost, "hosts", "host", "Host name (omit to list)",
     "  rxfleetctl get hosts\n  rxfleetctl get hosts -l board=pi1 -o wide\n"
     "  rxfleetctl get host pi1 -o yaml"},
    {ResourceKind::kAdapter, "adapters", "adapter",
     "HOST/ADAPTER, e.g. pi1/port-2-2 (omit to list)",
     "  rxfleetctl get adapters\n"
     "  rxfleetctl get adapters -l board=pi1 --field-selector usb_speed=super,chip=rtl8922au\n"
     "  rxfleetctl get adapter pi1/port-2-2 -o json"},
    {ResourceKind::kPolicy, "policies", "policy", "Policy name (omit to list)",
     "  rxfleetctl get policies\n  rxfleetctl get policy usb3-short -o yaml"},
};

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

}  // namespace

void AddGetCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* get = root.add_subcommand("get", "List hosts, adapters or policies, or show one");
  get->require_subcommand(1);
  get->footer(
      "Example:\n  rxfleetctl get adapters -l board=pi1 -o wide\n\n"
      "Resources: hosts (host), adapters (adapter), policies (policy).");
  for (const KindInfo& info : kKinds) {
    auto options = std::make_shared<GetOptions>();
    options->kind = info.kind;
    CLI::App* sub = get->add_subcommand(info.name, std::string("Get ") + info.name);
    sub->alias(info.alias);
    sub->footer(std::string("Examples:\n") + info.example);
    sub->add_option("NAME", options->name, info.name_help);
    sub->add_option("-l,--selector", options->label_selector,
                    "Label selector over host labels, e.g. board=pi1,arch!=armv6l");
    if (info.kind != ResourceKind::kPolicy) {
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
    if (options.kind == ResourceKind::kPolicy) {
      return absl::InvalidArgumentError("--field-selector: policies have no field selector");
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
  }
  return absl::InternalError("unknown resource kind");
}

}  // namespace rxfleet::cli
