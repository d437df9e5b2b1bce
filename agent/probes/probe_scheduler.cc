#include "agent/probes/probe_scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

// Floor division of durations (absl's IDivDuration truncates towards zero).
int64_t FloorDiv(absl::Duration num, absl::Duration den) {
  absl::Duration rem;
  int64_t q = absl::IDivDuration(num, den, &rem);
  if (rem < absl::ZeroDuration()) --q;
  return q;
}

std::string Mbits(double bps) { return absl::StrFormat("%.1f Mbit/s", bps / 1e6); }

}  // namespace

absl::Duration StableProbeOffset(std::string_view host_id, std::string_view adapter_id,
                                 absl::Duration interval) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](std::string_view text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(host_id);
  mix("/");
  mix(adapter_id);
  const int64_t seconds = std::max<int64_t>(1, absl::ToInt64Seconds(interval));
  return absl::Seconds(static_cast<int64_t>(hash % static_cast<uint64_t>(seconds)));
}

absl::Time NextSlot(absl::Time now, absl::Duration interval, absl::Duration offset) {
  const absl::Time base = absl::UnixEpoch() + offset;
  int64_t k = FloorDiv(now - base, interval);
  absl::Time slot = base + k * interval;
  if (slot < now) slot += interval;
  return slot;
}

std::string ProbeStateLine(const std::string& adapter_id, const ProbeResult& result) {
  std::string line =
      absl::StrCat("probe ", adapter_id, " -> ", common::ProbeServerAddress(result.spec), ": ");
  if (!result.ok) {
    absl::StrAppend(&line, common::ToAbslView(ProbeFailureName(result.failure)), ": ",
                    result.failure_message);
  } else {
    const bool udp = result.spec.protocol == common::ProbeProtocol::kUdp;
    absl::StrAppend(
        &line, "ok: ", Mbits(result.throughput_bps), " ", udp ? "UDP" : "TCP", " ",
        result.spec.direction == common::ProbeDirection::kReverse ? "download" : "upload");
    if (udp) {
      absl::StrAppend(&line,
                      absl::StrFormat(", %.2f%% lost, jitter %.3f ms", result.udp_loss_ratio * 100,
                                      result.udp_jitter_seconds * 1000));
    } else {
      absl::StrAppend(&line, ", ", result.retransmits, " retransmits");
    }
  }
  absl::StrAppend(&line, ", ", result.attempts, result.attempts == 1 ? " attempt" : " attempts");
  return line;
}

ProbeScheduler::ProbeScheduler(ProbeRunner* runner, ProbeSchedulerOptions options)
    : runner_(runner), options_(std::move(options)) {
  if (!options_.random) {
    options_.random = [gen = std::make_shared<absl::BitGen>()] {
      return absl::Uniform<double>(*gen, 0.0, 1.0);
    };
  }
  if (!options_.now) options_.now = [] { return absl::Now(); };
}

ProbeScheduler::~ProbeScheduler() { Stop(); }

void ProbeScheduler::SetPolicyProbes(std::map<std::string, PolicyProbe> probes, absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (auto it = policies_.begin(); it != policies_.end();) {
    it = probes.count(it->first) == 0 ? policies_.erase(it) : std::next(it);
  }
  for (auto& [adapter_id, probe] : probes) {
    auto it = policies_.find(adapter_id);
    if (it != policies_.end() && it->second.probe == probe) continue;
    PolicyEntry entry;
    entry.offset = probe.slot_offset.value_or(
        StableProbeOffset(options_.host_id, adapter_id, probe.spec.interval));
    entry.probe = std::move(probe);
    entry.job.origin = ProbeOrigin::kPolicy;
    entry.job.adapter_id = adapter_id;
    entry.job.spec = entry.probe.spec;
    entry.job.due = NextSlot(now, entry.probe.spec.interval, entry.offset);
    entry.job.entry_id = next_entry_id_++;
    policies_[adapter_id] = std::move(entry);
  }
  ++generation_;
}

