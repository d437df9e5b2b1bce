#pragma once

// ProbeScheduler: when each adapter runs its active throughput probe, one probe at a time in
// the process (docs/AGENT.md, "Probes").
//
// Two kinds of probe, both resolved before they reach the scheduler:
//  - policy probes (the probe of the policy that decides it, PolicySpec.probe): runs at Unix
//    epoch + k * interval + offset, offset = the server's ProbeSlot for the adapter, else a
//    stable hash of host id and adapter id modulo the interval (hosts without a server
//    spread their adapters over the interval, and keep the same slot across restarts);
//  - experiment probes (ExperimentAssignment.probe): once per metric window that ends after
//    burn-in, at window start + probe_offset; the result waits for that window's MetricWindow
//    (TakeWindowResult).
// An attempt the server answers `busy` is retried after 2 s, then 4 s (each wait stretched by
// up to 25 % at random); the result counts the attempts. Failure is a state: per adapter the
// scheduler keeps the last outcome and logs one line when it changes, never per attempt.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/probes/probe_result.h"
#include "agent/probes/probe_runner.h"
#include "agent/reconcile/policy_set.h"
#include "common/log.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::agent {

/// The policy probe resolved for one adapter.
struct PolicyProbe {
  /// Name of the policy that decides the probe.
  std::string policy;
  /// Validated spec (interval included).
  common::ProbeSpec spec;
  /// The server's slot (ProbeSlot.offset for this adapter and policy), in [0, interval);
  /// unset: the scheduler picks StableProbeOffset.
  std::optional<absl::Duration> slot_offset;

  friend bool operator==(const PolicyProbe&, const PolicyProbe&) = default;
};

/// Where a probe came from.
enum class ProbeOrigin : uint8_t { kPolicy, kExperiment };

/// The stable offset of an adapter without a server slot: FNV-1a of "host_id/adapter_id"
/// modulo `interval` in whole seconds; in [0, interval). `interval` > 0.
absl::Duration StableProbeOffset(std::string_view host_id, std::string_view adapter_id,
                                 absl::Duration interval);

/// The first time >= `now` of the form epoch + k * interval + offset (k integer).
absl::Time NextSlot(absl::Time now, absl::Duration interval, absl::Duration offset);

struct ProbeSchedulerOptions {
  /// This host's id, for StableProbeOffset.
  std::string host_id;
  /// Waits before the 2nd, 3rd, ... attempt after `busy`; attempts = size + 1.
  std::vector<absl::Duration> busy_backoff = {absl::Seconds(2), absl::Seconds(4)};
  /// Each busy wait is multiplied by 1 + jitter * random(), random() in [0, 1).
  double busy_jitter = 0.25;
  /// [0, 1) random numbers for the jitter; default: absl's bit generator.
  std::function<double()> random;
  /// The adapter's netdev now ("" if it has none); called before each attempt.
  std::function<std::string(const std::string& adapter_id)> netdev_of;
  /// Every final result (after retries) of a probe still scheduled when it ended, on the
  /// thread that ran it; must not block long.
  std::function<void(const std::string& adapter_id, ProbeOrigin origin, const ProbeResult& result)>
      on_result;
  /// A first attempt that cannot start within this of its slot (the previous probe of this
  /// host ran past it) is skipped to the next slot or window, with one log line: starting late
  /// would run into the next adapter's slot at the iperf3 server. Half the server's slot
  /// margin (kProbeSlotMargin / 2). >= 0.
  absl::Duration late_start = absl::Seconds(1);
  /// Default window length for assignments without one (the agent's --metric-window). > 0.
  absl::Duration default_window_length = absl::Seconds(60);
  /// The state-change lines ("probe port-2-1 -> 10.0.0.5:5201: unreachable: ...").
  common::LogSink log;
  /// Wall clock of the worker thread (Start); tests of the core call RunDue with their own.
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

/// The last outcome of one adapter's probes.
struct AdapterProbeStatus {
  /// "ok" or a ProbeFailureName word.
  std::string state;
  ProbeResult last;
  ProbeOrigin origin = ProbeOrigin::kPolicy;
};

/// The scheduler. Thread-safe; the runner is called outside the lock, by one thread at a time
/// (RunDue's caller: the worker started by Start, or a test).
class ProbeScheduler {
 public:
  /// `runner` must outlive the scheduler.
  ProbeScheduler(ProbeRunner* runner, ProbeSchedulerOptions options);
  /// Stop().
  ~ProbeScheduler();
  ProbeScheduler(const ProbeScheduler&) = delete;
  ProbeScheduler& operator=(const ProbeScheduler&) = delete;

