// Cost of one hold tuning update (server/tuning/planner.h Update, what the server's tuning step
// runs for a segment once per window length) on a segment of N adapters after a day of
// exploration: 6 candidates, adapterShare 0.2, 60 s windows, 30-minute periods, so 0.2 x N
// explorers report one window a minute. The windows follow a SYNTHETIC model (throughput
// peaking at 128 µs, 2 % noise). Results: docs/PERFORMANCE.md, "Hold tuning".

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/tuning/hold_tuning.h"
#include "server/experiments/aggregate.h"
#include "server/tuning/planner.h"

namespace rxfleet::tuning {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1767225600);

constexpr char kTuning[] = R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: bench}
spec:
  candidates: [32us, 64us, 128us, 256us, 512us, 1024us]
  objective: {metric: rx_throughput_bps, direction: maximize}
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
  budget: {adapterShare: 0.2, maxWindows: 1000000}
  windowLength: 60s
  periodLength: 30m
  burnIn: 5m
)";

struct Fixture {
  HoldTuning tuning;
  SegmentInput input;
  SegmentState state;
  std::vector<experiments::Window> windows;
  absl::Time now;
};

// `adapters` SuperSpeed adapters at 32 µs, explored for `hours` with the planner updated at
// every period boundary, as the server would.
Fixture Build(int adapters, int hours) {
  Fixture f;
  f.tuning = *ParseHoldTuning(kTuning, "bench.yaml");
  f.input.segment = {};
  f.input.incumbent_hold_us = 32;
  for (int i = 0; i < adapters; ++i) {
    common::AdapterAttributes a;
    a.host = absl::StrCat("host-", i);
    a.adapter_id = "port-1";
    a.chip = "rtl8922au";
    a.family = "rtw89";
    a.usb_speed = common::UsbSpeed::kSuper;
    f.input.adapters.push_back(a);
  }
  f.state = *StartSegment(f.tuning, f.input, kStart);
  const std::map<uint32_t, double> mbps = {{32, 800},  {64, 900},  {128, 1000},
                                           {256, 850}, {512, 700}, {1024, 600}};
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(1, 0.02);
  const absl::Time end = kStart + absl::Hours(hours);
  for (absl::Time t = kStart; t < end; t += absl::Minutes(1)) {
    for (const std::string& key : SlotAdaptersAt(f.tuning, f.state, t)) {
      const HoldAssignment a = *AssignmentFor(f.tuning, f.state, key, t);
      experiments::Window w;
      w.adapter = key;
      w.arm = a.arm;
      w.period_index = a.period_index;
      w.start = t;
      w.duration = absl::Minutes(1);
      w.valid = !a.in_burn_in;
      w.rx_bytes = static_cast<uint64_t>(mbps.at(a.hold_us) * noise(rng) * 1e6 * 60 / 8);
      w.rx_packets = w.rx_bytes / 1500;
      f.windows.push_back(std::move(w));
    }
    if ((t - kStart) % absl::Minutes(30) == absl::ZeroDuration()) {
      f.state = *Update(f.tuning, f.state, f.input, f.windows, t);
    }
  }
  f.now = end;
  return f;
}

void BM_TuningUpdate(benchmark::State& state) {
  const Fixture f = Build(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    absl::StatusOr<SegmentState> next = Update(f.tuning, f.state, f.input, f.windows, f.now);
    benchmark::DoNotOptimize(next);
  }
  state.counters["windows"] = static_cast<double>(f.windows.size());
  state.counters["round"] = f.state.rounds.empty() ? 0 : f.state.rounds.back().number;
}
BENCHMARK(BM_TuningUpdate)->Args({100, 24})->Args({1000, 24})->Unit(benchmark::kMillisecond);

// One explorer's assignment (a claim of the bundle path, once per period per explorer).
void BM_TuningAssignment(benchmark::State& state) {
  const Fixture f = Build(1000, 1);
  const std::vector<std::string> keys = SlotAdaptersAt(f.tuning, f.state, f.now);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(AssignmentFor(f.tuning, f.state, keys[i++ % keys.size()], f.now));
  }
}
BENCHMARK(BM_TuningAssignment)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace rxfleet::tuning

BENCHMARK_MAIN();