absl::Duration ProbeScheduler::WindowLength(const ExperimentAssignment& a) const {
  return a.window_length > absl::ZeroDuration() ? a.window_length : options_.default_window_length;
}

std::optional<ProbeScheduler::Job> ProbeScheduler::NextWindowJob(const ExperimentAssignment& a,
                                                                 absl::Time from) const {
  if (!a.probe.has_value() || !a.period_start.has_value()) return std::nullopt;
  const absl::Duration length = WindowLength(a);
  if (length <= absl::ZeroDuration()) return std::nullopt;
  const absl::Time start = *a.period_start;
  const absl::Time burn_in_end = start + a.burn_in;
  int64_t k = std::max<int64_t>(0, FloorDiv(from - start - a.probe_offset, length));
  for (int guard = 0; guard < 1'000'000; ++guard, ++k) {
    Job job;
    job.window_start = start + k * length;
    job.window_end = job.window_start + length;
    job.due = job.window_start + a.probe_offset;
    if (a.period_end.has_value() && job.window_end > *a.period_end) return std::nullopt;
    if (job.due < from || job.window_end <= burn_in_end) continue;
    if (a.probe_rounds > 1 &&
        FloorDiv(job.window_start - absl::UnixEpoch(), length) % a.probe_rounds != a.probe_round) {
      continue;  // another adapter's turn in this window
    }
    job.origin = ProbeOrigin::kExperiment;
    job.adapter_id = a.adapter_id;
    job.experiment = a.experiment;
    job.spec = *a.probe;
    return job;
  }
  return std::nullopt;
}

void ProbeScheduler::SetAssignments(const std::vector<ExperimentAssignment>& assignments,
                                    absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::map<WindowKey, const ExperimentAssignment*> wanted;
  for (const ExperimentAssignment& a : assignments) {
    if (a.probe.has_value() && a.period_start.has_value()) {
      wanted[{a.adapter_id, a.experiment}] = &a;
    }
  }
  for (auto it = windows_.begin(); it != windows_.end();) {
    it = wanted.count(it->first) == 0 ? windows_.erase(it) : std::next(it);
  }
  for (const auto& [key, a] : wanted) {
    auto it = windows_.find(key);
    if (it != windows_.end() && it->second.assignment == *a) continue;
    WindowEntry entry;
    entry.assignment = *a;
    std::optional<Job> job = NextWindowJob(*a, now);
    entry.scheduled = job.has_value();
    if (job.has_value()) {
      entry.job = *std::move(job);
      entry.job.entry_id = next_entry_id_++;
    }
    windows_[key] = std::move(entry);
  }
  ++generation_;
}

