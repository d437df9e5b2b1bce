#pragma once

// The server side of A/B experiments: the FleetService experiment RPCs, the arms in each
// host's bundle, metric window ingestion, guardrails and the schedule that drives them.
// Reason: one class, whose definitions are split by job over controller*.cc, scheduler.cc,
// window_intake.cc, experiment_api.cc and tuning_*.cc; this header is its one declaration.
//
// Lifecycle: CreateExperiment validates (ExperimentFromProto), records a seed when the spec has
// none, stores the experiment RUNNING with start_time = now and pushes a new bundle version.
// Adapters that match the selector later (plugged in, host connected) join it from their next
// bundle. It COMPLETES at start + duration, or is STOPPED by StopExperiment or when guardrails
// stopped every non-control arm in every segment with data. Names are not reused while the
// experiment is stored; DeleteExperiment removes an ended one (and its windows).
//
// Scheduling: a new bundle version (every host, state of the world) goes out at start, at every
// switchback period boundary, at guardrail and operator stops and at the end. Run() wakes at the
// next such instant of any running experiment (boundaries that coincide share one push), and at
// least every `tick` to write buffered windows. Guardrails are evaluated every window length
// (at most every `max_guardrail_interval`) on the stored windows.
//
// One experiment per adapter: an adapter takes part in the oldest (first created) running
// experiment whose selector matches it and from which no server policy keeps it (a policy of
// higher priority deciding a field an arm sets, common::FieldsKeptFromExperiment). The same
// rule decides the bundles' assignments, the eligible adapters of CreateExperiment, the
// assigned_adapters of the status and the experiment layer every prediction resolves against
// (ExperimentLayer), so a policy change moves adapters in or out with the next bundle.
//
// Windows: AcceptWindow validates a MetricWindow (adapter known for the host, experiment known
// and running or ended less than one window length ago, arm of the experiment, finite
// non-negative values, 0 < duration <= 2 x window length, a window that has ended, bounded
// strings), attaches the adapter's segment values at receipt and buffers it; buffered windows
// are written in batches (one transaction) every tick. A failed write keeps them buffered (up
// to kMaxPendingWindows) and retries. Reports and guardrails read the windows from memory:
// every window of a running experiment is kept converted (about 340 bytes each), loaded from
// the store on first use; an ended experiment's windows are loaded when its report is asked
// for and kept until another ended experiment's report is. At most
// `max_windows_per_experiment` windows are stored per experiment; later ones are rejected.
// Windows of experiments that ended more than `retention` ago are deleted.
//
// Probes: an experiment with a probe (ExperimentSpec.probe) takes only adapters of hosts whose
// Hello announced the `probes` capability (others are ineligible, with that reason), and at
// most one running experiment probes against one iperf3 server (CreateExperiment refuses a
// second with FailedPrecondition). Each such experiment keeps a sticky ProbePlan
// (server/experiments/probe_schedule.h) over the adapters it claims, refreshed at creation and
// then every kProbePlanRefresh; a change publishes a new bundle. Assignments carry the probe,
// its offset and, when the adapters need more than one window's slots, the rotation. An
// adapter that joined since the last refresh runs no probe until the next one. The status has
// a `ProbeSchedule` condition saying how many probes fit per window and how many rounds run.
//
// Hold tunings (proto/rxfleet/v1/tuning.proto, docs/TUNING-DESIGN.md) run here too, so that
// one rule decides which adapters each takes and their windows share the intake and the store.
// An adapter no experiment takes belongs to the oldest running tuning whose selector matches it
// and from which no policy keeps it (kTuningPriority); the tuning groups its managed adapters
// into segments whose incumbent is the hold their policies set (the hold most of them resolve;
// the others are left out), and runs the planner (server/tuning/planner.h) per segment. Only
// the explorers of a segment's current switchback block get an assignment (named after the
// tuning, arm HoldArmName, the planner's period); the others run their policy. A step
// (tuning_scheduler.cc) runs under the lease like the experiments' one, at least every window
// length and at each period boundary, and saves the status with the planner state when it
// changed; it publishes when the explorers' assignments changed. Tunings and experiments share
// names (AlreadyExists either way). Approval writes one policy per proposed segment through
// deps.apply_policy (TuningPolicyName, a priority above the policies deciding the incumbent,
// label kTunedByLabel) and adopts the proposal. Bounds: max_hold_tunings stored,
// max_tuning_segments per tuning.
//
// Files, one per job: controller.cc (state, claims, status, events), experiment_api.cc (the
// RPC handlers), window_intake.cc (window intake and cache), controller_guardrails.cc
// (guardrails and gauges), controller_probes.cc (probe plans and their condition),
// scheduler.cc (the per-experiment step, the tick, retention), tuning_controller.cc (tunings'
// state, claims, views and windows), tuning_scheduler.cc (a tuning's step), tuning_api.cc (the
// tuning RPCs and approval).
//
// Thread-safety: every method may be called from any thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/link_limits.h"
#include "common/tuning/hold_tuning.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "rxfleet/v1/tuning.pb.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"
#include "server/experiments/experiment_layer.h"
#include "server/experiments/probe_schedule.h"
#include "server/http/metrics.h"
#include "server/registry/event_log.h"
#include "server/registry/policy_set.h"
#include "server/registry/registry.h"
#include "server/store/store.h"
#include "server/tuning/planner.h"

