#pragma once

// A deterministic simulated fleet for experiment tests and benchmarks: adapters with a
// per-adapter level (hosts differ) and per-arm effects, reporting one window per window
// length as the agents would, with arms taken from the Assigner. The noise comes from
// SplitMix64 (uniform, unit variance), so the windows are the same on every platform and
// golden renderings stay stable.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"

namespace rxfleet::experiments::testing {

// Per-arm means of one simulated adapter (arm index = Experiment::arms index).
struct ArmEffect {
  double rx_bps = 100e6;
  double drop_ratio = 0.01;
  double rtt_p99_seconds = 0.002;
  double busiest_core_ratio = 0.1;
};

struct SimAdapter {
  std::string key;                   // AdapterKey(host, adapter)
  std::vector<std::string> segment;  // aligned with the experiment's segment keys
  std::vector<ArmEffect> arms;       // one per experiment arm
  double level = 1.0;                // multiplies throughput: hosts differ
};

struct SimOptions {
  absl::Time until = absl::InfiniteFuture();  // stop before this time (default: the end)
  double noise = 0.03;                        // relative window-to-window noise (sd)
  bool agent_marks_burn_in = true;            // burn-in windows arrive invalid ("burn_in") or valid
  uint64_t seed = 1;
  std::vector<StoppedArm> stopped;
};

// Uniform noise on [-sqrt(3), sqrt(3)): mean 0, variance 1, from SplitMix64.
inline double UnitNoise(SplitMix64& rng) {
  const double u = static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
  return (2 * u - 1) * 1.7320508075688772;
}

// One window of `adapter` running an arm with means `effect` from `start` for `length`, with
// relative noise `noise` (sd) drawn from `rng`. The caller sets arm, period and validity.
inline Window SimulatedWindow(const SimAdapter& adapter, const ArmEffect& effect, absl::Time start,
                              absl::Duration length, double noise, SplitMix64& rng) {
  const double seconds = absl::ToDoubleSeconds(length);
  auto noisy = [&](double value) { return std::max(0.0, value * (1 + noise * UnitNoise(rng))); };
  Window w;
  w.adapter = adapter.key;
  w.segment = adapter.segment;
  w.start = start;
  w.duration = length;
  w.rx_bytes = static_cast<uint64_t>(noisy(effect.rx_bps * adapter.level) * seconds / 8);
  w.tx_bytes = w.rx_bytes / 20;
  w.rx_packets = 100000;
  w.tx_packets = 5000;
  const double drop = std::min(0.99, noisy(effect.drop_ratio));
  w.rx_dropped = static_cast<uint64_t>(std::llround(drop / (1 - drop) * 100000));
  w.rtt_count = 60;
  w.rtt_p99_seconds = noisy(effect.rtt_p99_seconds);
  w.rtt_mean_seconds = w.rtt_p99_seconds / 2;
  w.probes_sent = 60;
  w.probes_lost = 0;
  w.busiest_core_ratio = std::min(1.0, noisy(effect.busiest_core_ratio));
  w.host_cpu_ratio = w.busiest_core_ratio / 2;
  return w;
}

// Windows of every adapter from the experiment start to the end (or options.until).
inline std::vector<Window> Simulate(const Assigner& assigner,
                                    const std::vector<SimAdapter>& adapters,
                                    const SimOptions& options = {}) {
  const Experiment& e = assigner.experiment();
  SplitMix64 rng(options.seed);
  std::vector<Window> windows;
  const absl::Time until = std::min(options.until, assigner.end());
  for (const SimAdapter& adapter : adapters) {
    for (absl::Time t = assigner.start(); t + e.window_length <= until; t += e.window_length) {
      absl::StatusOr<Assignment> a =
          assigner.Assign(adapter.key, adapter.segment, t, options.stopped);
      if (!a.ok()) continue;
      Window w = SimulatedWindow(adapter, adapter.arms[a->arm_index], t, e.window_length,
                                 options.noise, rng);
      w.arm = a->arm;
      w.period_index = a->period_index;
      w.valid = !(a->in_burn_in && options.agent_marks_burn_in);
      if (!w.valid) w.invalid_reason = "burn_in";
      windows.push_back(std::move(w));
    }
  }
  return windows;
}

}  // namespace rxfleet::experiments::testing
