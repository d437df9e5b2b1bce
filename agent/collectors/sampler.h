#pragma once

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/collectors/collector.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

struct SamplerOptions {
  /// Time between the starts of two sampling runs. Must be > 0. Default 1 s.
  absl::Duration interval = absl::Seconds(1);
  /// Where "collector X failed: ..." / "collector X recovered" lines go.
  LogFn log = LogToStderr;
};

/// Runs a fixed list of collectors on their own thread, every `interval`, in list order (so a
/// collector that reads others' results, like WindowTracker, goes last). Each run is wrapped:
///  - rxfleet_collector_success{collector}           gauge, 1 if the last Collect() returned OK
///  - rxfleet_collector_duration_seconds{collector}  gauge, wall time of the last Collect()
///  - rxfleet_collector_errors_total{collector}      counter of failed Collect() calls
/// so one failing collector never fails a scrape or the other collectors. A failure is logged
/// once when a collector starts failing (with its status) and once when it recovers.
/// If a run overruns the interval, the next one starts immediately (no backlog of runs).
/// Thread-safe: Start/Stop may be called from any thread; Stop wakes the thread at once (it
/// waits on a condition, never a plain sleep) and joins it.
class Sampler {
 public:
  /// `collectors` are not owned and must outlive the Sampler. Their metric families and the
  /// wrapper's families live in `registry`, which must outlive the Sampler too.
  Sampler(prometheus::Registry& registry, const std::vector<Collector*>& collectors,
          SamplerOptions options = {});
  /// Stops the thread if running.
  ~Sampler();

  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  /// Starts the sampling thread; the first run happens immediately. No-op if already running.
  void Start();

  /// Stops and joins the sampling thread; returns after an in-progress Collect() finishes.
  /// Idempotent. After Stop, Start may be called again.
  void Stop();

  /// Runs every collector once on the calling thread with tick time `now`, updating the wrapper
  /// metrics. Used by the thread and by tests; must not run concurrently with a started Sampler.
  void RunOnce(SteadyTime now);

  /// Number of completed runs (each RunOnce counts). Lets tests wait for progress.
  uint64_t runs() const;

  /// Blocks until at least `n` runs have completed or `timeout` passed; true if reached.
  bool WaitForRuns(uint64_t n, absl::Duration timeout) const;

 private:
  struct Wrapped {
    Collector* collector;
    prometheus::Gauge* success;
    prometheus::Gauge* duration;
    prometheus::Counter* errors;
    bool failing = false;
  };

  void Loop();

  SamplerOptions options_;
  std::vector<Wrapped> wrapped_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
  absl::Mutex run_mu_;  // serialises RunOnce
};

}  // namespace rxfleet::agent