namespace rxfleet::server {

/// Windows kept in memory while the database refuses writes; more are rejected.
inline constexpr size_t kMaxPendingWindows = 100000;
/// Longest experiment/arm/adapter/reason string a MetricWindow may carry.
inline constexpr size_t kMaxWindowStringLength = 128;
/// Longest MetricWindow.probe.failure_message (probe.proto says at most 1024 characters).
inline constexpr size_t kMaxProbeMessageLength = 1024;
/// Hello capability of agents that run probes (agent_service.proto Hello.capabilities).
inline constexpr char kProbesCapability[] = "probes";
/// How often the probe plans follow adapters joining and leaving experiments with a probe.
inline constexpr absl::Duration kProbePlanRefresh = absl::Seconds(5);

struct ExperimentControllerOptions {
  /// Windows of experiments that ended longer ago than this are deleted (--experiment-retention).
  absl::Duration retention = absl::Hours(24 * 30);
  /// Windows stored per experiment at most (1,000 adapters x 2,000 windows).
  uint64_t max_windows_per_experiment = 2000000;
  /// Longest wait of Run() between two ticks (buffered windows are written at each tick).
  absl::Duration tick = absl::Seconds(1);
  /// Guardrails are evaluated every window length, but at least this often.
  absl::Duration max_guardrail_interval = absl::Minutes(1);
  /// The clock; tests inject their own and call Tick() themselves.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  /// Hold tunings stored at most (running and stopped); CreateHoldTuning refuses more.
  size_t max_hold_tunings = 100;
  /// Segments one hold tuning tunes at most; adapters of further segments wait (its
  /// SegmentsWaiting condition says so).
  size_t max_tuning_segments = 64;
  /// Largest bundle message a host may get: CreateExperiment refuses an experiment whose
  /// assignments would make one larger (server/api/bundle_limit.h).
  size_t max_bundle_bytes = common::kMaxServerMessageBytes;
};

struct ExperimentControllerDeps {
  Store* store;
  Registry* registry;
  EventLog* events;
  ServerMetrics* metrics;
  /// Publishes a new bundle version with unchanged policies (FleetApi::BumpBundleVersion).
  std::function<absl::Status()> bump_bundle;
  /// Writes (or dry-runs) a policy exactly like FleetService.ApplyPolicy by `actor` (for its
  /// audit event), predicting the affected adapters as if experiment `ended` were over
  /// (FleetApi::ApplyPolicy).
  std::function<absl::StatusOr<v1::ApplyPolicyResponse>(
      const v1::ApplyPolicyRequest&, std::string_view ended, std::string_view actor)>
      apply_policy;
  /// The server's policies, for eligibility; null = no policies.
  PolicySet* policies = nullptr;
  /// The fence of this process's "experiments" lease (LeaseKeeper::Fence); null = the
  /// scheduler always runs, unfenced (a lone controller in tests).
  std::function<std::optional<LeaseFence>()> lease = nullptr;
};

/// The priority of a hold tuning's holds in the experiment layer: one below the highest, so
/// tunings outrank every policy except one at kMaxPolicyPriority deciding hold_us, which keeps
/// adapters out (a policy of higher priority keeps adapters out of an experiment; ties go to
/// the experiment layer). Approval cannot outrank such a policy either.
inline constexpr int kTuningPriority = common::kMaxPolicyPriority - 1;
/// Name labels on the policies a tuning writes (ApproveHoldTuning, autoApply).
inline constexpr std::string_view kTunedByLabel = "rxfleet.io/hold-tuning";

/// "usb_speed=super,board=pi5": a tuning segment in messages ("*" without keys, "(none)" for an
/// empty value).
std::string TuningSegmentText(const std::vector<std::string>& keys,
                              const std::vector<std::string>& values);
/// The policy a tuning writes for a segment: the tuning's name (at most 54 characters), "-" and
/// 8 hex digits of StableHash64 of the full name and the segment values, so each segment has
/// its own policy.
std::string TuningPolicyName(std::string_view tuning, const std::vector<std::string>& segment);

/// The lease of the experiment scheduler (completion, guardrails, window retention).
inline constexpr char kExperimentsLease[] = "experiments";

class ExperimentController final : public ExperimentLayer {
 public:
  /// Loads the stored experiments and window counts. Errors: the store's.
  static absl::StatusOr<std::unique_ptr<ExperimentController>> Create(
      ExperimentControllerOptions options, ExperimentControllerDeps deps);
  /// Stops Run() if it runs.
  ~ExperimentController() override;

