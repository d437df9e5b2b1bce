#include "agent/link/agent_binding.h"

#include <utility>

#include "absl/strings/match.h"
#include "agent/experiments/metric_window_proto.h"
#include "agent/status/adapter_proto.h"
#include "common/proto/time.h"
#include "rxfleet/version.h"

namespace rxfleet::agent {
namespace {

// "0.0.0.0:9477" -> "<hostname>:9477"; other addresses unchanged.
std::string ReachableAddress(const std::string& address, const std::string& hostname) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || hostname.empty()) return address;
  const std::string host = address.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") {
    return hostname + address.substr(colon);
  }
  return address;
}

}  // namespace

v1::Hello AgentHello(const Agent& agent) {
  v1::Hello hello;
  hello.set_host_id(agent.host_id());
  for (const auto& [key, value] : agent.labels()) (*hello.mutable_labels())[key] = value;
  hello.set_agent_version(std::string(rxfleet::kVersion));
  for (const char* capability : {"rx_agg.v1", "rx_agg.v2", "rx_agg.v3", "local_policy",
                                 "experiments", "metric_windows", "probes"}) {
    hello.add_capabilities(capability);
  }
  const HostFacts& facts = agent.host_facts();
  // The configured address until the endpoint is bound (then AgentLinkBinding announces the
  // bound one); an ephemeral port ("HOST:0") is nothing a scraper can use.
  const std::string& configured = agent.options().metrics_address;
  if (!configured.empty() && !absl::EndsWith(configured, ":0")) {
    hello.set_metrics_address(ReachableAddress(configured, facts.hostname));
  }
  HostFactsToProto(facts, hello.mutable_host_info());
  return hello;
}

absl::StatusOr<std::unique_ptr<AgentLinkBinding>> AgentLinkBinding::Create(
    Agent* agent, const std::vector<std::string>& server_addresses, std::optional<LinkTlsFiles> tls,
    LogSink log) {
  std::unique_ptr<AgentLinkBinding> binding(new AgentLinkBinding(agent));
  ServerLinkOptions options;
  options.server_addresses = server_addresses;
  options.tls = std::move(tls);
  options.state_dir = agent->options().state_dir;
  options.hello = AgentHello(*agent);
  options.metrics_address = [agent, hello = options.hello] {
    const std::string bound = agent->metrics_bound_address();
    return bound.empty() ? hello.metrics_address()
                         : ReachableAddress(bound, agent->host_facts().hostname);
  };
  options.log = std::move(log);
  options.on_status = [agent](const v1::ServerLinkStatus& status) {
    agent->SetServerLinkStatus(status);
  };
  options.on_config = [agent](const v1::ServerConfig& config) {
    if (config.has_metric_window_length()) {
      agent->SetMetricWindowLength(common::DurationFromProto(config.metric_window_length()));
    }
  };
  options.on_metric_window = [agent](std::string_view result) { agent->CountMetricWindow(result); };
  options.on_bundle_persist_failure = [agent] { agent->CountBundlePersistFailure(); };
  absl::StatusOr<std::unique_ptr<ServerLink>> link =
      ServerLink::Create(std::move(options), binding.get());
  if (!link.ok()) return link.status();
  binding->link_ = *std::move(link);
  agent->AddObserver(binding.get());
  agent->SetMetricWindowSink([link = binding->link_.get()](ExperimentWindow window) {
    link->SendMetricWindow(MetricWindowToProto(window));
  });
  return binding;
}

AgentLinkBinding::~AgentLinkBinding() { Stop(); }

void AgentLinkBinding::Start() { link_->Start(); }

void AgentLinkBinding::Stop() {
  if (link_ == nullptr) return;
  agent_->SetMetricWindowSink(nullptr);
  link_->Stop();
}

absl::Status AgentLinkBinding::ApplyServerBundle(const ServerBundle& bundle) {
  return agent_->SetServerBundle(bundle);
}

void AgentLinkBinding::OnAdapterChanged(const AdapterSnapshot& snapshot, const AdapterEvents&,
                                        bool status_changed) {
  if (!status_changed) return;
  v1::Adapter adapter;
  AdapterSnapshotToProto(snapshot, agent_->host_id(), absl::Now(), &adapter);
  link_->ReportAdapter(adapter);
}

void AgentLinkBinding::OnAdapterRemoved(const std::string& adapter_id) {
  link_->ReportRemoved(adapter_id);
}

}  // namespace rxfleet::agent