void ProbeScheduler::SetDefaultWindowLength(absl::Duration length) {
  if (length <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  options_.default_window_length = length;
  ++generation_;
}

std::optional<absl::Time> ProbeScheduler::NextRun() const {
  absl::MutexLock lock(&mu_);
  std::optional<absl::Time> next;
  auto consider = [&next](const Job& job) {
    if (!job.running && (!next.has_value() || job.due < *next)) next = job.due;
  };
  for (const auto& [id, entry] : policies_) consider(entry.job);
  for (const auto& [key, entry] : windows_) {
    if (entry.scheduled) consider(entry.job);
  }
  return next;
}

std::optional<ProbeScheduler::Job> ProbeScheduler::TakeDue(absl::Time now,
                                                           std::vector<std::string>* skipped) {
  // Late first attempts: to their next slot (policy) or the next window of their turn.
  auto late = [&](const Job& job) {
    return !job.running && job.attempts == 0 && now - job.due > options_.late_start;
  };
  auto note = [&](const Job& job) {
    skipped->push_back(absl::StrFormat(
        "probe %s -> %s: slot at %s skipped: the host's previous probe ran %s past it (starting "
        "now would run into the next slot at the iperf3 server)",
        job.adapter_id, common::ProbeServerAddress(job.spec),
        absl::FormatTime("%H:%M:%S", job.due, absl::UTCTimeZone()),
        absl::FormatDuration(absl::Trunc(now - job.due, absl::Milliseconds(100)))));
  };
  for (auto& [id, entry] : policies_) {
    if (!late(entry.job)) continue;
    note(entry.job);
    entry.job.due = NextSlot(now, entry.probe.spec.interval, entry.offset);
  }
  for (auto& [key, entry] : windows_) {
    if (!entry.scheduled || !late(entry.job)) continue;
    note(entry.job);
    std::optional<Job> next = NextWindowJob(entry.assignment, entry.job.window_end);
    entry.scheduled = next.has_value();
    if (next.has_value()) {
      next->entry_id = entry.job.entry_id;
      entry.job = *std::move(next);
    }
  }
  Job* best = nullptr;
  auto consider = [&best, now](Job& job) {
    if (job.running || job.due > now) return;
    // Earliest first; at equal times experiment probes first (their window is short).
    if (best == nullptr || job.due < best->due ||
        (job.due == best->due && job.origin == ProbeOrigin::kExperiment &&
         best->origin == ProbeOrigin::kPolicy)) {
      best = &job;
    }
  };
  for (auto& [key, entry] : windows_) {
    if (entry.scheduled) consider(entry.job);
  }
  for (auto& [id, entry] : policies_) consider(entry.job);
  if (best == nullptr) return std::nullopt;
  best->running = true;
  return *best;
}

absl::Duration ProbeScheduler::BusyWait(uint32_t attempts_made) {
  const absl::Duration base = options_.busy_backoff[attempts_made - 1];
  return base * (1.0 + options_.busy_jitter * options_.random());
}

int ProbeScheduler::RunDue(absl::Time now) {
  return RunDueWithClock([now] { return now; });
}

int ProbeScheduler::RunDueWithClock(const std::function<absl::Time()>& clock) {
  int ran = 0;
  for (;;) {
    std::optional<Job> job;
    std::vector<std::string> skipped;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return ran;
      job = TakeDue(clock(), &skipped);
    }
    if (options_.log) {
      for (const std::string& line : skipped) options_.log(common::LogLevel::kWarning, line);
    }
    if (!job.has_value()) return ran;
    ProbeRequest request;
    request.adapter_id = job->adapter_id;
    request.netdev = options_.netdev_of ? options_.netdev_of(job->adapter_id) : std::string();
    request.spec = job->spec;
    ProbeResult result = runner_->Run(request);
    ++ran;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return ran;  // a cancelled attempt: neither a state nor a result
    }
    Complete(*std::move(job), std::move(result), clock());
  }
}

void ProbeScheduler::Complete(Job job, ProbeResult result, absl::Time now) {
  if (job.attempts == 0) job.first_start = result.start_time;
  job.attempts += 1;
  result.attempts = job.attempts;
  result.start_time = job.first_start;
  bool final_result = true;
  bool live = false;  // the job's entry is still scheduled (not removed or replaced)
  {
    absl::MutexLock lock(&mu_);
    Job* current = nullptr;
    if (job.origin == ProbeOrigin::kPolicy) {
      auto it = policies_.find(job.adapter_id);
      if (it != policies_.end() && it->second.job.entry_id == job.entry_id) {
        current = &it->second.job;
      }
    } else {
      auto it = windows_.find({job.adapter_id, job.experiment});
      if (it != windows_.end() && it->second.job.entry_id == job.entry_id) {
        current = &it->second.job;
      }
    }
    live = current != nullptr;
    const bool retry = !result.ok && result.failure == ProbeFailure::kBusy &&
                       job.attempts <= options_.busy_backoff.size() && current != nullptr;
    if (retry) {
      const absl::Time at = now + BusyWait(job.attempts);
      // An experiment probe retried past its window would measure the next one: give up.
      if (job.origin == ProbeOrigin::kPolicy || at + job.spec.duration <= job.window_end) {
        *current = job;
        current->running = false;
        current->due = at;
        final_result = false;
      }
    }
    if (final_result && current != nullptr) {
      if (job.origin == ProbeOrigin::kPolicy) {
        PolicyEntry& entry = policies_[job.adapter_id];
        Job next = job;
        next.attempts = 0;
        next.running = false;
        // The next slot after this run's scheduled one (and not in the past).
        next.due = NextSlot(std::max(now, job.due + absl::Seconds(1)), entry.probe.spec.interval,
                            entry.offset);
        *current = std::move(next);
      } else {
        WindowEntry& entry = windows_[{job.adapter_id, job.experiment}];
        std::optional<Job> next = NextWindowJob(entry.assignment, job.window_end);
        entry.scheduled = next.has_value();
        if (next.has_value()) {
          next->entry_id = job.entry_id;
          entry.job = *std::move(next);
        } else {
          entry.job.running = false;
        }
      }
    }
    if (final_result && job.origin == ProbeOrigin::kExperiment) {
      std::vector<WindowResult>& results = window_results_[{job.adapter_id, job.experiment}];
      results.push_back({job.window_start, job.window_end - job.window_start, result});
      // Results nobody took (the window was never reported) are not kept for long.
      if (results.size() > 4) results.erase(results.begin());
    }
    ++generation_;
  }
  if (!final_result) return;
  RecordState(job, result);
  // A probe removed or replaced while it ran is not reported: the agent may already have
  // dropped the adapter's probe series.
  if (live && options_.on_result) options_.on_result(job.adapter_id, job.origin, result);
}

