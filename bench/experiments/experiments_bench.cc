// Cost of the experiment core at fleet scale: the report and the guardrail check over
// 1,000 adapters x 1,000 windows (one million windows, about 16.7 hours of 60 s windows per
// adapter), and one assignment for bundle building. Results: docs/PERFORMANCE.md,
// "Experiment report".

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"
#include "server/experiments/guardrails.h"
#include "server/experiments/report.h"

namespace rxfleet::experiments {
namespace {

constexpr int kAdapters = 1000;
constexpr int kWindowsPerAdapter = 1000;
const absl::Time kStart = absl::FromUnixSeconds(1767225600);

std::string Document(const std::string& design) {
  return absl::StrCat(R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: bench}
spec:
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: )",
                      design, R"(
  duration: 1000m
  windowLength: 60s
)",
                      design == "switchback" ? "  periodLength: 30m\n" : "", R"(  burnIn: 5m
  primaryMetric: rx_throughput_bps
  secondaryMetrics: [rtt_p99_seconds, busiest_core_ratio, rx_drop_ratio]
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
    - {metric: busiest_core_ratio, op: "<=", threshold: 0.9}
    - {metric: rtt_p99_seconds, op: "<=", threshold: 20ms}
  segments: [usb_speed, board]
)");
}

struct Fixture {
  Experiment experiment;
  std::vector<Window> windows;
};

// 1,000 adapters in four segments, every window of the experiment, arms from the Assigner,
// values varying by adapter, arm and window.
Fixture MakeFixture(const std::string& design) {
  Fixture f;
  f.experiment = *ParseExperiment(Document(design), "bench.yaml");
  const Assigner assigner = *Assigner::Create(f.experiment, kStart);
  const std::vector<std::vector<std::string>> segments = {
      {"super", "x86"}, {"super", "pi5"}, {"high", "pi1"}, {"high", "pi5"}};
  f.windows.reserve(static_cast<size_t>(kAdapters) * kWindowsPerAdapter);
  SplitMix64 rng(1);
  for (int a = 0; a < kAdapters; ++a) {
    const std::string key = AdapterKey(absl::StrCat("host-", a), "port-1");
    const std::vector<std::string>& segment = segments[a % segments.size()];
    for (int k = 0; k < kWindowsPerAdapter; ++k) {
      const absl::Time t = kStart + absl::Minutes(k);
      const Assignment assignment = *assigner.Assign(key, segment, t, {});
      const bool short_hold = assignment.arm_index == 1;
      const double jitter = static_cast<double>(rng.Next() >> 40) / (1 << 24);  // [0, 1)
      Window w;
      w.adapter = key;
      w.segment = segment;
      w.arm = assignment.arm;
      w.period_index = assignment.period_index;
      w.start = t;
      w.duration = absl::Seconds(60);
      w.valid = !assignment.in_burn_in;
      if (!w.valid) w.invalid_reason = "burn_in";
      w.rx_bytes = static_cast<uint64_t>((short_hold ? 7.5e9 : 4.6e9) * (0.9 + 0.2 * jitter));
      w.tx_bytes = w.rx_bytes / 20;
      w.rx_packets = 5000000;
      w.rx_dropped = short_hold ? 900 : 600;
      w.rtt_count = 60;
      w.rtt_p99_seconds = (short_hold ? 0.0013 : 0.0023) * (0.9 + 0.2 * jitter);
      w.rtt_mean_seconds = w.rtt_p99_seconds / 2;
      w.probes_sent = 60;
      w.busiest_core_ratio = (short_hold ? 0.128 : 0.084) * (0.9 + 0.2 * jitter);
      w.host_cpu_ratio = w.busiest_core_ratio / 2;
      f.windows.push_back(std::move(w));
    }
  }
  return f;
}

const Fixture& Switchback() {
  static const Fixture* fixture = new Fixture(MakeFixture("switchback"));
  return *fixture;
}

const Fixture& Parallel() {
  static const Fixture* fixture = new Fixture(MakeFixture("parallel"));
  return *fixture;
}

void BM_Report(benchmark::State& state, const Fixture& (*fixture)()) {
  const Fixture& f = fixture();
  const ReportOptions options{kStart, kStart + f.experiment.duration, {}};
  for (auto _ : state) {
    absl::StatusOr<Report> report = ComputeReport(f.experiment, f.windows, options);
    if (!report.ok()) state.SkipWithError(std::string(report.status().message()).c_str());
    benchmark::DoNotOptimize(report);
  }
  state.counters["windows"] = static_cast<double>(f.windows.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.windows.size()));
}

void BM_ReportText(benchmark::State& state) {
  const Fixture& f = Switchback();
  const Report report =
      *ComputeReport(f.experiment, f.windows, {kStart, kStart + f.experiment.duration, {}});
  for (auto _ : state) benchmark::DoNotOptimize(RenderReportText(report));
}

void BM_Guardrails(benchmark::State& state) {
  const Fixture& f = Switchback();
  for (auto _ : state) {
    absl::StatusOr<std::vector<GuardrailDecision>> decisions =
        EvaluateGuardrails(f.experiment, kStart, f.windows, {});
    benchmark::DoNotOptimize(decisions);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.windows.size()));
}

void BM_Assign(benchmark::State& state) {
  const Assigner assigner = *Assigner::Create(Switchback().experiment, kStart);
  const std::vector<std::string> segment = {"super", "x86"};
  int i = 0;
  for (auto _ : state) {
    const std::string key = AdapterKey("host-1", absl::StrCat("port-", i++ % 64));
    benchmark::DoNotOptimize(assigner.Assign(key, segment, kStart + absl::Hours(3), {}));
  }
}

BENCHMARK_CAPTURE(BM_Report, switchback_1000x1000, Switchback)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Report, parallel_1000x1000, Parallel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Guardrails)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReportText)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Assign);

}  // namespace
}  // namespace rxfleet::experiments

BENCHMARK_MAIN();
