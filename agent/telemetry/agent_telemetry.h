#pragma once

// The agent's telemetry: one Prometheus registry with the adapter series (AdapterMetrics), the
// collectors (netdev traffic, CPU, ICMP RTT probes), the metric windows and the experiment
// windows, the sampler that runs them, and the HTTP exporter. It observes the adapter manager,
// so the adapter series follow every reconcile pass. Series and names: docs/METRICS.md.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "agent/collectors/cpu_stat.h"
#include "agent/collectors/icmp_prober.h"
#include "agent/collectors/netdev_stats.h"
#include "agent/collectors/sampler.h"
#include "agent/collectors/window.h"
#include "agent/experiments/experiment_windows.h"
#include "agent/metrics/adapter_metrics.h"
#include "agent/metrics/metrics_server.h"
#include "agent/probes/probe_metrics.h"
#include "agent/probes/probe_result.h"
#include "agent/reconcile/adapter_snapshot.h"
#include "agent/reconcile/log.h"
#include "agent/reconcile/policy_set.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

/// What the telemetry needs of the agent's options (AgentOptions fields of the same names).
struct TelemetryOptions {
  /// Where sysfs is mounted (netdev statistics).
  std::string sysfs_root = "/sys";
  /// Where procfs is mounted (CPU, net/route for the probe gateway).
  std::string procfs_root = "/proc";
  /// ICMP RTT probes: empty = off, "gateway" = each netdev's default gateway, else an IPv4
  /// literal.
  std::string probe_target;
  /// Length of the metric windows and default length of experiment windows. > 0.
  absl::Duration metric_window = absl::Seconds(60);
};

/// The rxfleet_adapter_state value of a reconcile phase: pending and drifted are "pending",
/// error and invalid settings are "error", every other phase has its own state.
AdapterState MetricsState(AdapterPhase phase);

/// Metrics, collectors and the Prometheus endpoint of the running agent (not of --once).
///
/// Threads: the AdapterObserver methods run on the agent loop thread; Start/Stop on the thread
/// that runs the loop; CutExperimentWindows on the loop or the server link thread (it runs one
/// sampler tick, serialised with the sampler's own); the counters and window accessors on any
/// thread.
class AgentTelemetry : public AdapterObserver {
 public:
  /// Builds the registry and collectors. A prober that cannot be created (e.g. no eventfd) is
  /// logged and the probes stay off. `register_states` gives the register state of every
  /// supported adapter for the experiment windows; `window_sink` receives every finished
  /// experiment window (on the sampler thread; it must only queue).
  AgentTelemetry(const TelemetryOptions& options, LogSink log,
                 ExperimentWindowCollector::AdapterStates register_states,
                 ExperimentWindowSink window_sink);
  /// Stop().
  ~AgentTelemetry() override;

  AgentTelemetry(const AgentTelemetry&) = delete;
  AgentTelemetry& operator=(const AgentTelemetry&) = delete;

  /// Starts sampling and probing, and the exporter if `address` (HOST:PORT) is set. Returns the
  /// bound address ("127.0.0.1:9477", "[::1]:9477"), "" if disabled or failed; a failure is
  /// logged and the agent keeps running without the endpoint.
  std::string Start(const std::string& address);
  /// Stops the exporter, the prober and the sampler. Idempotent.
  void Stop();

  /// Counts one local policy file load in rxfleet_agent_policy_reloads_total{result}.
  void CountReload(bool ok);
  /// Counts one experiment window in rxfleet_agent_metric_windows_total{result} ("sent",
  /// "dropped"; other words are ignored).
  void CountMetricWindow(std::string_view result);
  /// Counts one server bundle applied but not saved in rxfleet_agent_bundle_persist_failures_total.
  void CountBundlePersistFailure() { bundle_persist_failures_.Increment(); }
  /// Records one final result of an active throughput probe in the rxfleet_probe_* series
  /// (ProbeMetrics). Any thread.
  void RecordProbe(const std::string& adapter_id, const ProbeResult& result) {
    probe_metrics_.Record(adapter_id, result);
  }
  /// Deletes the adapter's rxfleet_probe_* series (it no longer probes). Any thread.
  void RemoveProbeSeries(const std::string& adapter_id) { probe_metrics_.Remove(adapter_id); }

  /// Wall-clock time the next experiment window ends; nullopt without open windows.
  std::optional<absl::Time> NextExperimentEdge() const;
  /// Adopts a metric window length (the server's); non-positive lengths are ignored.
  void SetMetricWindowLength(absl::Duration length);
  /// Closes the experiment windows at this instant: with new assignments (bundle version and
  /// assignments, before they can reach the registers) or without (an assignment's period
  /// ends now).
  void CutExperimentWindows(
      std::optional<std::pair<uint64_t, std::vector<ExperimentAssignment>>> assignments);

  /// Last completed metric window per adapter; empty before the first.
  std::map<std::string, AdapterWindow> LastWindows() const;
  /// Completed metric windows so far.
  uint64_t completed_windows() const;

  void OnAdapterChanged(const AdapterSnapshot& snapshot, const AdapterEvents& events,
                        bool status_changed) override;
  void OnAdapterRemoved(const std::string& adapter_id) override;

 private:
  LogFn CollectorLog();
  /// Refreshes every series of the adapter. The event counters are bumped after the identity
  /// exists and before the state changes, so a scrape that sees the new state also sees the
  /// writes that led to it.
  void UpdateAdapterSeries(const AdapterSnapshot& s, const AdapterEvents& events);
  void CountEvents(const std::string& adapter_id, const AdapterEvents& events);

  LogSink log_;
  std::shared_ptr<prometheus::Registry> registry_;
  AdapterMetrics adapters_;
  ProbeMetrics probe_metrics_;
  NetdevCollector netdev_;
  CpuCollector cpu_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reload_success_;
  prometheus::Counter& reload_failure_;
  std::unique_ptr<IcmpProber> prober_;
  prometheus::Family<prometheus::Counter>& metric_windows_;
  prometheus::Counter& windows_sent_;
  prometheus::Counter& windows_dropped_;
  prometheus::Counter& bundle_persist_failures_;
  std::unique_ptr<WindowTracker> window_;
  std::unique_ptr<ExperimentWindowCollector> experiment_windows_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<MetricsServer> server_;
  // Loop thread only (observer callbacks).
  std::map<std::string, std::set<std::string>> diagnoses_;
  std::map<std::string, std::map<std::string, std::string>> experiments_;
};

}  // namespace rxfleet::agent
