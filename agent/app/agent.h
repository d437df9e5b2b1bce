#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/app/host_facts.h"
#include "agent/app/local_policies.h"
#include "agent/collectors/window.h"
#include "agent/experiments/experiment_windows.h"
#include "agent/probes/probe_runner.h"
#include "agent/probes/probe_scheduler.h"
#include "agent/reconcile/adapter_manager.h"
#include "agent/reconcile/adapter_snapshot.h"
#include "agent/reconcile/log.h"
#include "agent/reconcile/policy_set.h"
#include "agent/usb/device_source.h"
#include "common/policy/policy.h"
#include "rxfleet/v1/local_status.pb.h"

namespace rxfleet::agent {

class AgentTelemetry;  // agent/telemetry/agent_telemetry.h

/// How the agent runs.
enum class AgentMode {
  kOnce,  ///< enumerate, reconcile every adapter once, report, exit (--once)
  kRun,   ///< run the reconcile loop until Stop() (the default; --standalone is an alias)
};

/// Validated configuration of one agent (flags and config file already merged).
struct AgentOptions {
  AgentMode mode = AgentMode::kRun;
  /// Host id reported to the server and the local status endpoint; 1..63 of [a-z0-9.-].
  std::string host_id;
  /// Explicit host labels (--label, config). They win over detected ones (arch, board, kernel).
  std::map<std::string, std::string> labels;
  /// Local policy files and directories (default {kDefaultPolicyDir}).
  std::vector<std::string> policy_paths = {kDefaultPolicyDir};
  /// Level-based re-check period of each adapter (one register read when in sync). > 0.
  absl::Duration reconcile_period = absl::Seconds(10);
  /// Full re-enumeration period: the safety net behind hotplug, the only detection without it.
  absl::Duration rescan_period = absl::Seconds(30);
  /// How often local policy files are checked for changes (metadata only).
  absl::Duration policy_poll_period = absl::Seconds(2);
  /// How long unplugged adapters stay listed (state gone).
  absl::Duration gone_retention = absl::Minutes(10);
  /// No register write this long after an adapter's arrival, nor while its USB 2 -> 3 switch
  /// is pending (AdapterManagerOptions::settle). Default 5 s: the field saw 3.46 s.
  absl::Duration settle = absl::Seconds(5);
  /// Re-enumeration loop quarantine: more than `count` appearances within `window`.
  int reenumeration_loop_count = 5;
  absl::Duration reenumeration_loop_window = absl::Seconds(30);
  /// Directory of chip-table extension files (*.tsv, ChipCatalog::Load); missing is fine.
  std::string chips_dir = "/etc/rxfleet/chips.d";
  std::string sysfs_root = "/sys";
  std::string procfs_root = "/proc";
  /// State that must survive restarts (the server link's last good bundle). Touched only with
  /// a server link (--server).
  std::string state_dir = "/var/lib/rxfleet/agent";
  /// Unix socket of the local status endpoint; empty = disabled. Not in once mode.
  std::string status_socket;
  /// HOST:PORT of the Prometheus endpoint; empty = disabled. Not in once mode.
  std::string metrics_address;
  /// ICMP RTT probes through each adapter's netdev, for metric windows: empty = off,
  /// "gateway" = each netdev's default gateway, else an IPv4 literal. Not in once mode.
  std::string probe_target;
  /// Length of the per-adapter metric windows (experiments). > 0.
  absl::Duration metric_window = absl::Seconds(60);
};

/// The agent core: wires the device source, the adapter manager (reconcile), local policy
/// files, host labels, metrics and collectors, and the local status endpoint.
///
/// Threads: Run() is the reconcile loop and owns all device I/O. Everything else (Stop,
/// ReloadLocalPolicies, SetServerBundle, snapshots, status) may be called from any thread.
///
/// For the server link:
///  - SetServerBundle validates a complete bundle and either rejects it whole (the previous
///    bundle stays in force) or swaps it in and requeues every adapter;
///  - AddObserver delivers adapter changes (AdapterObserver) from the loop thread;
///  - Snapshots()/Snapshot() give per-adapter state; AdapterSnapshotToProto
///    (agent/status/adapter_proto.h) turns one into a v1.Adapter;
///  - LastMetricWindows() gives the last completed metric window per adapter;
///  - SetMetricWindowSink() receives every finished experiment window (adapters with an
///    assignment; see ExperimentWindowCutter), CountMetricWindow() counts their fate;
///  - SetServerLinkStatus() feeds the link's state into the local status endpoint.
class Agent {
 public:
  /// Loads the local policies and detects host labels. `source` may be null: the libusb source
  /// is created on `options.sysfs_root`. Errors: InvalidArgument for bad options, labels or
  /// policy files (message with FILE:LINE), NotFound for a missing policy file — configuration
  /// errors (exit code 2); Internal when libusb cannot be initialised (exit code 1).
  static absl::StatusOr<std::unique_ptr<Agent>> Create(AgentOptions options,
                                                       std::unique_ptr<DeviceSource> source,
                                                       LogSink log);
  ~Agent();

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// --once: enumerate, reconcile every supported adapter once (opening each only during its
  /// pass), and return the snapshots ordered by id. Errors: the enumeration error (Internal).
  absl::StatusOr<std::vector<AdapterSnapshot>> RunOnce();