  /// Replaces the policy probes (adapter id -> probe). An adapter whose probe is unchanged
  /// keeps its next run; a new or changed one is due at its next slot at or after `now`;
  /// adapters left out stop probing (a pending busy retry of theirs is dropped).
  void SetPolicyProbes(std::map<std::string, PolicyProbe> probes, absl::Time now);
  /// Replaces the experiment assignments (only those with a probe and a period start matter).
  /// Per (adapter, experiment): the next window whose probe slot is at or after `now`, that
  /// ends after period start + burn-in and not after period end, and that is the adapter's
  /// round (window index from the Unix epoch modulo probe_rounds == probe_round).
  void SetAssignments(const std::vector<ExperimentAssignment>& assignments, absl::Time now);
  /// Window length of assignments without one; non-positive lengths are ignored.
  void SetDefaultWindowLength(absl::Duration length);

  /// When the next attempt is due; nullopt when nothing is scheduled.
  std::optional<absl::Time> NextRun() const;
  /// Runs the attempts due at `now` one after another (the earliest first; an experiment
  /// probe before a policy probe due at the same time), each through the runner; returns how
  /// many attempts ran.
  int RunDue(absl::Time now);

  /// The result of the experiment probe of (adapter, experiment) whose window started at
  /// `window_start` (within half a window length), removed from the scheduler; nullopt if no
  /// probe of that window finished.
  std::optional<ProbeResult> TakeWindowResult(const std::string& adapter_id,
                                              const std::string& experiment,
                                              absl::Time window_start);

  /// Last outcome per adapter.
  std::map<std::string, AdapterProbeStatus> Statuses() const;

  /// Starts the worker thread (RunDue on options.now() whenever something is due). Idempotent.
  void Start();
  /// Stops the worker: cancels the attempt in progress (ProbeRunner::Cancel; its result is
  /// dropped) and joins. Idempotent.
  void Stop();

 private:
  struct Job {
    ProbeOrigin origin = ProbeOrigin::kPolicy;
    std::string adapter_id;
    std::string experiment;  // experiment probes
    common::ProbeSpec spec;
    absl::Time due;
    absl::Time window_start;  // experiment probes: the window this run belongs to
    absl::Time window_end;
    // Retries after busy: attempts made so far and the first attempt's start.
    uint32_t attempts = 0;
    absl::Time first_start;
    // Identifies the entry the job belongs to: a result for a replaced entry only updates the
    // adapter's state, not the schedule.
    uint64_t entry_id = 0;
    bool running = false;
  };
  struct PolicyEntry {
    PolicyProbe probe;
    absl::Duration offset;
    Job job;
  };
  struct WindowEntry {
    ExperimentAssignment assignment;
    Job job;
    bool scheduled = false;
  };
  struct WindowResult {
    absl::Time window_start;
    absl::Duration length;
    ProbeResult result;
  };
  using WindowKey = std::pair<std::string, std::string>;  // adapter id, experiment

  // The next window probe of `a` whose slot is at or after `from`.
  std::optional<Job> NextWindowJob(const ExperimentAssignment& a, absl::Time from) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Duration WindowLength(const ExperimentAssignment& a) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Takes the earliest due job (marking it running); nullopt if none is due. First attempts
  // more than options_.late_start past their slot are moved to their next slot instead, their
  // log lines appended to `skipped`.
  std::optional<Job> TakeDue(absl::Time now, std::vector<std::string>* skipped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts the job back for a retry, or records the final result and schedules the next run.
  void Complete(Job job, ProbeResult result, absl::Time now);
  void RecordState(const Job& job, const ProbeResult& result);
  absl::Duration BusyWait(uint32_t attempts_made);
  int RunDueWithClock(const std::function<absl::Time()>& clock);
  void WorkerLoop();

  ProbeRunner* runner_;
  ProbeSchedulerOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, PolicyEntry> policies_ ABSL_GUARDED_BY(mu_);
  std::map<WindowKey, WindowEntry> windows_ ABSL_GUARDED_BY(mu_);
  std::map<WindowKey, std::vector<WindowResult>> window_results_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, AdapterProbeStatus> statuses_ ABSL_GUARDED_BY(mu_);
  uint64_t next_entry_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Bumped by every change of the inputs, to wake the worker.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

/// "probe port-2-1 -> 10.0.0.5:5201: unreachable: Connection refused" (failures) or
/// "probe port-2-1 -> 10.0.0.5:5201: ok: 48.0 Mbit/s TCP download in 10.0s, 1 attempt".
std::string ProbeStateLine(const std::string& adapter_id, const ProbeResult& result);

}  // namespace rxfleet::agent
