// ExperimentController's hold tuning windows: reading them (the store followed through the
// window cache), deleting those no segment reads any more, and checking a window an agent
// reports against the tuning.

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/api/explain.h"
#include "server/experiments/controller.h"
#include "server/log.h"
#include "server/tuning/evidence.h"

namespace rxfleet::server {

using common::TimeFromProto;

absl::StatusOr<const std::vector<experiments::Window>*> ExperimentController::TuningWindows(
    TuningEntry& entry) {
  (void)FlushLocked();
  const std::string& name = entry.proto.metadata().name();
  absl::StatusOr<const std::vector<experiments::Window>*> windows =
      FollowWindows(entry.cache, name, entry.tuning.segment_keys.size(), entry.windows);
  if (!windows.ok()) return windows.status();
  const auto [pending, pending_valid] = PendingWindows(name);
  entry.windows = std::max(entry.windows, entry.cache.rows + pending);
  entry.valid_windows = std::max(entry.valid_windows, entry.cache.valid_rows + pending_valid);
  return windows;
}

void ExperimentController::PruneTuningWindows(TuningEntry& entry, absl::Time now) {
  WindowCache& cache = entry.cache;
  if (!cache.windows.has_value()) return;
  const tuning::HoldTuning& t = entry.tuning;
  absl::Time oldest = now;
  for (const auto& [values, segment] : entry.segments) {
    if (segment.state.phase != tuning::Phase::kStopped) {
      oldest = std::min(oldest, segment.state.epoch_start);
    }
  }
  const absl::Time cutoff = oldest - t.period_length - 2 * t.window_length;
  if (cutoff < entry.windows_pruned_before + t.period_length) return;
  // Rows below the first one of a window at or after the cutoff all started before it.
  std::vector<experiments::Window>& windows = *cache.windows;
  int64_t below = 0;
  bool any_old = false;
  bool boundary = false;
  for (size_t i = 0; i < windows.size(); ++i) {
    if (windows[i].start >= cutoff) {
      if (!boundary || cache.ids[i] < below) below = cache.ids[i];
      boundary = true;
    } else {
      any_old = true;
    }
  }
  if (!boundary) {
    for (int64_t id : cache.ids) below = std::max(below, id + 1);
  }
  if (!any_old || below == 0) {
    entry.windows_pruned_before = cutoff;
    return;
  }
  const std::string& name = t.name;
  absl::StatusOr<uint64_t> deleted = deps_.store->DeleteWindowsBelow(name, below, tick_fence_);
  if (!deleted.ok()) {
    Log(LogLevel::kWarning, absl::StrCat("hold tuning ", name,
                                         ": cannot delete the windows no segment reads (will "
                                         "retry): ",
                                         deleted.status().message()));
    return;
  }
  entry.windows_pruned_before = cutoff;
  uint64_t kept = 0;
  uint64_t erased_valid = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    if (cache.ids[i] < below) {
      erased_valid += windows[i].valid ? 1 : 0;
      continue;
    }
    if (kept != i) {
      windows[kept] = std::move(windows[i]);
      cache.ids[kept] = cache.ids[i];
    }
    ++kept;
  }
  windows.resize(kept);
  cache.ids.resize(kept);
  cache.rows = cache.rows > *deleted ? cache.rows - *deleted : 0;
  cache.valid_rows = cache.valid_rows > erased_valid ? cache.valid_rows - erased_valid : 0;
  entry.windows = entry.windows > *deleted ? entry.windows - *deleted : 0;
  entry.valid_windows = entry.valid_windows > erased_valid ? entry.valid_windows - erased_valid : 0;
  if (*deleted > 0) {
    Log(LogLevel::kInfo,
        absl::StrCat("hold tuning ", name, ": deleted ", *deleted,
                     " metric windows that started before ", absl::FormatTime(cutoff),
                     " (no segment reads them any more)"));
  }
}

absl::StatusOr<std::vector<std::string>> ExperimentController::AcceptTuningWindowLocked(
    const TuningEntry& entry, const v1::Adapter& adapter, const v1::MetricWindow& window,
    absl::Time start, absl::Duration duration, absl::Time now) const {
  const tuning::HoldTuning& t = entry.tuning;
  if (!Running(entry)) {
    const bool recent = entry.proto.status().has_end_time() &&
                        now - TimeFromProto(entry.proto.status().end_time()) < t.window_length;
    if (!recent) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric_window.experiment: hold tuning ", t.name, " is stopped"));
    }
  }
  std::set<std::string, std::less<>> arms;
  for (uint32_t hold : t.candidates_us) arms.insert(tuning::HoldArmName(hold));
  for (const auto& [values, segment] : entry.segments) {
    arms.insert(tuning::HoldArmName(segment.state.incumbent_hold_us));
    if (segment.state.previous_hold_us) {
      arms.insert(tuning::HoldArmName(*segment.state.previous_hold_us));
    }
  }
  if (!arms.contains(window.arm())) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric_window.arm: hold tuning ", t.name, " has no hold ", window.arm()));
  }
  if (duration <= absl::ZeroDuration() || duration > 2 * t.window_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric_window.window_duration: ", absl::FormatDuration(duration),
                     " is not in (0, ", absl::FormatDuration(2 * t.window_length), "]"));
  }
  if (start + duration > now + t.window_length) {
    return absl::InvalidArgumentError(
        "metric_window.window_start_time: the window ends in the future (agent clock ahead?)");
  }
  if (entry.windows >= options_.max_windows_per_experiment) {
    return absl::ResourceExhaustedError(absl::StrCat("hold tuning ", t.name, " already has ",
                                                     entry.windows,
                                                     " windows, the most the server stores per "
                                                     "experiment or tuning"));
  }
  return experiments::SegmentValuesFor(entry.segmenter, AttributesOf(adapter));
}

}  // namespace rxfleet::server