  /// ExperimentLayer: the assignment at clock() (see the file comment).
  std::optional<v1::ExperimentAssignment> AssignmentFor(const common::AdapterAttributes& adapter,
                                                        const std::vector<common::Policy>& policies,
                                                        std::string_view ended = {}) const override;

  // FleetService (errors name the field; store errors are passed through).
  /// InvalidArgument for an invalid experiment or labels and annotations over their bounds
  /// (server/api/metadata_bounds.h); AlreadyExists for a taken name; FailedPrecondition, storing
  /// nothing (also for dry runs), when its assignments would make a host's bundle larger than
  /// max_bundle_bytes.
  absl::StatusOr<v1::CreateExperimentResponse> CreateExperiment(
      const v1::CreateExperimentRequest& request);
  /// Newest first; phase and label filters; page_size [0, 1000] (0 = 100).
  absl::StatusOr<v1::ListExperimentsResponse> ListExperiments(
      const v1::ListExperimentsRequest& request) const;
  /// NotFound if unknown.
  absl::StatusOr<v1::Experiment> GetExperiment(const v1::GetExperimentRequest& request) const;
  /// NotFound; FailedPrecondition if not RUNNING; Aborted for a stale resource_version.
  absl::StatusOr<v1::Experiment> StopExperiment(const v1::StopExperimentRequest& request);
  /// Deletes an ended experiment with its stored and buffered windows; returns it as it was.
  /// NotFound; FailedPrecondition while it runs; Aborted for a stale resource_version; store
  /// errors (nothing is deleted then).
  absl::StatusOr<v1::Experiment> DeleteExperiment(const v1::DeleteExperimentRequest& request);
  /// NotFound; InvalidArgument for a segment key that is not a segment key of the experiment.
  absl::StatusOr<v1::ExperimentReport> GetExperimentReport(
      const v1::GetExperimentReportRequest& request);
  /// NotFound for an unknown experiment or arm; InvalidArgument for a segment key that is not
  /// one of the experiment's (any subset of them may be named); the policy write's errors.
  /// The policy write is audited with `actor` (the caller, Caller::actor).
  absl::StatusOr<v1::PromoteExperimentResponse> PromoteExperiment(
      const v1::PromoteExperimentRequest& request, std::string_view actor = "experiment promotion");

