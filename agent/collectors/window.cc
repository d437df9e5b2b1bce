#include "agent/collectors/window.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

namespace rxfleet::agent {
namespace {

// Nearest-rank percentile of sorted, non-empty samples: the smallest value with at least p% of
// the samples at or below it.
double NearestRank(const std::vector<double>& sorted, double p) {
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

uint64_t Delta(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

double Ratio(uint64_t part, uint64_t rest) {
  const uint64_t whole = part + rest;
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

RttSummary SummarizeRtt(std::vector<double> samples) {
  RttSummary summary;
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double s : samples) sum += s;
  summary.count = samples.size();
  summary.mean_seconds = sum / static_cast<double>(samples.size());
  summary.p50_seconds = NearestRank(samples, 50);
  summary.p90_seconds = NearestRank(samples, 90);
  summary.p99_seconds = NearestRank(samples, 99);
  size_t below = 0;  // samples are sorted: count them off bucket by bucket
  for (double bound : IcmpProber::RttBuckets()) {
    while (below < samples.size() && samples[below] <= bound) ++below;
    summary.buckets.push_back(RttBucket{bound, below});
  }
  summary.buckets.push_back(RttBucket{std::numeric_limits<double>::max(), samples.size()});
  return summary;
}

double AdapterWindow::RxBitsPerSecond() const {
  return duration_seconds > 0 ? static_cast<double>(traffic.rx_bytes) * 8.0 / duration_seconds
                              : 0.0;
}

double AdapterWindow::TxBitsPerSecond() const {
  return duration_seconds > 0 ? static_cast<double>(traffic.tx_bytes) * 8.0 / duration_seconds
                              : 0.0;
}

double AdapterWindow::RxDropRatio() const { return Ratio(traffic.rx_dropped, traffic.rx_packets); }

double AdapterWindow::ProbeLossRatio() const {
  return probes_sent == 0 ? 0.0
                          : static_cast<double>(std::min(probes_lost, probes_sent)) /
                                static_cast<double>(probes_sent);
}

WindowTracker::WindowTracker(const NetdevCollector* netdev, const CpuCollector* cpu,
                             IcmpProber* prober, WindowOptions options)
    : netdev_(netdev), cpu_(cpu), prober_(prober), options_(options) {
  if (options_.length <= absl::ZeroDuration()) options_.length = absl::Seconds(10);
}

void WindowTracker::SetLength(absl::Duration length) {
  if (length <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  options_.length = length;
}

absl::Status WindowTracker::Collect(SteadyTime now) {
  std::map<std::string, NetdevTotals> totals;
  if (netdev_ != nullptr) totals = netdev_->Totals();
  std::optional<ProcStat> stat;
  if (cpu_ != nullptr) stat = cpu_->LastProcStat();

  absl::MutexLock lock(&mu_);
  if (!start_.has_value()) {
    start_ = now;
    start_wall_ = absl::Now();
    start_totals_ = std::move(totals);
    start_stat_ = std::move(stat);
    if (prober_ != nullptr) prober_->TakeWindowStats();  // drop samples from before the window
    return absl::OkStatus();
  }
  if (absl::FromChrono(now - *start_) < options_.length) return absl::OkStatus();

  const std::chrono::duration<double> duration = now - *start_;
  std::map<std::string, ProbeWindowStats> probes;
  if (prober_ != nullptr) probes = prober_->TakeWindowStats();
  std::optional<CpuUsage> cpu;
  if (start_stat_.has_value() && stat.has_value()) {
    absl::StatusOr<CpuUsage> usage = ComputeCpuUsage(*start_stat_, *stat);
    if (usage.ok()) cpu = *usage;
  }

  std::map<std::string, AdapterWindow> windows;
  auto window_for = [&](const std::string& id) -> AdapterWindow& {
    AdapterWindow& w = windows[id];
    w.adapter_id = id;
    w.start_time = start_wall_;
    w.duration_seconds = duration.count();
    w.cpu = cpu;
    return w;
  };
  for (const auto& [id, end] : totals) {
    AdapterWindow& w = window_for(id);
    auto start_it = start_totals_.find(id);
    if (start_it != start_totals_.end()) {
      w.counter_reset = end.resets > start_it->second.resets;
      w.netdev_missing = end.missing_samples > start_it->second.missing_samples;
    }
    // Traffic needs readable statistics at both edges, read at ticks inside this window.
    if (start_it == start_totals_.end() || !start_it->second.present || !end.present) {
      w.netdev_missing = w.netdev_missing || end.missing_samples > 0;
      continue;
    }
    const NetdevCounters& a = start_it->second.counters;
    const NetdevCounters& b = end.counters;
    w.has_traffic = true;
    w.traffic = NetdevCounters{Delta(a.rx_bytes, b.rx_bytes),     Delta(a.tx_bytes, b.tx_bytes),
                               Delta(a.rx_packets, b.rx_packets), Delta(a.tx_packets, b.tx_packets),
                               Delta(a.rx_dropped, b.rx_dropped), Delta(a.rx_errors, b.rx_errors),
                               Delta(a.tx_dropped, b.tx_dropped), Delta(a.tx_errors, b.tx_errors)};
  }
  for (auto& [id, stats] : probes) {
    AdapterWindow& w = window_for(id);
    w.probes_sent = stats.sent;
    w.probes_lost = stats.lost;
    w.rtt = SummarizeRtt(std::move(stats.rtt_seconds));
  }

  last_ = std::move(windows);
  ++completed_;
  start_ = now;
  start_wall_ = absl::Now();
  start_totals_ = std::move(totals);
  start_stat_ = std::move(stat);
  return absl::OkStatus();
}

std::map<std::string, AdapterWindow> WindowTracker::LastWindows() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

std::optional<AdapterWindow> WindowTracker::LastWindow(std::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  auto it = last_.find(std::string(adapter_id));
  if (it == last_.end()) return std::nullopt;
  return it->second;
}

uint64_t WindowTracker::completed_windows() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

}  // namespace rxfleet::agent
