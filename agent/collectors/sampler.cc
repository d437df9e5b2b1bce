#include "agent/collectors/sampler.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {

using common::ToAbslView;

Sampler::Sampler(prometheus::Registry& registry, const std::vector<Collector*>& collectors,
                 SamplerOptions options)
    : options_(std::move(options)) {
  if (options_.interval <= absl::ZeroDuration()) options_.interval = absl::Seconds(1);
  if (!options_.log) options_.log = LogToStderr;
  auto& success = prometheus::BuildGauge()
                      .Name("rxfleet_collector_success")
                      .Help("1 if the collector's last run succeeded, 0 if it failed.")
                      .Register(registry);
  auto& duration = prometheus::BuildGauge()
                       .Name("rxfleet_collector_duration_seconds")
                       .Help("Wall time of the collector's last run, in seconds.")
                       .Register(registry);
  auto& errors = prometheus::BuildCounter()
                     .Name("rxfleet_collector_errors_total")
                     .Help("Collector runs that returned an error.")
                     .Register(registry);
  for (Collector* collector : collectors) {
    const std::map<std::string, std::string> labels = {
        {"collector", std::string(collector->Name())}};
    wrapped_.push_back(
        Wrapped{collector, &success.Add(labels), &duration.Add(labels), &errors.Add(labels)});
  }
}

Sampler::~Sampler() { Stop(); }

void Sampler::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Sampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Sampler::Loop() {
  while (true) {
    const SteadyTime start = std::chrono::steady_clock::now();
    RunOnce(start);
    const absl::Duration elapsed = absl::FromChrono(std::chrono::steady_clock::now() - start);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval - elapsed);
    if (stop_) return;
  }
}

void Sampler::RunOnce(SteadyTime now) {
  absl::MutexLock run_lock(&run_mu_);
  for (Wrapped& w : wrapped_) {
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = w.collector->Collect(now);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    w.duration->Set(took.count());
    w.success->Set(status.ok() ? 1 : 0);
    if (!status.ok()) {
      w.errors->Increment();
      if (!w.failing) {
        options_.log(absl::StrCat("collector ", ToAbslView(w.collector->Name()),
                                  " failed (reported as rxfleet_collector_success 0 until it "
                                  "recovers): ",
                                  status.ToString()));
      }
    } else if (w.failing) {
      options_.log(absl::StrCat("collector ", ToAbslView(w.collector->Name()), " recovered"));
    }
    w.failing = !status.ok();
  }
  absl::MutexLock lock(&mu_);
  ++runs_;
}

uint64_t Sampler::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

bool Sampler::WaitForRuns(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

}  // namespace rxfleet::agent