  // FleetService hold tunings (see "Hold tunings" in the file comment).
  /// InvalidArgument for an invalid tuning (HoldTuningFromProto) or metadata over its bounds;
  /// AlreadyExists when a tuning or an experiment has the name; store errors.
  absl::StatusOr<v1::CreateHoldTuningResponse> CreateHoldTuning(
      const v1::CreateHoldTuningRequest& request);
  /// Newest first; page_size [0, 1000] (0 = 100).
  absl::StatusOr<v1::ListHoldTuningsResponse> ListHoldTunings(
      const v1::ListHoldTuningsRequest& request) const;
  /// NotFound if unknown.
  absl::StatusOr<v1::HoldTuning> GetHoldTuning(const v1::GetHoldTuningRequest& request) const;
  /// Writes each proposed segment's hold as a policy through deps.apply_policy (audited as
  /// `actor`) and starts rechecking it. NotFound; InvalidArgument for a segment that is not one
  /// of the tuning's; FailedPrecondition when no named segment has a proposal or a policy at
  /// kMaxPolicyPriority decides the segment's hold; Aborted for a stale resource_version; the
  /// policy write's errors (segments written before one fails stay written and adopted).
  absl::StatusOr<v1::ApproveHoldTuningResponse> ApproveHoldTuning(
      const v1::ApproveHoldTuningRequest& request, std::string_view actor);
  /// NotFound; FailedPrecondition if not RUNNING; Aborted for a stale resource_version.
  absl::StatusOr<v1::HoldTuning> StopHoldTuning(const v1::StopHoldTuningRequest& request);
  /// Deletes a stopped tuning with its windows. NotFound; FailedPrecondition while it runs.
  absl::StatusOr<v1::HoldTuning> DeleteHoldTuning(const v1::DeleteHoldTuningRequest& request);

  /// A MetricWindow from `host_id` (see the file comment). InvalidArgument naming the field
  /// when the window is refused (the caller drops it and keeps the stream);
  /// ResourceExhausted when the experiment's cap or the write buffer is full.
  absl::Status AcceptWindow(std::string_view host_id, const v1::MetricWindow& window);

  /// The assignments of a host's adapters now (empty when no experiment runs).
  std::vector<v1::ExperimentAssignment> Assignments(std::string_view host_id) const;
  /// The same, serialised as PolicyBundle field 4 entries (appended to a shared bundle body).
  std::string AssignmentBytes(std::string_view host_id) const;

  /// Runs what is due at clock(): completion, period boundaries, guardrails, buffered
  /// windows, retention; publishes a bundle when assignments changed. Returns when it wants
  /// to run next. Completion, guardrails and retention run only while deps.lease gives a
  /// fence (or there is no lease), and their writes carry it; windows are written either way.
  absl::Time Tick();
  /// Re-reads the stored experiments after the configuration changed in the database
  /// (another server created, stopped, ended or deleted one; ChangeFeed): adds new ones,
  /// replaces those whose stored resource version is newer than this server's copy and drops
  /// those gone from the store that were written at or before `revision` (the store-wide
  /// revision the change was seen at, Store::LoadConfig). Call before the new bundle version
  /// is pushed, so the bundles carry the new assignments. Errors: the store's (nothing
  /// changes).
  absl::Status Reload(uint64_t revision);
  /// Writes buffered windows. Errors: the store's (the windows stay buffered).
  absl::Status FlushWindows();

  /// Starts a thread calling Tick() until Shutdown().
  void Run();
  void Shutdown();

