#include "server/http/metrics.h"

#include <string>
#include <utility>

namespace rxfleet::server {
namespace {

prometheus::Gauge* MakeGauge(prometheus::Registry& registry, const std::string& name,
                             const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Counter* MakeCounter(prometheus::Registry& registry, const std::string& name,
                                 const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> r) : registry(std::move(r)) {
  prometheus::Registry& reg = *registry;
  connected_agents =
      MakeGauge(reg, "rxfleet_server_connected_agents", "Agents with an open AgentService stream.");
  hosts = MakeGauge(reg, "rxfleet_server_hosts",
                    "Hosts in the registry, connected or not (with replicas on one database: every "
                    "replica's hosts).");
  adapters = MakeGauge(reg, "rxfleet_server_adapters",
                       "Adapters in the registry, excluding unplugged (GONE) ones.");
  policies = MakeGauge(reg, "rxfleet_server_policies", "Stored policies.");
  bundle_version = MakeGauge(reg, "rxfleet_server_bundle_version", "Current bundle version.");
  pushes = MakeCounter(reg, "rxfleet_server_bundle_pushes_total",
                       "Fan-outs of a new bundle version to every connected agent.");
  bundle_writes = MakeCounter(reg, "rxfleet_server_bundle_writes_total",
                              "Bundle messages written to agent streams.");
  bundles_coalesced =
      MakeCounter(reg, "rxfleet_server_bundles_coalesced_total",
                  "Bundles not sent because a newer bundle replaced them in a stream's queue.");
  acks = MakeCounter(reg, "rxfleet_server_acks_total", "ACKs of the latest bundle pushed.");
  nacks = MakeCounter(reg, "rxfleet_server_nacks_total", "NACKs of the latest bundle pushed.");
  acks_not_persisted =
      MakeCounter(reg, "rxfleet_server_acks_not_persisted_total",
                  "ACKs of the latest bundle pushed whose agent could not save the bundle.");
  stale_replies = MakeCounter(reg, "rxfleet_server_stale_replies_total",
                              "ACKs and NACKs ignored because their nonce is not the latest.");
  push_to_ack_seconds =
      &prometheus::BuildHistogram()
           .Name("rxfleet_server_push_to_ack_seconds")
           .Help("Time from publishing a bundle (or sending it on a new stream) to its ACK.")
           .Register(reg)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  fanout_seconds =
      &prometheus::BuildHistogram()
           .Name("rxfleet_server_fanout_seconds")
           .Help("Time to queue one bundle version on every connected stream.")
           .Register(reg)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.001, 0.01, 0.1, 1});
  streams_opened = MakeCounter(reg, "rxfleet_server_streams_opened_total",
                               "Agent streams that sent a valid Hello.");
  streams_rejected = MakeCounter(reg, "rxfleet_server_streams_rejected_total",
                                 "Agent streams ended because of invalid messages.");
  streams_refused = &prometheus::BuildCounter()
                         .Name("rxfleet_server_streams_refused_total")
                         .Help("Agent streams refused before or without a Hello, by reason.")
                         .Register(reg);
  streams_replaced = MakeCounter(reg, "rxfleet_server_streams_replaced_total",
                                 "Agent streams ended by a newer stream of the same host.");
  auto& windows = prometheus::BuildCounter()
                      .Name("rxfleet_server_metric_windows_total")
                      .Help("Experiment metric windows received from agents, by result.")
                      .Register(reg);
  metric_windows_stored = &windows.Add({{"result", "stored"}});
  metric_windows_rejected = &windows.Add({{"result", "rejected"}});
  experiment_info = &prometheus::BuildGauge()
                         .Name("rxfleet_server_experiment_info")
                         .Help("1 for every stored experiment, labelled with its phase.")
                         .Register(reg);
  experiment_arm_stopped =
      &prometheus::BuildGauge()
           .Name("rxfleet_server_experiment_arm_stopped")
           .Help(
               "1 for every arm of a running experiment stopped in a segment (\"*\" = every "
               "segment).")
           .Register(reg);
  store_write_failures = MakeCounter(reg, "rxfleet_server_store_write_failures_total",
                                     "Failed database writes (API writes and registry flushes).");
  config_listener_up =
      MakeGauge(reg, "rxfleet_server_config_listener_up",
                "1 while the PostgreSQL change listener is connected (0 when it is not, or on "
                "SQLite, where no other process writes the configuration).");
  config_reloads = MakeCounter(reg, "rxfleet_server_config_reloads_total",
                               "Configuration reloads after a change committed by another "
                               "process, or after the change listener reconnected.");
  experiments_lease_held =
      &prometheus::BuildGauge()
           .Name("rxfleet_server_lease_held")
           .Help(
               "1 while this server process holds the lease of a singleton job (experiment "
               "scheduling and guardrails, window retention).")
           .Register(reg)
           .Add({{"lease", "experiments"}});
  config_reload_failures = MakeCounter(reg, "rxfleet_server_config_reload_failures_total",
                                       "Configuration reloads that failed (retried at the next "
                                       "poll).");
}

}  // namespace rxfleet::server
