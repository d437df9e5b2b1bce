#pragma once

// Experiment metric windows: for every adapter with an experiment assignment, the agent cuts
// its measurements into windows of the assignment's window_length aligned to the period start,
// tags each with experiment, arm, period and bundle version and the settings observed in the
// registers, and decides whether the window may be used (docs/AGENT.md, "Experiments").

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/cpu_stat.h"
#include "agent/collectors/icmp_prober.h"
#include "agent/collectors/netdev_stats.h"
#include "agent/collectors/window.h"
#include "agent/probes/probe_result.h"
#include "agent/reconcile/policy_set.h"
#include "common/chips/rx_agg.h"

namespace rxfleet::agent {

/// Values of ExperimentWindow::invalid_reason (rxfleet.v1.MetricWindow.invalid_reason).
inline constexpr std::string_view kInvalidBurnIn = "burn_in";
inline constexpr std::string_view kInvalidSettingsNotApplied = "settings_not_applied";
inline constexpr std::string_view kInvalidArmChanged = "arm_changed";
inline constexpr std::string_view kInvalidCounterReset = "counter_reset";
inline constexpr std::string_view kInvalidAdapterGone = "adapter_gone";
inline constexpr std::string_view kInvalidClockJump = "clock_jump";

/// One finished experiment window of one adapter (becomes rxfleet.v1.MetricWindow).
struct ExperimentWindow {
  /// Traffic, RTT, probes and CPU over the window; window.start_time is the wall-clock time of
  /// the tick that opened it, window.duration_seconds is measured on the monotonic clock.
  AdapterWindow window;
  std::string experiment;
  std::string arm;
  uint32_t period_index = 0;
  int64_t experiment_generation = 0;
  /// Bundle version that carried the assignment.
  uint64_t bundle_version = 0;
  /// The register fields last verified during the window (all four set), decoded; unset if
  /// the register was never verified during the window.
  std::optional<common::RxAggSettings> observed_settings;
  /// False if the window must not be used; invalid_reason is then one of the kInvalid* words
  /// (the first problem seen in the window), empty when valid.
  bool valid = true;
  std::string invalid_reason;
  /// The experiment's active throughput probe run inside this window (ExperimentAssignment
  /// probe), attached by the agent when the window closes; unset when the assignment has no
  /// probe, it was not this adapter's turn, or no attempt finished inside the window.
  std::optional<ProbeResult> probe;
};

/// An adapter's register state at one tick, as the reconcile loop last saw it.
struct AdapterRegisterState {
  /// The adapter is plugged in and known to the agent.
  bool present = false;
  /// The last reconcile read the register back equal to the desired settings (phase applied).
  /// False while an apply failed, drift is not yet repaired, the chip sleeps, or before the
  /// first apply.
  bool verified = false;
  /// Register 0 as last read, decoded; unset before the first read or for asleep reads.
  std::optional<common::RxAggFields> fields;
};

/// Everything one tick needs; the collector gathers it from the agent, tests build it by hand.
struct ExperimentTick {
  /// Monotonic tick time (durations) and wall-clock time (alignment to period starts).
  SteadyTime now;
  absl::Time wall;
  /// Netdev totals of every known adapter (NetdevCollector::Totals()).
  std::map<std::string, NetdevTotals> totals;
  /// /proc/stat at this tick, if read.
  std::optional<ProcStat> stat;
  /// Probe results since the previous tick (IcmpProber::TakeWindowStats(kExperimentWindow)).
  std::map<std::string, ProbeWindowStats> probes;
  /// Register state of every adapter the agent knows, keyed by adapter id.
  std::map<std::string, AdapterRegisterState> adapters;
};

struct ExperimentWindowOptions {
  /// Window length for assignments that do not carry one (window_length 0). > 0.
  absl::Duration default_length = absl::Seconds(60);
  /// A wall-clock step between two ticks that differs from the monotonic step by more than
  /// this marks the open windows invalid (`clock_jump`). > 0.
  absl::Duration clock_jump_tolerance = absl::Seconds(1);
  /// An assignment change seen by a tick more than this long after SetAssignments() means the
  /// new arm may already have been in the registers inside the old window (`arm_changed`).
  absl::Duration edge_tolerance = absl::Milliseconds(250);
  /// Windows closed after less than this (e.g. a bundle arriving just after a tick opened the
  /// next window) carry no usable measurement and are discarded, not reported. >= 0.
  absl::Duration min_duration = absl::Milliseconds(500);
};

/// Cuts experiment windows (pure logic; thread-safe). Rules, per (adapter, experiment):
///  - window k of a period covers wall time [start + k*L, start + (k+1)*L), start =
///    period_start (or the time the assignment was first seen when the server sent none),
///    L = window_length (or options.default_length); a window closes on the first tick at or
///    after its end (the agent ticks at NextEdge(), so that is on the edge);
///  - the open window closes early at the tick that sees the assignment change (arm, period,
///    generation, settings or bundle version), disappear, or pass its period_end;
///  - a window is invalid with the first of: `burn_in` (opened before start + burn_in, or
///    before burn_in after the arm or its settings changed inside the period, e.g. when a
///    guardrail or operator stop sent the adapter to control),
///    `settings_not_applied` (at a tick of the window, edges included, the adapter was not
///    verified or its register did not hold every field the arm sets), `adapter_gone`
///    (adapter or netdev missing at a tick), `counter_reset` (a kernel counter went back),
///    `clock_jump` (wall clock stepped), `arm_changed` (the arm changed more than
///    edge_tolerance before the tick that closed the window);
///  - windows shorter than options.min_duration are discarded.
class ExperimentWindowCutter {
 public:
  explicit ExperimentWindowCutter(ExperimentWindowOptions options = {});

