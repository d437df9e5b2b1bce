// Cost of the experiment core at fleet scale: the report and the guardrail check over
// 1,000 adapters x 1,000 windows (one million windows, about 16.7 hours of 60 s windows per
// adapter), and one assignment for bundle building. Results: docs/PERFORMANCE.md,
// "Experiment report".

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/proto/time.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/assignment.h"
#include "server/experiments/controller.h"
#include "server/experiments/convert.h"
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

// The whole GetExperimentReport path of the server: the windows read back from SQLite (one
// million rows written once in batches of 10,000 into a temporary database), converted,
// aggregated, tested, rendered and converted to the API message.
struct StoreFixture {
  std::string dir;
  std::unique_ptr<server::Store> store;
  std::unique_ptr<server::ServerMetrics> metrics;
  std::unique_ptr<server::Registry> registry;
  std::unique_ptr<server::EventLog> events;
};

StoreFixture* MakeStoreFixture() {
  const Fixture& f = Switchback();
  auto* s = new StoreFixture();
  std::string pattern = (std::filesystem::temp_directory_path() / "rxfleet-bench-XXXXXX").string();
  s->dir = ::mkdtemp(pattern.data());
  s->store = *server::Store::Open({s->dir + "/server.db"});
  v1::Experiment e = ExperimentToProto(f.experiment);
  e.mutable_status()->set_phase(v1::EXPERIMENT_PHASE_RUNNING);
  *e.mutable_status()->mutable_start_time() = common::TimeToProto(kStart);
  e.mutable_status()->set_seed(1);
  (void)*s->store->CreateExperiment(e, kStart);
  std::vector<server::StoredWindow> batch;
  for (const Window& w : f.windows) {
    server::StoredWindow stored;
    stored.experiment = f.experiment.name;
    stored.host_id = w.adapter.substr(0, w.adapter.find('/'));
    stored.segment = w.segment;
    v1::MetricWindow& m = stored.window;
    m.set_adapter_id(w.adapter.substr(w.adapter.find('/') + 1));
    m.set_experiment(f.experiment.name);
    m.set_arm(w.arm);
    m.set_period_index(w.period_index);
    *m.mutable_window_start_time() = common::TimeToProto(w.start);
    *m.mutable_window_duration() = common::DurationToProto(w.duration);
    m.set_valid(w.valid);
    m.set_invalid_reason(w.invalid_reason);
    m.set_rx_bytes(w.rx_bytes);
    m.set_tx_bytes(w.tx_bytes);
    m.set_rx_packets(w.rx_packets);
    m.set_rx_dropped(w.rx_dropped);
    m.mutable_rtt()->set_count(w.rtt_count);
    m.mutable_rtt()->set_mean_seconds(w.rtt_mean_seconds);
    m.mutable_rtt()->set_p99_seconds(w.rtt_p99_seconds);
    m.set_probes_sent(w.probes_sent);
    m.set_busiest_core_ratio(w.busiest_core_ratio);
    m.set_host_cpu_ratio(w.host_cpu_ratio);
    batch.push_back(std::move(stored));
    if (batch.size() == 10000) {
      (void)s->store->AddWindows(batch);
      batch.clear();
    }
  }
  (void)s->store->AddWindows(batch);
  s->metrics = std::make_unique<server::ServerMetrics>(std::make_shared<prometheus::Registry>());
  s->registry = std::make_unique<server::Registry>(server::RegistryOptions{},
                                                   std::vector<server::HostRecord>{});
  s->events =
      std::make_unique<server::EventLog>(server::EventLogOptions{}, std::vector<v1::Event>{}, 0);
  return s;
}

std::unique_ptr<server::ExperimentController> NewController(StoreFixture& s) {
  const Fixture& f = Switchback();
  server::ExperimentControllerOptions options;
  options.clock = [&f] { return kStart + f.experiment.duration - absl::Seconds(1); };
  return *server::ExperimentController::Create(
      options, server::ExperimentControllerDeps{
                   s.store.get(), s.registry.get(), s.events.get(), s.metrics.get(),
                   [] { return absl::OkStatus(); },
                   [](const v1::ApplyPolicyRequest&, std::string_view,
                      std::string_view) -> absl::StatusOr<v1::ApplyPolicyResponse> {
                     return absl::UnimplementedError("no policies in the benchmark");
                   }});
}

StoreFixture& Stored() {
  static StoreFixture* fixture = MakeStoreFixture();
  return *fixture;
}

// cold: a controller that has not read the windows yet (after a restart, or an ended
// experiment): load from SQLite, then the report. warm: a running experiment's windows are
// already in memory.
void BM_ServerReport(benchmark::State& state, bool cold) {
  StoreFixture& s = Stored();
  v1::GetExperimentReportRequest request;
  request.set_name("bench");
  std::unique_ptr<server::ExperimentController> controller = NewController(s);
  if (!cold) (void)controller->GetExperimentReport(request);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      controller = NewController(s);
      state.ResumeTiming();
    }
    absl::StatusOr<v1::ExperimentReport> report = controller->GetExperimentReport(request);
    if (!report.ok()) state.SkipWithError(std::string(report.status().message()).c_str());
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(state.iterations() * kAdapters * kWindowsPerAdapter);
}

}  // namespace
}  // namespace rxfleet::experiments

namespace rxfleet::experiments {
namespace {

BENCHMARK_CAPTURE(BM_Report, switchback_1000x1000, Switchback)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Report, parallel_1000x1000, Parallel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Guardrails)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReportText)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Assign);
BENCHMARK_CAPTURE(BM_ServerReport, cold_from_sqlite, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_ServerReport, warm, false)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rxfleet::experiments

BENCHMARK_MAIN();
