#include "agent/experiments/experiment_windows.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"

namespace rxfleet::agent {
namespace {

uint64_t Delta(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

// Window index of `wall` in a period starting at `start` with windows of `length` (floor, so
// times before the start get negative indexes).
int64_t WindowIndex(absl::Time start, absl::Duration length, absl::Time wall) {
  absl::Duration remainder;
  const int64_t index = absl::IDivDuration(wall - start, length, &remainder);  // toward zero
  return remainder < absl::ZeroDuration() ? index - 1 : index;
}

bool SameAssignment(const ExperimentAssignment& a, const ExperimentAssignment& b) {
  return a.arm == b.arm && a.period_index == b.period_index &&
         a.experiment_generation == b.experiment_generation && a.settings == b.settings &&
         a.period_start == b.period_start && a.window_length == b.window_length &&
         a.burn_in == b.burn_in && a.period_end == b.period_end;
}

// The register holds every field the arm sets.
bool Matches(const common::RxAggSettings& arm, const common::RxAggFields& fields) {
  if (arm.hold_us && *arm.hold_us != fields.hold_us) return false;
  if (arm.count_threshold && *arm.count_threshold != fields.count_threshold) return false;
  if (arm.buffer_kib && *arm.buffer_kib != fields.buffer_kib) return false;
  if (arm.enable && *arm.enable != fields.enable) return false;
  return true;
}

common::RxAggSettings Observed(const common::RxAggFields& fields) {
  common::RxAggSettings s;
  s.hold_us = fields.hold_us;
  s.count_threshold = fields.count_threshold;
  s.buffer_kib = fields.buffer_kib;
  s.enable = fields.enable;
  return s;
}

std::string FirstSeenKey(const ExperimentAssignment& a) {
  return absl::StrCat(a.adapter_id, "|", a.experiment, "|", a.arm, "|", a.period_index, "|",
                      a.experiment_generation);
}

}  // namespace

ExperimentWindowCutter::ExperimentWindowCutter(ExperimentWindowOptions options)
    : options_(options) {
  if (options_.default_length <= absl::ZeroDuration()) options_.default_length = absl::Seconds(60);
  if (options_.clock_jump_tolerance <= absl::ZeroDuration()) {
    options_.clock_jump_tolerance = absl::Seconds(1);
  }
}

void ExperimentWindowCutter::SetAssignments(uint64_t bundle_version,
                                            std::vector<ExperimentAssignment> assignments,
                                            SteadyTime at) {
  absl::MutexLock lock(&mu_);
  bundle_version_ = bundle_version;
  assignments_ = std::move(assignments);
  if (!changed_at_.has_value()) changed_at_ = at;
}

void ExperimentWindowCutter::SetDefaultLength(absl::Duration length) {
  if (length <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  options_.default_length = length;
}

std::vector<std::pair<std::string, std::string>> ExperimentWindowCutter::OpenWindows() const {
  absl::MutexLock lock(&mu_);
  std::vector<Key> keys;
  for (const auto& [key, open] : open_) keys.push_back(key);
  return keys;
}

std::optional<absl::Time> ExperimentWindowCutter::NextEdge() const {
  absl::MutexLock lock(&mu_);
  std::optional<absl::Time> next;
  for (const auto& [key, open] : open_) {
    absl::Time edge = open.period_start + open.length * (open.index + 1);
    if (open.assignment.period_end.has_value()) edge = std::min(edge, *open.assignment.period_end);
    if (!next.has_value() || edge < *next) next = edge;
  }
  return next;
}

void ExperimentWindowCutter::Invalidate(Open& open, std::string_view reason) {
  if (open.invalid_reason.empty()) open.invalid_reason = std::string(reason);
}

void ExperimentWindowCutter::Check(Open& open, const ExperimentTick& tick) const {
  const std::string& id = open.assignment.adapter_id;
  auto adapter = tick.adapters.find(id);
  if (adapter == tick.adapters.end() || !adapter->second.present) {
    Invalidate(open, kInvalidAdapterGone);
  } else {
    const AdapterRegisterState& state = adapter->second;
    if (state.fields.has_value()) open.observed = Observed(*state.fields);
    if (!state.verified || !state.fields.has_value() ||
        !Matches(open.assignment.settings, *state.fields)) {
      Invalidate(open, kInvalidSettingsNotApplied);
    }
  }
  auto totals = tick.totals.find(id);
  if (totals == tick.totals.end() || !totals->second.present) {
    Invalidate(open, kInvalidAdapterGone);
  } else if (open.start_totals.has_value()) {
    if (totals->second.missing_samples > open.start_totals->missing_samples) {
      Invalidate(open, kInvalidAdapterGone);
    }
    if (totals->second.resets > open.start_totals->resets) {
      Invalidate(open, kInvalidCounterReset);
    }
  }
}

ExperimentWindow ExperimentWindowCutter::Close(Open& open, const ExperimentTick& tick) const {
  ExperimentWindow out;
  AdapterWindow& w = out.window;
  w.adapter_id = open.assignment.adapter_id;
  w.start_time = open.start_wall;
  w.duration_seconds = std::chrono::duration<double>(tick.now - open.start).count();
  auto end = tick.totals.find(w.adapter_id);
  if (end != tick.totals.end() && open.start_totals.has_value()) {
    const NetdevTotals& start = *open.start_totals;
    w.counter_reset = end->second.resets > start.resets;
    w.netdev_missing = end->second.missing_samples > start.missing_samples;
    if (start.present && end->second.present) {
      const NetdevCounters& a = start.counters;
      const NetdevCounters& b = end->second.counters;
      w.has_traffic = true;
      w.traffic =
          NetdevCounters{Delta(a.rx_bytes, b.rx_bytes),     Delta(a.tx_bytes, b.tx_bytes),
                         Delta(a.rx_packets, b.rx_packets), Delta(a.tx_packets, b.tx_packets),
                         Delta(a.rx_dropped, b.rx_dropped), Delta(a.rx_errors, b.rx_errors),
                         Delta(a.tx_dropped, b.tx_dropped), Delta(a.tx_errors, b.tx_errors)};
    }
  } else {
    w.netdev_missing = true;
  }
  if (open.start_stat.has_value() && tick.stat.has_value()) {
    absl::StatusOr<CpuUsage> usage = ComputeCpuUsage(*open.start_stat, *tick.stat);
    if (usage.ok()) w.cpu = *usage;
  }
  w.probes_sent = open.probes.sent;
  w.probes_lost = open.probes.lost;
  w.rtt = SummarizeRtt(std::move(open.probes.rtt_seconds));

  out.experiment = open.assignment.experiment;
  out.arm = open.assignment.arm;
  out.period_index = open.assignment.period_index;
  out.experiment_generation = open.assignment.experiment_generation;
  out.bundle_version = open.bundle_version;
  out.observed_settings = open.observed;
  out.invalid_reason = open.invalid_reason;
  out.valid = out.invalid_reason.empty();
  return out;
}

std::vector<ExperimentWindow> ExperimentWindowCutter::Tick(const ExperimentTick& tick) {
  absl::MutexLock lock(&mu_);
  std::vector<ExperimentWindow> closed;

  // Wall clock against the monotonic clock since the previous tick.
  bool jumped = false;
  if (last_tick_.has_value()) {
    const absl::Duration steady = absl::FromChrono(tick.now - last_tick_->first);
    const absl::Duration wall = tick.wall - last_tick_->second;
    jumped = absl::AbsDuration(wall - steady) > options_.clock_jump_tolerance;
  }
  last_tick_ = std::make_pair(tick.now, tick.wall);
  for (auto& [key, open] : open_) {
    if (jumped) Invalidate(open, kInvalidClockJump);
    if (auto probes = tick.probes.find(key.first); probes != tick.probes.end()) {
      open.probes.sent += probes->second.sent;
      open.probes.lost += probes->second.lost;
      open.probes.rtt_seconds.insert(open.probes.rtt_seconds.end(),
                                     probes->second.rtt_seconds.begin(),
                                     probes->second.rtt_seconds.end());
    }
  }

  // A change applied long after it happened may have reached the registers inside the window.
  const bool late_change = changed_at_.has_value() &&
                           absl::FromChrono(tick.now - *changed_at_) > options_.edge_tolerance;
  changed_at_.reset();

  // The assignments in force now, with their effective period start and window length.
  struct Current {
    const ExperimentAssignment* assignment;
    absl::Time period_start;
    absl::Duration length;
  };
  std::map<Key, Current> current;
  std::set<std::string> seen_keys;
  for (const ExperimentAssignment& a : assignments_) {
    if (a.period_end.has_value() && *a.period_end <= tick.wall) continue;  // period over
    absl::Time start;
    if (a.period_start.has_value()) {
      start = *a.period_start;
    } else {
      const std::string seen = FirstSeenKey(a);
      seen_keys.insert(seen);
      start = first_seen_.try_emplace(seen, tick.wall).first->second;
    }
    const absl::Duration length =
        a.window_length > absl::ZeroDuration() ? a.window_length : options_.default_length;
    current.emplace(Key{a.adapter_id, a.experiment}, Current{&a, start, length});
  }
  std::erase_if(first_seen_, [&](const auto& entry) { return !seen_keys.contains(entry.first); });
  // A switch inside a period counts until that period is over.
  std::erase_if(switched_, [&](const auto& entry) {
    auto cur = current.find(entry.first);
    return cur == current.end() || cur->second.period_start != entry.second.period_start;
  });

  // Close what ended: the assignment went away or changed, or the window's time is up.
  for (auto it = open_.begin(); it != open_.end();) {
    Open& open = it->second;
    auto cur = current.find(it->first);
    bool close = false;
    if (cur == current.end()) {
      close = true;
    } else if (!SameAssignment(open.assignment, *cur->second.assignment) ||
               open.bundle_version != bundle_version_ ||
               open.period_start != cur->second.period_start || open.length != cur->second.length) {
      close = true;
      const ExperimentAssignment& next = *cur->second.assignment;
      if (late_change && next.arm != open.assignment.arm) {
        Invalidate(open, kInvalidArmChanged);
      }
      // A switch inside the period (a guardrail or operator stop sends the adapter to control):
      // the new settings settle from now, as after a period start.
      if (open.period_start == cur->second.period_start &&
          open.assignment.period_index == next.period_index &&
          (next.arm != open.assignment.arm || !(next.settings == open.assignment.settings))) {
        switched_[it->first] = Switch{cur->second.period_start, tick.wall};
      }
    } else if (WindowIndex(open.period_start, open.length, tick.wall) != open.index) {
      close = true;
    }
    Check(open, tick);
    if (!close) {
      ++it;
      continue;
    }
    if (absl::FromChrono(tick.now - open.start) >= options_.min_duration) {
      closed.push_back(Close(open, tick));
    }
    it = open_.erase(it);
  }

  // Open the next windows.
  for (const auto& [key, cur] : current) {
    if (open_.contains(key)) continue;
    Open open;
    open.assignment = *cur.assignment;
    open.bundle_version = bundle_version_;
    open.period_start = cur.period_start;
    open.length = cur.length;
    open.index = WindowIndex(cur.period_start, cur.length, tick.wall);
    open.start = tick.now;
    open.start_wall = tick.wall;
    if (auto totals = tick.totals.find(key.first); totals != tick.totals.end()) {
      open.start_totals = totals->second;
    }
    open.start_stat = tick.stat;
    absl::Time settle_from = cur.period_start;
    if (auto sw = switched_.find(key); sw != switched_.end()) {
      settle_from = std::max(settle_from, sw->second.at);
    }
    if (tick.wall < settle_from + cur.assignment->burn_in) Invalidate(open, kInvalidBurnIn);
    Check(open, tick);
    open_.emplace(key, std::move(open));
  }
  return closed;
}

ExperimentWindowCollector::ExperimentWindowCollector(const NetdevCollector* netdev,
                                                     const CpuCollector* cpu, IcmpProber* prober,
                                                     AdapterStates adapters,
                                                     ExperimentWindowSink sink,
                                                     ExperimentWindowOptions options)
    : netdev_(netdev),
      cpu_(cpu),
      prober_(prober),
      adapters_(std::move(adapters)),
      sink_(std::move(sink)),
      cutter_(options) {}

absl::Status ExperimentWindowCollector::Collect(SteadyTime now) {
  ExperimentTick tick;
  tick.now = now;
  tick.wall = absl::Now();
  if (netdev_ != nullptr) tick.totals = netdev_->Totals();
  if (cpu_ != nullptr) tick.stat = cpu_->LastProcStat();
  if (prober_ != nullptr) tick.probes = prober_->TakeWindowStats(ProbeConsumer::kExperimentWindow);
  if (adapters_) tick.adapters = adapters_();
  for (ExperimentWindow& window : cutter_.Tick(tick)) {
    if (sink_) sink_(std::move(window));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::agent