  /// Replaces the assignments (state of the world) from `bundle_version`, effective at the next
  /// Tick(). `at` is when the change happened (monotonic); to close the old windows cleanly
  /// the caller ticks right after, before the new settings can reach the registers.
  void SetAssignments(uint64_t bundle_version, std::vector<ExperimentAssignment> assignments,
                      SteadyTime at);
  /// Sets the window length of assignments without one (non-positive lengths are ignored).
  void SetDefaultLength(absl::Duration length);

  /// Advances to `tick`: closes due windows (returned in adapter, experiment order) and opens
  /// the next ones. Ticks must have non-decreasing `now`.
  std::vector<ExperimentWindow> Tick(const ExperimentTick& tick);

  /// The earliest wall-clock time an open window ends (its nominal end or its period end),
  /// if any window is open: ticking then closes windows on their edge rather than up to one
  /// sampler interval later.
  std::optional<absl::Time> NextEdge() const;

  /// (adapter id, experiment) of every open window.
  std::vector<std::pair<std::string, std::string>> OpenWindows() const;

 private:
  struct Open {
    ExperimentAssignment assignment;
    uint64_t bundle_version = 0;
    absl::Time period_start;
    absl::Duration length;
    int64_t index = 0;
    SteadyTime start;
    absl::Time start_wall;
    std::optional<NetdevTotals> start_totals;
    std::optional<ProcStat> start_stat;
    ProbeWindowStats probes;
    std::optional<common::RxAggSettings> observed;
    std::string invalid_reason;
  };
  using Key = std::pair<std::string, std::string>;  // adapter id, experiment

  void Check(Open& open, const ExperimentTick& tick) const;
  ExperimentWindow Close(Open& open, const ExperimentTick& tick) const;
  static void Invalidate(Open& open, std::string_view reason);

  mutable absl::Mutex mu_;
  ExperimentWindowOptions options_ ABSL_GUARDED_BY(mu_);
  uint64_t bundle_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<ExperimentAssignment> assignments_ ABSL_GUARDED_BY(mu_);
  std::optional<SteadyTime> changed_at_ ABSL_GUARDED_BY(mu_);  // pending SetAssignments
  // First time an assignment without period_start was seen (its stand-in period start).
  std::map<std::string, absl::Time> first_seen_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Open> open_ ABSL_GUARDED_BY(mu_);
  // Switches of arm or settings inside a period (a stop), by key: burn-in restarts there.
  struct Switch {
    absl::Time period_start;
    absl::Time at;
  };
  std::map<Key, Switch> switched_ ABSL_GUARDED_BY(mu_);
  std::optional<std::pair<SteadyTime, absl::Time>> last_tick_ ABSL_GUARDED_BY(mu_);
};

/// Where finished windows go (the server link in production). Called on the sampler thread;
/// must not block.
using ExperimentWindowSink = std::function<void(ExperimentWindow window)>;

/// Collector "experiment_window": runs an ExperimentWindowCutter on the sampler's ticks with
/// the netdev totals, /proc/stat and the prober's experiment-window samples, and the adapters'
/// register states from `adapters`. Register it after the netdev and cpu collectors. Sources
/// may be null; they must outlive the collector. Exports only the sampler's wrapper series.
class ExperimentWindowCollector final : public Collector {
 public:
  using AdapterStates = std::function<std::map<std::string, AdapterRegisterState>()>;

  ExperimentWindowCollector(const NetdevCollector* netdev, const CpuCollector* cpu,
                            IcmpProber* prober, AdapterStates adapters, ExperimentWindowSink sink,
                            ExperimentWindowOptions options = {});

  std::string_view Name() const override { return "experiment_window"; }
  /// Always OK.
  [[nodiscard]] absl::Status Collect(SteadyTime now) override;

  ExperimentWindowCutter& cutter() { return cutter_; }

 private:
  const NetdevCollector* netdev_;
  const CpuCollector* cpu_;
  IcmpProber* prober_;
  AdapterStates adapters_;
  ExperimentWindowSink sink_;
  ExperimentWindowCutter cutter_;
};

}  // namespace rxfleet::agent