 private:
  /// Every stored window of one experiment or tuning, converted: loaded from the store on first
  /// use and then followed (Store::ForEachWindowSince) before each use, so it holds the windows
  /// that every server on the database stored.
  struct WindowCache {
    std::optional<std::vector<experiments::Window>> windows;  ///< nullopt: not loaded
    std::vector<int64_t> ids;  ///< WindowRow::id of each of `windows`, same order
    /// The position in the store, and the ids of the rows held that the next read may return
    /// again (write_seq at or above cursor).
    uint64_t cursor = 0;
    std::map<int64_t, uint64_t> recent;  ///< row id -> WindowRow::write_seq
    uint64_t rows = 0;                   ///< rows read, also those left out of `windows`
    uint64_t valid_rows = 0;             ///< ... of which MetricWindow.valid
  };

  struct Entry {
    v1::Experiment proto;  ///< as stored
    experiments::Experiment experiment;
    std::optional<experiments::Assigner> assigner;  ///< while RUNNING
    std::vector<experiments::StoppedArm> stopped;
    uint32_t period = 0;  ///< period of the last published assignments
    absl::Time next_guardrails = absl::InfinitePast();
    uint64_t windows = 0;  ///< stored + buffered
    uint64_t valid_windows = 0;
    /// Kept while the experiment runs and for the one ended experiment whose report was
    /// asked for last.
    WindowCache cache;
    /// Experiments with a probe, while RUNNING: who probes when (controller_probes.cc).
    std::optional<experiments::ProbePlan> probe_plan;
  };

  /// What one experiment's scheduler step did, and when it wants to run again
  /// (controller-runtime's Result{RequeueAfter}).
  struct StepResult {
    /// Assignments changed (completion, a period boundary, a guardrail stop): publish.
    bool publish = false;
    /// Run this experiment's step again after this long; infinite once it ended.
    absl::Duration requeue_after = absl::InfiniteDuration();
  };
  /// One segment of a tuning: the planner's state and what the operator reads of it.
  struct TuningSegment {
    tuning::SegmentState state;
    /// Status fields the planner does not keep: the evidence of the last decision
    /// (comparisons, evidence_text), the proposal's row and policy name, the applied policy.
    v1::HoldTuningSegment view;
    /// Adapters of the segment at the last step, with the hold their policies set.
    tuning::SegmentInput input;
    /// The explorers of the current block and their assignments in epoch period
    /// `assigned_period`: a cache of the planner's answer, refreshed by whoever needs it
    /// first in a new period (claims and steps, under mu_) and after every state change.
    mutable uint32_t assigned_period = UINT32_MAX;
    mutable std::map<std::string, tuning::HoldAssignment, std::less<>> assigned;
    /// What the last published bundles assigned (Signature of `assigned`), so a step
    /// publishes exactly when the assignments changed.
    std::string published;
    absl::Time next_update = absl::InfinitePast();
  };
  struct TuningEntry {
    v1::HoldTuning proto;  ///< as stored
    tuning::HoldTuning tuning;
    /// Segment keys only: SegmentValuesFor and the windows' segments.
    experiments::Experiment segmenter;
    std::map<std::vector<std::string>, TuningSegment> segments;
    WindowCache cache;
    uint64_t windows = 0;  ///< stored + buffered
    uint64_t valid_windows = 0;
    /// Segments waiting for enough adapters, for the status: "usb_speed=high: 2 adapters".
    std::vector<std::string> waiting;
    bool status_dirty = false;  ///< a status save failed: retry at the next step
    /// Windows that started before this were deleted (PruneTuningWindows).
    absl::Time windows_pruned_before = absl::InfinitePast();
  };

