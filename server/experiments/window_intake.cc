// ExperimentController's window intake: validating MetricWindows, buffering and writing them
// in batches, and the per-experiment window cache that reports and guardrails read.

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto/checked_duration.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/api/explain.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/controller.h"
#include "server/experiments/controller_internal.h"
#include "server/experiments/convert.h"
#include "server/log.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

absl::Status CheckString(std::string_view field, const std::string& value, bool required) {
  if (required && value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric_window.", ToAbslView(field), ": required"));
  }
  if (value.size() > kMaxWindowStringLength) {
    return absl::InvalidArgumentError(absl::StrCat("metric_window.", ToAbslView(field),
                                                   ": longer than ", kMaxWindowStringLength,
                                                   " characters"));
  }
  return absl::OkStatus();
}

absl::Status CheckValue(std::string_view field, double value, double max) {
  if (!std::isfinite(value) || value < 0 || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("metric_window.", ToAbslView(field), ": ", value,
                                                   " is not a finite value in 0..", max));
  }
  return absl::OkStatus();
}

}  // namespace

using common::TimeFromProto;
using controller_internal::PhaseName;
using experiments::Experiment;

absl::Status ExperimentController::AcceptWindow(std::string_view host_id,
                                                const v1::MetricWindow& window) {
  const absl::Time now = options_.clock();
  auto reject = [this](absl::Status status) {
    deps_.metrics->metric_windows_rejected->Increment();
    return status;
  };
  for (const auto& [field, value, required] :
       {std::tuple<std::string_view, const std::string&, bool>{"adapter_id", window.adapter_id(),
                                                               true},
        {"experiment", window.experiment(), true},
        {"arm", window.arm(), true},
        {"invalid_reason", window.invalid_reason(), false}}) {
    if (absl::Status s = CheckString(field, value, required); !s.ok()) return reject(s);
  }
  absl::StatusOr<v1::Adapter> adapter = deps_.registry->GetAdapter(host_id, window.adapter_id());
  if (!adapter.ok()) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("metric_window.adapter_id: ", adapter.status().message())));
  }
  for (const auto& [field, value, max] :
       {std::tuple<std::string_view, double, double>{"rtt.mean_seconds",
                                                     window.rtt().mean_seconds(), 3600},
        {"rtt.p99_seconds", window.rtt().p99_seconds(), 3600},
        {"busiest_core_ratio", window.busiest_core_ratio(), 1},
        {"host_cpu_ratio", window.host_cpu_ratio(), 1}}) {
    if (absl::Status s = CheckValue(field, value, max); !s.ok()) return reject(s);
  }
  if (window.has_probe()) {
    const v1::ProbeResult& probe = window.probe();
    for (const auto& [field, value, max] :
         {std::tuple<std::string_view, double, double>{"probe.throughput_bps",
                                                       probe.throughput_bps(), 1e12},
          {"probe.udp_loss_ratio", probe.udp_loss_ratio(), 1},
          {"probe.udp_jitter_seconds", probe.udp_jitter_seconds(), 3600}}) {
      if (absl::Status s = CheckValue(field, value, max); !s.ok()) return reject(s);
    }
    if (absl::Status s = CheckString("probe.failure_reason", probe.failure_reason(), false);
        !s.ok()) {
      return reject(s);
    }
    if (probe.failure_message().size() > kMaxProbeMessageLength) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("metric_window.probe.failure_message: longer than ", kMaxProbeMessageLength,
                       " characters")));
    }
    if (probe.spec().server().size() > common::kMaxProbeServerHostLength + 8) {
      return reject(absl::InvalidArgumentError(
          "metric_window.probe.spec.server: longer than a host:port can be"));
    }
  }
  if (!window.has_window_start_time() || !window.has_window_duration()) {
    return reject(absl::InvalidArgumentError(
        "metric_window.window_start_time and window_duration: required"));
  }
  const absl::Time start = TimeFromProto(window.window_start_time());
  absl::StatusOr<absl::Duration> checked =
      common::CheckedDurationFromProto(window.window_duration(), "metric_window.window_duration");
  if (!checked.ok()) return reject(checked.status());
  const absl::Duration duration = *checked;
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(window.experiment());
  if (it == entries_.end()) {
    auto tuned = tunings_.find(window.experiment());
    if (tuned == tunings_.end()) {
      return reject(absl::InvalidArgumentError(absl::StrCat(
          "metric_window.experiment: no experiment or hold tuning ", window.experiment())));
    }
    if (pending_.size() >= kMaxPendingWindows) {
      return reject(
          absl::ResourceExhaustedError("too many metric windows wait for the database; dropping"));
    }
    absl::StatusOr<std::vector<std::string>> segment =
        AcceptTuningWindowLocked(tuned->second, *adapter, window, start, duration, now);
    if (!segment.ok()) return reject(segment.status());
    StoredWindow stored;
    stored.experiment = window.experiment();
    stored.host_id = std::string(host_id);
    stored.segment = *std::move(segment);
    stored.window = window;
    pending_.push_back(std::move(stored));
    ++tuned->second.windows;
    if (window.valid()) ++tuned->second.valid_windows;
    deps_.metrics->metric_windows_stored->Increment();
    return absl::OkStatus();
  }
  Entry& entry = it->second;
  const Experiment& e = entry.experiment;
  if (!Running(entry)) {
    const bool recent = entry.proto.status().has_end_time() &&
                        now - TimeFromProto(entry.proto.status().end_time()) < e.window_length;
    if (!recent) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("metric_window.experiment: experiment ", window.experiment(), " is ",
                       PhaseName(entry.proto.status().phase()))));
    }
  }
  if (!e.ArmIndex(window.arm())) {
    return reject(absl::InvalidArgumentError(absl::StrCat(
        "metric_window.arm: experiment ", window.experiment(), " has no arm ", window.arm())));
  }
  if (duration <= absl::ZeroDuration() || duration > 2 * e.window_length) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("metric_window.window_duration: ", absl::FormatDuration(duration),
                     " is not in (0, ", absl::FormatDuration(2 * e.window_length), "]")));
  }
  if (start + duration > now + e.window_length) {
    return reject(absl::InvalidArgumentError(
        "metric_window.window_start_time: the window ends in the future (agent clock ahead?)"));
  }
  if (entry.windows >= options_.max_windows_per_experiment) {
    return reject(absl::ResourceExhaustedError(
        absl::StrCat("experiment ", window.experiment(), " already has ", entry.windows,
                     " windows, the most the server stores per experiment")));
  }
  if (pending_.size() >= kMaxPendingWindows) {
    return reject(
        absl::ResourceExhaustedError("too many metric windows wait for the database; dropping"));
  }
  StoredWindow stored;
  stored.experiment = window.experiment();
  stored.host_id = std::string(host_id);
  stored.segment = experiments::SegmentValuesFor(e, AttributesOf(*adapter));
  stored.window = window;
  pending_.push_back(std::move(stored));
  ++entry.windows;
  if (window.valid()) ++entry.valid_windows;
  deps_.metrics->metric_windows_stored->Increment();
  return absl::OkStatus();
}

