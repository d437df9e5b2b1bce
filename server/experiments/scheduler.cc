// ExperimentController's scheduler: a per-experiment step (completion, period boundaries,
// guardrails) that returns when it wants to run next, like controller-runtime's Reconcile
// returning RequeueAfter; the tick that runs every step, window writes and retention, and
// the thread that waits for the earliest requeue.

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/experiments/controller.h"
#include "server/log.h"

namespace rxfleet::server {
namespace {

constexpr absl::Duration kRetentionInterval = absl::Hours(1);

}  // namespace

using common::TimeFromProto;

ExperimentController::StepResult ExperimentController::Step(Entry& entry, absl::Time now) {
  StepResult result;
  if (!Running(entry)) return result;
  const experiments::Assigner& assigner = *entry.assigner;
  if (now >= assigner.end()) {
    result.publish =
        End(entry, v1::EXPERIMENT_PHASE_COMPLETED, assigner.end(), "Completed",
            absl::StrCat("ran for the planned ", absl::FormatDuration(entry.experiment.duration)),
            now)
            .ok();
    // A failed save is retried at the next tick.
    if (!result.publish) result.requeue_after = options_.tick;
    return result;
  }
  absl::StatusOr<uint32_t> period = assigner.PeriodIndexAt(now);
  if (period.ok() && *period != entry.period) {
    entry.period = *period;
    result.publish = true;
  }
  if (now >= entry.next_guardrails) {
    if (Guardrails(entry, now)) result.publish = true;
    entry.next_guardrails =
        now + std::min(entry.experiment.window_length, options_.max_guardrail_interval);
  }
  if (!Running(entry)) return result;  // stopped by guardrails
  absl::Time next = std::min(assigner.end(), entry.next_guardrails);
  if (period.ok() && *period + 1 < assigner.PeriodCount()) {
    next = std::min(next, assigner.PeriodStart(*period + 1));
  }
  result.requeue_after = std::max(next - now, absl::ZeroDuration());
  return result;
}

void ExperimentController::RetentionLocked(absl::Time now) {
  if (now < next_retention_) return;
  next_retention_ = now + std::min(options_.retention, kRetentionInterval);
  absl::StatusOr<uint64_t> deleted =
      deps_.store->DeleteWindowsOfExperimentsEndedBefore(now - options_.retention, tick_fence_);
  if (!deleted.ok() || *deleted == 0) return;
  Log(LogLevel::kInfo,
      absl::StrCat("deleted ", *deleted, " metric windows of experiments that ended more than ",
                   absl::FormatDuration(options_.retention), " ago"));
  for (auto& [name, entry] : entries_) {
    if (!Running(entry) && entry.proto.status().has_end_time() &&
        TimeFromProto(entry.proto.status().end_time()) < now - options_.retention) {
      entry.windows = 0;
      entry.valid_windows = 0;
      entry.cache = {};
    }
  }
}

absl::Time ExperimentController::Tick() {
  const absl::Time now = options_.clock();
  bool publish = false;
  absl::Duration requeue_after = options_.tick;
  // Without the lease another replica schedules; this one only writes its windows and
  // follows what the holder stores.
  std::optional<LeaseFence> fence;
  std::vector<std::string> auto_apply;  // tunings with a proposal to write unattended
  const bool scheduler = deps_.lease == nullptr || (fence = deps_.lease()).has_value();
  {
    absl::MutexLock lock(&mu_);
    (void)FlushLocked();
    if (scheduler) {
      tick_fence_ = fence.has_value() ? &*fence : nullptr;
      for (auto& [name, entry] : entries_) {
        const StepResult step = Step(entry, now);
        publish = publish || step.publish;
        requeue_after = std::min(requeue_after, step.requeue_after);
      }
      for (auto& [name, entry] : tunings_) {
        const StepResult step = TuningStep(entry, now, auto_apply);
        publish = publish || step.publish;
        requeue_after = std::min(requeue_after, step.requeue_after);
      }
      RetentionLocked(now);
      tick_fence_ = nullptr;
    }
    if (now >= next_probe_plans_ && RefreshProbePlansLocked(now)) publish = true;
    UpdateGauges();
  }
  if (publish) Publish();
  // Policy writes predict through this controller: outside mu_.
  for (const std::string& name : auto_apply) {
    absl::StatusOr<v1::ApproveHoldTuningResponse> approved = Approve(
        name, {}, "", /*dry_run=*/false, absl::StrCat("hold tuning ", name, " (autoApply)"));
    if (!approved.ok()) {
      Log(LogLevel::kWarning, absl::StrCat("hold tuning ", name,
                                           ": autoApply failed (retried at "
                                           "the next step): ",
                                           approved.status().message()));
    }
  }
  return now + requeue_after;
}

void ExperimentController::Run() {
  runner_ = std::thread([this] {
    while (true) {
      const absl::Time next = Tick();
      absl::MutexLock lock(&run_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_) { return stopping_ || wake_; };
      const absl::Duration wait =
          std::clamp(next - options_.clock(), absl::ZeroDuration(), options_.tick);
      run_mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
      if (stopping_) return;
      wake_ = false;
    }
  });
}

void ExperimentController::Shutdown() {
  {
    absl::MutexLock lock(&run_mu_);
    stopping_ = true;
  }
  if (runner_.joinable()) runner_.join();
  (void)FlushWindows();
}

}  // namespace rxfleet::server
