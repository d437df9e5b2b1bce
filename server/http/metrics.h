#pragma once

#include <memory>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace rxfleet::server {

/// The server's Prometheus metrics (names `rxfleet_server_*`, base units, counters `_total`).
/// Created once and shared by the components that update them; every member is thread-safe.
struct ServerMetrics {
  explicit ServerMetrics(std::shared_ptr<prometheus::Registry> registry);

  std::shared_ptr<prometheus::Registry> registry;

  // Registry sizes, refreshed by the server's housekeeping tick (every second).
  prometheus::Gauge* connected_agents;  ///< open AgentService streams with a Hello
  prometheus::Gauge* hosts;             ///< hosts in the registry (connected or not)
  prometheus::Gauge* adapters;          ///< adapters in the registry, not GONE
  prometheus::Gauge* policies;          ///< stored policies
  prometheus::Gauge* bundle_version;    ///< current bundle version

  // Push and acknowledgement.
  prometheus::Counter* pushes;                 ///< fan-outs of a new bundle version to all streams
  prometheus::Counter* bundle_writes;          ///< bundle messages written to streams
  prometheus::Counter* bundles_coalesced;      ///< pending bundles replaced by newer ones
  prometheus::Counter* acks;                   ///< ACKs of the latest push of their stream
  prometheus::Counter* nacks;                  ///< NACKs of the latest push of their stream
  prometheus::Counter* acks_not_persisted;     ///< of `acks`, those saying it was not saved
  prometheus::Counter* stale_replies;          ///< ACK/NACKs whose nonce is not the latest push
  prometheus::Histogram* push_to_ack_seconds;  ///< bundle published (or sent) -> ACK received
  prometheus::Histogram* fanout_seconds;       ///< time to queue one bundle on every stream

  // Streams.
  prometheus::Counter* streams_opened;    ///< streams that sent a valid Hello
  prometheus::Counter* streams_rejected;  ///< streams ended for invalid input
  /// streams_refused_total{reason}: refused before or without a Hello ("no_client_certificate",
  /// "hello_pending_peer", "hello_pending_total", "hello_timeout", "accept_rate",
  /// "max_agent_streams").
  prometheus::Family<prometheus::Counter>* streams_refused;
  prometheus::Counter* streams_replaced;  ///< streams ended by a newer stream of their host

  // Experiments.
  prometheus::Counter* metric_windows_stored;    ///< metric_windows_total{result="stored"}
  prometheus::Counter* metric_windows_rejected;  ///< metric_windows_total{result="rejected"}
  /// rxfleet_server_experiment_info{experiment, phase} = 1 per known experiment.
  prometheus::Family<prometheus::Gauge>* experiment_info;
  /// rxfleet_server_experiment_arm_stopped{experiment, arm, segment} = 1 per stopped arm of a
  /// running experiment; segment is "k=v,k=v" or "*" for every segment.
  prometheus::Family<prometheus::Gauge>* experiment_arm_stopped;

  // Persistence.
  prometheus::Counter* store_write_failures;  ///< failed SQLite writes (API or write-behind)
  /// PostgreSQL only (server/store/change_feed.h): 1 while the change listener is connected,
  /// configuration reloads after a change by another process or a listener reconnect, and
  /// reloads that failed (retried at the next poll).
  prometheus::Gauge* config_listener_up;
  prometheus::Counter* config_reloads;
  prometheus::Counter* config_reload_failures;
  /// rxfleet_server_lease_held{lease="experiments"}: 1 while this process holds the lease of
  /// that singleton job (server/store/lease_keeper.h).
  prometheus::Gauge* experiments_lease_held;
};

}  // namespace rxfleet::server