absl::Status ExperimentController::FlushLocked() {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status s = deps_.store->AddWindows(pending_);
  if (!s.ok()) {
    deps_.metrics->store_write_failures->Increment();
    if (!flush_failing_) {
      Log(LogLevel::kError, absl::StrCat("cannot store ", pending_.size(),
                                         " metric windows (will retry): ", s.message()));
    }
    flush_failing_ = true;
    return s;
  }
  if (flush_failing_) Log(LogLevel::kInfo, "metric windows are stored again");
  flush_failing_ = false;
  pending_.clear();
  return absl::OkStatus();
}

absl::Status ExperimentController::FlushWindows() {
  absl::MutexLock lock(&mu_);
  return FlushLocked();
}

absl::StatusOr<const std::vector<experiments::Window>*> ExperimentController::FollowWindows(
    WindowCache& cache, const std::string& name, size_t segment_keys, size_t reserve) {
  if (!cache.windows.has_value()) {
    cache = {};
    cache.windows.emplace().reserve(reserve);
  }
  absl::StatusOr<uint64_t> next = deps_.store->ForEachWindowSince(
      name, cache.cursor,
      [&](const WindowRow& row, const std::string& host_id, std::vector<std::string> segment,
          const v1::MetricWindow& window) {
        if (!cache.recent.emplace(row.id, row.write_seq).second) return;  // a repeat
        ++cache.rows;
        if (window.valid()) ++cache.valid_rows;
        experiments::Window w = experiments::WindowFromProto(window, host_id, std::move(segment));
        // A window whose segment does not fit (impossible unless the database was edited)
        // would fail the whole aggregation: leave it out.
        if (w.segment.size() != segment_keys || w.duration <= absl::ZeroDuration()) return;
        cache.windows->push_back(std::move(w));
        cache.ids.push_back(row.id);
      });
  if (!next.ok()) {
    if (cache.rows == 0 && cache.windows->empty()) {
      cache.windows.reset();
      return next.status();
    }
    return &*cache.windows;  // what was read before the store went away
  }
  cache.cursor = *next;
  std::erase_if(cache.recent, [&](const auto& row) { return row.second < cache.cursor; });
  return &*cache.windows;
}

std::pair<uint64_t, uint64_t> ExperimentController::PendingWindows(std::string_view name) const {
  uint64_t pending = 0;
  uint64_t pending_valid = 0;
  for (const StoredWindow& w : pending_) {
    if (w.experiment != name) continue;
    ++pending;
    if (w.window.valid()) ++pending_valid;
  }
  return {pending, pending_valid};
}

absl::StatusOr<const std::vector<experiments::Window>*> ExperimentController::Windows(
    Entry& entry) {
  // This server's buffered windows first, so the read below holds them (a failed write keeps
  // them buffered; they join the cache once stored).
  (void)FlushLocked();
  if (!entry.cache.windows.has_value() && !Running(entry)) {
    for (auto& [name, other] : entries_) {  // one ended experiment in memory at a time
      if (!Running(other)) other.cache = {};
    }
  }
  const std::string& name = entry.proto.metadata().name();
  absl::StatusOr<const std::vector<experiments::Window>*> windows =
      FollowWindows(entry.cache, name, entry.experiment.segment_keys.size(), entry.windows);
  if (!windows.ok()) return windows.status();
  // Windows other servers stored count towards the experiment's cap too.
  const auto [pending, pending_valid] = PendingWindows(name);
  entry.windows = std::max(entry.windows, entry.cache.rows + pending);
  entry.valid_windows = std::max(entry.valid_windows, entry.cache.valid_rows + pending_valid);
  return windows;
}

}  // namespace rxfleet::server
