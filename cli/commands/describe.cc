#include "cli/commands/describe.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/client/paging.h"
#include "cli/output/describe.h"
#include "common/policy/resolver.h"
#include "common/proto/convert.h"
#include "common/proto/probe.h"

namespace rxfleet::cli {
namespace {

absl::StatusOr<std::vector<v1::Event>> EventsAbout(FleetClient& client, std::string_view kind,
                                                   std::string_view name,
                                                   std::string_view host_id) {
  v1::ListEventsRequest request;
  request.set_involved_object_kind(std::string(kind));
  request.set_involved_object_name(std::string(name));
  request.set_host_id(std::string(host_id));
  return ListRecentEvents(client, request, kDescribeEventCount);
}

absl::Status DescribeHostCommand(const DescribeOptions& options, FleetClient& client,
                                 const CommandContext& ctx) {
  v1::GetHostRequest request;
  request.set_name(options.name);
  auto host = client.GetHost(request);
  if (!host.ok()) return host.status();
  v1::ListAdaptersRequest adapters_request;
  adapters_request.set_field_selector(absl::StrCat("host=", options.name));
  auto adapters = ListAllAdapters(client, adapters_request);
  if (!adapters.ok()) return adapters.status();
  // Everything that happened on the host: its own events and its adapters'.
  v1::ListEventsRequest events_request;
  events_request.set_host_id(options.name);
  auto events = ListRecentEvents(client, events_request, kDescribeEventCount);
  if (!events.ok()) return events.status();
  DescribeHost(*host, *adapters, *events, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

}  // namespace

std::optional<AdapterProbe> ResolveAdapterProbe(const v1::Adapter& adapter,
                                                const std::vector<v1::Policy>& policies) {
  std::vector<common::Policy> valid;
  valid.reserve(policies.size());
  for (const v1::Policy& policy : policies) {
    absl::StatusOr<common::Policy> value = common::PolicyFromProto(policy, "server");
    if (value.ok()) valid.push_back(*std::move(value));  // the server skips invalid ones too
  }
  const std::vector<common::PolicyLayer> layers = {{common::PolicySource::kServerPolicy, &valid}};
  std::optional<common::Resolved<common::ProbeSpec>> probe =
      common::ResolveProbe(common::AdapterAttributesFromProto(
                               adapter, common::LabelsFromProto(adapter.metadata().labels())),
                           layers);
  if (!probe) return std::nullopt;
  return AdapterProbe{probe->provenance.name, common::ProbeSpecToProto(probe->value)};
}

namespace {

absl::Status DescribeAdapterCommand(const DescribeOptions& options, FleetClient& client,
                                    const CommandContext& ctx) {
  auto ref = ParseAdapterRef(options.name);
  if (!ref.ok()) return ref.status();
  v1::ExplainAdapterRequest request;
  request.set_host_id(ref->first);
  request.set_name(ref->second);
  auto explain = client.ExplainAdapter(request);
  if (!explain.ok()) return explain.status();
  auto policies = ListAllPolicies(client, v1::ListPoliciesRequest());
  if (!policies.ok()) return policies.status();
  auto events = EventsAbout(client, "Adapter", ref->second, ref->first);
  if (!events.ok()) return events.status();
  DescribeAdapter(*explain, ResolveAdapterProbe(explain->adapter(), *policies), *events, ctx.now,
                  *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status DescribePolicyCommand(const DescribeOptions& options, FleetClient& client,
                                   const CommandContext& ctx) {
  v1::GetPolicyRequest request;
  request.set_name(options.name);
  auto policy = client.GetPolicy(request);
  if (!policy.ok()) return policy.status();
  auto events = EventsAbout(client, "Policy", options.name, "");
  if (!events.ok()) return events.status();
  DescribePolicy(*policy, *events, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

absl::Status DescribeExperimentCommand(const DescribeOptions& options, FleetClient& client,
                                       const CommandContext& ctx) {
  v1::GetExperimentRequest request;
  request.set_name(options.name);
  auto experiment = client.GetExperiment(request);
  if (!experiment.ok()) return experiment.status();
  auto events = EventsAbout(client, "Experiment", options.name, "");
  if (!events.ok()) return events.status();
  DescribeExperiment(*experiment, *events, ctx.now, *ctx.streams.out);
  return absl::OkStatus();
}

constexpr char kDescribeTypes[] = "host, adapter, policy, experiment";

struct KindInfo {
  ResourceKind kind;
  const char* name;
  const char* alias;
  const char* name_help;
  const char* example;
};

constexpr KindInfo kKinds[] = {
    {ResourceKind::kHost, "host", "hosts", "Host name", "  rxfleetctl describe host pi1"},
    {ResourceKind::kAdapter, "adapter", "adapters", "HOST/ADAPTER, e.g. pi1/port-2-2",
     "  rxfleetctl describe adapter pi1/port-2-2"},
    {ResourceKind::kPolicy, "policy", "policies", "Policy name",
     "  rxfleetctl describe policy usb3-short"},
    {ResourceKind::kExperiment, "experiment", "experiments", "Experiment name",
     "  rxfleetctl describe experiment hold-ab"},
};

}  // namespace

void AddDescribeCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* describe = root.add_subcommand(
      "describe",
      "Show everything about one host, adapter, policy or experiment, with recent events");
  describe->require_subcommand(0, 1);
  describe->footer(
      "Examples:\n  rxfleetctl describe adapter pi1/port-2-2\n"
      "  rxfleetctl describe experiment hold-ab");
  RejectUnknownResourceTypes(*describe, kDescribeTypes);
  for (const KindInfo& info : kKinds) {
    auto options = std::make_shared<DescribeOptions>();
    options->kind = info.kind;
    CLI::App* sub = describe->add_subcommand(info.name, std::string("Describe a ") + info.name);
    sub->alias(info.alias);
    sub->footer(std::string("Example:\n") + info.example);
    sub->add_option("NAME", options->name, info.name_help)->required();
    const std::string path = std::string("describe ") + info.name;
    sub->callback([options, selected, path] {
      selected->path = path;
      selected->target = CommandTarget::kServer;
      selected->run = [options](const CommandContext& ctx) -> absl::Status {
        if (auto s = ValidateDescribeOptions(*options); !s.ok()) return s;
        auto client = ctx.fleet();
        if (!client.ok()) return client.status();
        return RunDescribe(*options, **client, ctx);
      };
    });
  }
}

absl::Status ValidateDescribeOptions(const DescribeOptions& options) {
  if (options.name.empty()) return absl::InvalidArgumentError("NAME is required");
  if (options.kind == ResourceKind::kAdapter) {
    if (auto ref = ParseAdapterRef(options.name); !ref.ok()) return ref.status();
  }
  return absl::OkStatus();
}

absl::Status RunDescribe(const DescribeOptions& options, FleetClient& client,
                         const CommandContext& ctx) {
  switch (options.kind) {
    case ResourceKind::kHost:
      return DescribeHostCommand(options, client, ctx);
    case ResourceKind::kAdapter:
      return DescribeAdapterCommand(options, client, ctx);
    case ResourceKind::kPolicy:
      return DescribePolicyCommand(options, client, ctx);
    case ResourceKind::kExperiment:
      return DescribeExperimentCommand(options, client, ctx);
    case ResourceKind::kEvent:
      break;
  }
  return absl::InternalError("unknown resource kind");
}

}  // namespace rxfleet::cli