void ProbeScheduler::RecordState(const Job& job, const ProbeResult& result) {
  const std::string state = result.ok ? "ok" : std::string(ProbeFailureName(result.failure));
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    AdapterProbeStatus& status = statuses_[job.adapter_id];
    changed = status.state != state;
    status.state = state;
    status.last = result;
    status.origin = job.origin;
  }
  if (changed && options_.log) {
    options_.log(result.ok ? common::LogLevel::kInfo : common::LogLevel::kWarning,
                 ProbeStateLine(job.adapter_id, result));
  }
}

std::optional<ProbeResult> ProbeScheduler::TakeWindowResult(const std::string& adapter_id,
                                                            const std::string& experiment,
                                                            absl::Time window_start) {
  absl::MutexLock lock(&mu_);
  auto it = window_results_.find({adapter_id, experiment});
  if (it == window_results_.end()) return std::nullopt;
  std::vector<WindowResult>& results = it->second;
  for (auto r = results.begin(); r != results.end(); ++r) {
    if (absl::AbsDuration(r->window_start - window_start) < r->length / 2) {
      ProbeResult result = std::move(r->result);
      results.erase(r);
      if (results.empty()) window_results_.erase(it);
      return result;
    }
  }
  return std::nullopt;
}

std::map<std::string, AdapterProbeStatus> ProbeScheduler::Statuses() const {
  absl::MutexLock lock(&mu_);
  return statuses_;
}

void ProbeScheduler::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  worker_ = std::thread([this] { WorkerLoop(); });
}

void ProbeScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    stopping_ = true;
  }
  runner_->Cancel();  // the attempt in progress ends now, not at its duration + 10 s
  if (worker_.joinable()) worker_.join();
  absl::MutexLock lock(&mu_);
  started_ = false;
}

void ProbeScheduler::WorkerLoop() {
  for (;;) {
    const std::optional<absl::Time> next = NextRun();
    {
      absl::MutexLock lock(&mu_);
      const uint64_t seen = generation_;
      struct Wake {
        const ProbeScheduler* self;
        uint64_t seen;
        bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return self->stopping_ || self->generation_ != seen;
        }
      } wake{this, seen};
      const absl::Time now = options_.now();
      if (stopping_) return;
      if (!next.has_value() || *next > now) {
        // Sleep until the next run (at most a minute, so a stepped wall clock is caught up
        // with) or until the inputs change.
        const absl::Duration wait =
            next.has_value() ? std::min(*next - now, absl::Minutes(1)) : absl::Minutes(1);
        mu_.AwaitWithTimeout(absl::Condition(&wake), wait);
        if (stopping_) return;
        continue;
      }
    }
    RunDueWithClock(options_.now);
  }
}

}  // namespace rxfleet::agent