  /// The reconcile loop (not in once mode). Starts the status and metrics endpoints (a failure
  /// there is logged and only that endpoint stays off), hotplug (else periodic rescans),
  /// collectors; then reconciles, rescans and polls policy files until Stop(). On return hotplug is
  /// stopped, no transfer is in flight, the status socket is removed. Returns OK after Stop().
  absl::Status Run();

  /// Makes Run() return after the adapter pass in progress. Any thread; idempotent.
  void Stop();

  /// Reloads local policy files now (SIGHUP). A failed load is logged with file and line and
  /// the previous set stays in force. Any thread; the loop performs the reload.
  void ReloadLocalPolicies();

  /// Replaces the server layer (policies and experiment assignments) as a whole. Validates
  /// everything first (ValidateServerBundle against the layouts of the adapters known now);
  /// on error returns InvalidArgument naming the offending policy/assignment and keeps the last
  /// good bundle. On success every adapter is requeued; their snapshots then carry the version.
  /// The bundle's probe slots (ServerBundle::probe_slots) time the adapters' policy probes, its
  /// assignments' probes run inside their metric windows (ProbeScheduler).
  absl::Status SetServerBundle(ServerBundle bundle);
  /// Version of the bundle in effect; 0 if none.
  uint64_t active_bundle_version() const;

  /// Adds an observer of adapter changes (not owned; must outlive the agent). Call before Run.
  void AddObserver(AdapterObserver* observer);

  std::vector<AdapterSnapshot> Snapshots() const;
  std::optional<AdapterSnapshot> Snapshot(const std::string& adapter_id) const;

  /// Last completed metric window per adapter (empty before the first, and in once mode).
  std::map<std::string, AdapterWindow> LastMetricWindows() const;
  /// Completed windows so far (grows by one per window close).
  uint64_t completed_metric_windows() const;

  /// The local status answer (also what `rxfleetctl --local status` shows).
  v1::GetStatusResponse Status(bool include_gone) const;
  /// Where finished experiment windows go (the server link); called on the sampler thread
  /// with the agent's lock held (it must only queue). Without a sink they are discarded; after
  /// SetMetricWindowSink(nullptr) returns the old sink is never called again. Any thread.
  void SetMetricWindowSink(ExperimentWindowSink sink);
  /// Adopts the server's metric window length (ServerConfig.metric_window_length) for the
  /// metric windows and for experiment assignments without their own; non-positive lengths
  /// are ignored. Any thread.
  void SetMetricWindowLength(absl::Duration length);
  /// Counts one experiment window in rxfleet_agent_metric_windows_total{result} ("sent",
  /// "dropped"; other words are ignored). Any thread.
  void CountMetricWindow(std::string_view result);
  /// Counts a server bundle applied but not saved (rxfleet_agent_bundle_persist_failures_total).
  void CountBundlePersistFailure();

  /// The bound HOST:PORT of the Prometheus endpoint ("127.0.0.1:9477", "[::1]:40123"); empty
  /// before Run() bound it, when disabled, or when binding failed. Any thread.
  std::string metrics_bound_address() const;

  /// Server link state for the status answer (default: standalone, no server link).
  void SetServerLinkStatus(v1::ServerLinkStatus status);

  const std::string& host_id() const { return options_.host_id; }
  /// Effective host labels: detected, overridden by explicit ones.
  const std::map<std::string, std::string>& labels() const { return labels_; }
  const HostFacts& host_facts() const { return facts_; }
  const AgentOptions& options() const { return options_; }

 private:
  Agent(AgentOptions options, std::unique_ptr<DeviceSource> source, LogSink log);
  void PollLocalPolicies(bool force);
  void DeliverMetricWindow(ExperimentWindow window);
  /// Register state of every supported adapter, for the experiment windows.
  std::map<std::string, AdapterRegisterState> RegisterStates() const;
  void PublishPolicies();
  /// Creates the probe runner and scheduler (run mode; after telemetry_ and manager_).
  void CreateProbeScheduler();
  /// Hands the scheduler the policy probe of every present adapter (loop thread), when they
  /// changed since the last call.
  void UpdatePolicyProbes();
  void Wake();

  AgentOptions options_;
  std::unique_ptr<DeviceSource> source_;
  LogSink log_;
  HostFacts facts_;
  std::map<std::string, std::string> labels_;
  LocalPolicyFiles local_files_;
  std::unique_ptr<AdapterManager> manager_;
  std::unique_ptr<AgentTelemetry> telemetry_;  // null in once mode
  // Active throughput probes (null in once mode): libiperf, one attempt at a time.
  std::unique_ptr<ProbeRunner> probe_runner_;
  std::unique_ptr<ProbeScheduler> probes_;
  std::vector<AdapterObserver*> observers_;
  const absl::Time start_time_;

  // Loop thread only.
  std::map<std::string, PolicyProbe> policy_probes_;
  // Adapters with a policy or experiment probe at the last UpdatePolicyProbes.
  std::set<std::string> probing_;
  std::string local_fingerprint_;
  std::string logged_policy_error_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_cv_;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool reload_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<common::Policy> local_policies_ ABSL_GUARDED_BY(mu_);
  std::optional<ServerBundle> bundle_ ABSL_GUARDED_BY(mu_);
  v1::LocalPolicyFileStatus local_status_ ABSL_GUARDED_BY(mu_);
  v1::ServerLinkStatus link_status_ ABSL_GUARDED_BY(mu_);
  std::string metrics_bound_ ABSL_GUARDED_BY(mu_);
  ExperimentWindowSink window_sink_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::agent