  ExperimentController(ExperimentControllerOptions options, ExperimentControllerDeps deps);
  absl::Status Load();
  absl::Status LoadTunings(bool reload, uint64_t revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The entry of a stored tuning, or nullopt (logged) if it fails validation.
  std::optional<TuningEntry> TuningFromProto(v1::HoldTuning proto,
                                             const std::map<std::string, WindowCounts>& counts);
  static bool Running(const TuningEntry& entry);
  /// Running tunings, oldest first.
  std::vector<const TuningEntry*> RunningTunings() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The tuning hold of `adapter` at `now` if no experiment takes it: the oldest running tuning
  /// whose selector matches it, from which no policy keeps it, and whose planner has it explore
  /// in the current block; skipping tuning `ended`. `tunings`: RunningTunings(), computed once
  /// per bundle rather than per adapter.
  std::optional<v1::ExperimentAssignment> TuningClaimLocked(
      const std::vector<const TuningEntry*>& tunings, const common::AdapterAttributes& adapter,
      absl::Time now, const std::vector<common::Policy>& policies,
      std::string_view ended = {}) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Whether a policy keeps `adapter` from the tuning's holds (KeptFrom over its candidates).
  bool TuningKept(const TuningEntry& entry, const common::AdapterAttributes& adapter,
                  const std::vector<common::Policy>& policies) const;
  /// One tuning's scheduler step at `now`: segments found and started, planner updates,
  /// autoApply, the status saved when it changed. publish when assignments changed.
  StepResult TuningStep(TuningEntry& entry, absl::Time now, std::vector<std::string>& auto_apply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The adapters each segment of `entry` takes now (see the file comment), by segment.
  std::map<std::vector<std::string>, tuning::SegmentInput> TuningInputsLocked(
      const TuningEntry& entry, absl::Time now, std::vector<std::string>* waiting) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Recomputes a segment's explorers and their assignments at `now` when the period changed
  /// since the last computation, or always with `force` (the state changed).
  static void RefreshAssigned(const TuningEntry& entry, const TuningSegment& segment,
                              absl::Time now, bool force);
  /// Fills the operator's view of a segment from its state (and `evidence`, when given).
  void UpdateSegmentView(const TuningEntry& entry, TuningSegment& segment,
                         const tuning::Evidence* evidence) const;
  /// The stored status of `entry` from its segments.
  v1::HoldTuningStatus TuningStatusLocked(const TuningEntry& entry) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Persists a new status; on success replaces entry.proto.
  absl::Status SaveTuningStatus(TuningEntry& entry, const v1::HoldTuningStatus& status,
                                absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The API view: status without planner states, with assigned adapters and windows.
  v1::HoldTuning TuningView(const TuningEntry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The windows of `entry` (FollowWindows plus the counts).
  absl::StatusOr<const std::vector<experiments::Window>*> TuningWindows(TuningEntry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Deletes (store and cache) the windows of a running tuning that no segment reads any
  /// more: each reads only the windows of its current epoch, a stopped segment none. Runs
  /// once the oldest epoch still read has moved a period on; keeps a margin of a period and
  /// two window lengths before it, so no window near the boundary is still being written.
  /// Scheduler only (the delete is fenced by tick_fence_); a failure is logged and retried.
  void PruneTuningWindows(TuningEntry& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Writes the proposals of `segments` (all proposed ones if empty) of tuning `name` as
  /// policies and adopts them (ApproveHoldTuning and autoApply). Must be called without mu_.
  absl::StatusOr<v1::ApproveHoldTuningResponse> Approve(
      const std::string& name, const std::vector<std::vector<std::string>>& segments,
      const std::string& resource_version, bool dry_run, std::string_view actor);
  /// The validation of a window that names a tuning; the segment values to store.
  absl::StatusOr<std::vector<std::string>> AcceptTuningWindowLocked(
      const TuningEntry& entry, const v1::Adapter& adapter, const v1::MetricWindow& window,
      absl::Time start, absl::Duration duration, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordTuningEvent(const std::string& name, v1::EventType type, std::string reason,
                         std::string message, absl::Time now);
  /// The entry of a stored experiment, or nullopt (logged) if it fails validation.
  std::optional<Entry> EntryFromProto(v1::Experiment proto,
                                      const std::map<std::string, WindowCounts>& counts,
                                      absl::Time now);
  static bool Running(const Entry& entry);
  v1::Experiment View(const Entry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Running experiments, oldest first.
  std::vector<const Entry*> RunningEntries() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The running experiment that takes `adapter` at `now` under `policies` and its
  /// assignment, skipping experiment `ended` (see the file comment).
  struct Claim {
    const Entry* entry = nullptr;
    experiments::Assignment assignment;
  };
  std::optional<Claim> ClaimLocked(const std::vector<const Entry*>& running,
                                   const common::AdapterAttributes& adapter, absl::Time now,
                                   const std::vector<common::Policy>& policies,
                                   std::string_view ended = {}) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The server's valid policies now (empty without a policy set).
  std::shared_ptr<const PolicySnapshot> Policies() const;
  std::vector<v1::ExperimentAssignment> AssignmentsLocked(std::string_view host_id,
                                                          absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The entry an operator's write names: NotFound if unknown, Aborted if `resource_version`
  /// is set and is not the stored one.
  absl::StatusOr<Entry*> EntryForWrite(const std::string& name, const std::string& resource_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Persists a new status; on success replaces entry.proto.
  absl::Status SaveStatus(Entry& entry, const v1::ExperimentStatus& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Ends a running experiment (COMPLETED or STOPPED).
  absl::Status End(Entry& entry, v1::ExperimentPhase phase, absl::Time end_time,
                   std::string_view reason, std::string_view message, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Completion, period boundary and due guardrails of `entry` at `now`.
  StepResult Step(Entry& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Rebuilds the probe plans of running experiments with a probe from the adapters each
  /// claims now (one pass over the fleet); true when a plan changed (publish).
  bool RefreshProbePlansLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The `ProbeSchedule` condition of an experiment with a probe plan.
  v1::Condition ProbeConditionLocked(const Entry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The running experiment other than `name` that probes against `server` (host:port), if
  /// any.
  const Entry* ProbeServerUserLocked(const std::string& server, std::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// False when `entry` has a probe and the adapter's host did not announce `probes`.
  bool HostCanProbe(const Entry& entry, const common::AdapterAttributes& adapter) const;
  /// Deletes windows of experiments that ended more than `retention` ago (at most hourly).
  void RetentionLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Evaluates guardrails; returns whether arms were stopped.
  bool Guardrails(Entry& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The stored windows of `entry` (see Entry::cache): writes the buffered windows, then reads
  /// what the store has gained since the last call. When the store cannot be read, the cache
  /// as it is (an error if there is none yet).
  absl::StatusOr<const std::vector<experiments::Window>*> Windows(Entry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Reads into `cache` the windows of `name` the store gained since the last call (loading
  /// all on first use); windows without `segment_keys` values are left out. Returns the cache's
  /// windows; when the store cannot be read, what was read before (an error if nothing was).
  absl::StatusOr<const std::vector<experiments::Window>*> FollowWindows(WindowCache& cache,
                                                                        const std::string& name,
                                                                        size_t segment_keys,
                                                                        size_t reserve);
  /// Buffered windows of `name`: all and valid ones.
  std::pair<uint64_t, uint64_t> PendingWindows(std::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordEvent(const std::string& name, v1::EventType type, std::string reason,
                   std::string message, absl::Time now);
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish();

  const ExperimentControllerOptions options_;
  const ExperimentControllerDeps deps_;

  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, TuningEntry, std::less<>> tunings_ ABSL_GUARDED_BY(mu_);
  std::vector<StoredWindow> pending_ ABSL_GUARDED_BY(mu_);
  bool flush_failing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_retention_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_probe_plans_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  /// The lease fence while Tick() runs the scheduler (SaveStatus and retention pass it to the
  /// store); null otherwise, so operator writes (StopExperiment) go unfenced.
  const LeaseFence* tick_fence_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, prometheus::Gauge*> info_gauges_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, prometheus::Gauge*> stopped_gauges_ ABSL_GUARDED_BY(mu_);

  absl::Mutex run_mu_;
  bool stopping_ ABSL_GUARDED_BY(run_mu_) = false;
  bool wake_ ABSL_GUARDED_BY(run_mu_) = false;
  std::thread runner_;
};

}  // namespace rxfleet::server
