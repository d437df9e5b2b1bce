#pragma once

// Connects the Agent to a ServerLink: bundles go to Agent::SetServerBundle, adapter changes
// (AdapterObserver) go to the link as v1.Adapter reports, the link's status goes to the local
// status endpoint. main.cc creates it when --server is given.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/app/agent.h"
#include "agent/link/server_link.h"
#include "agent/reconcile/adapter_snapshot.h"

namespace rxfleet::agent {

/// The Hello the agent sends: host id, effective labels, rxfleet::kVersion, capabilities
/// (rx_agg.v1..v3, local_policy, experiments, metric_windows), host facts and its metrics address
/// as Prometheus should reach it (a wildcard host such as 0.0.0.0 or [::] is replaced by the host
/// name; empty when metrics are off).
v1::Hello AgentHello(const Agent& agent);

class AgentLinkBinding final : public BundleSink, public AdapterObserver {
 public:
  /// Creates the link to `server_addresses` (validated --server entries, tried in turn) for
  /// `agent` (not owned; must outlive the binding),
  /// persisting bundles under the agent's state directory, and registers as the agent's
  /// observer. Call before Agent::Run. Errors: the link's (InvalidArgument).
  /// `tls` unset = plaintext (--insecure).
  static absl::StatusOr<std::unique_ptr<AgentLinkBinding>> Create(
      Agent* agent, const std::vector<std::string>& server_addresses,
      std::optional<LinkTlsFiles> tls, LogSink log);
  ~AgentLinkBinding() override;

  /// Applies the persisted bundle and starts connecting.
  void Start();
  /// Stops the link (before the agent is destroyed).
  void Stop();

  ServerLink& link() { return *link_; }

  absl::Status ApplyServerBundle(const ServerBundle& bundle) override;
  void OnAdapterChanged(const AdapterSnapshot& snapshot, const AdapterEvents& events,
                        bool status_changed) override;
  void OnAdapterRemoved(const std::string& adapter_id) override;

 private:
  explicit AgentLinkBinding(Agent* agent) : agent_(agent) {}

  Agent* const agent_;
  std::unique_ptr<ServerLink> link_;
};

}  // namespace rxfleet::agent
