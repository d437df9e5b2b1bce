#include "agent/telemetry/agent_telemetry.h"

#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {

AdapterState MetricsState(AdapterPhase phase) {
  switch (phase) {
    case AdapterPhase::kApplied:
      return AdapterState::kApplied;
    case AdapterPhase::kPending:
    case AdapterPhase::kDrifted:
      return AdapterState::kPending;
    case AdapterPhase::kAsleep:
      return AdapterState::kAsleep;
    case AdapterPhase::kDisabledByDriver:
      return AdapterState::kDisabledByDriver;
    case AdapterPhase::kUnsupported:
      return AdapterState::kUnsupported;
    case AdapterPhase::kStorageMode:
      return AdapterState::kStorageMode;
    case AdapterPhase::kOtherVendor:
      return AdapterState::kOtherVendor;
    case AdapterPhase::kGone:
      return AdapterState::kGone;
    case AdapterPhase::kError:
    case AdapterPhase::kInvalidSettings:
      return AdapterState::kError;
    case AdapterPhase::kObserved:
      return AdapterState::kObserved;
  }
  return AdapterState::kError;
}

AgentTelemetry::AgentTelemetry(const TelemetryOptions& options, LogSink log,
                               ExperimentWindowCollector::AdapterStates register_states,
                               ExperimentWindowSink window_sink)
    : log_(std::move(log)),
      registry_(std::make_shared<prometheus::Registry>()),
      adapters_(*registry_),
      probe_metrics_(*registry_),
      netdev_(*registry_, NetdevCollectorOptions{options.sysfs_root, CollectorLog()}),
      cpu_(*registry_, CpuCollectorOptions{options.procfs_root, {}, {}, CollectorLog()}),
      reloads_(prometheus::BuildCounter()
                   .Name("rxfleet_agent_policy_reloads_total")
                   .Help("Local policy file loads after start-up, by result (success, failure)")
                   .Register(*registry_)),
      reload_success_(reloads_.Add({{"result", "success"}})),
      reload_failure_(reloads_.Add({{"result", "failure"}})),
      metric_windows_(prometheus::BuildCounter()
                          .Name("rxfleet_agent_metric_windows_total")
                          .Help("Experiment metric windows by result: sent (the server stream "
                                "accepted it), dropped (pushed out of the full queue)")
                          .Register(*registry_)),
      windows_sent_(metric_windows_.Add({{"result", "sent"}})),
      windows_dropped_(metric_windows_.Add({{"result", "dropped"}})),
      bundle_persist_failures_(prometheus::BuildCounter()
                                   .Name("rxfleet_agent_bundle_persist_failures_total")
                                   .Help("Server bundles applied but not saved in the state "
                                         "directory (ACKed with persist_error)")
                                   .Register(*registry_)
                                   .Add({})) {
  if (!options.probe_target.empty()) {
    IcmpProberOptions probe;
    probe.procfs_root = options.procfs_root;
    probe.target = options.probe_target == "gateway" ? "" : options.probe_target;
    probe.log = CollectorLog();
    auto prober = IcmpProber::Create(*registry_, probe);
    if (prober.ok()) {
      prober_ = std::move(*prober);
    } else {
      log_(LogLevel::kError, absl::StrCat("RTT probes disabled: ", prober.status().message()));
    }
  }
  window_ = std::make_unique<WindowTracker>(&netdev_, &cpu_, prober_.get(),
                                            WindowOptions{options.metric_window});
  ExperimentWindowOptions experiment_options;
  experiment_options.default_length = options.metric_window;
  experiment_windows_ = std::make_unique<ExperimentWindowCollector>(
      &netdev_, &cpu_, prober_.get(), std::move(register_states), std::move(window_sink),
      experiment_options);
  sampler_ = std::make_unique<Sampler>(
      *registry_,
      std::vector<Collector*>{&netdev_, &cpu_, window_.get(), experiment_windows_.get()},
      SamplerOptions{absl::Seconds(1), CollectorLog()});
}

AgentTelemetry::~AgentTelemetry() { Stop(); }

std::string AgentTelemetry::Start(const std::string& address) {
  sampler_->Start();
  if (prober_) prober_->Start();
  if (address.empty()) return "";
  MetricsServerOptions server_options;
  server_options.address = address;
  auto server = MetricsServer::Start(server_options, registry_);
  if (!server.ok()) {
    log_(LogLevel::kError, absl::StrCat("metrics endpoint disabled: ", server.status().message()));
    return "";
  }
  server_ = std::move(*server);
  const std::string& host = server_->host();
  const std::string bound = host.find(':') != std::string::npos
                                ? absl::StrFormat("[%s]:%d", host, server_->port())
                                : absl::StrFormat("%s:%d", host, server_->port());
  log_(LogLevel::kInfo, absl::StrCat("metrics endpoint on http://", bound, "/metrics"));
  return bound;
}

void AgentTelemetry::Stop() {
  server_.reset();
  if (prober_) prober_->Stop();
  sampler_->Stop();
}

void AgentTelemetry::CountReload(bool ok) { (ok ? reload_success_ : reload_failure_).Increment(); }

void AgentTelemetry::CountMetricWindow(std::string_view result) {
  if (result == "sent") windows_sent_.Increment();
  if (result == "dropped") windows_dropped_.Increment();
}

std::optional<absl::Time> AgentTelemetry::NextExperimentEdge() const {
  return experiment_windows_->cutter().NextEdge();
}

void AgentTelemetry::SetMetricWindowLength(absl::Duration length) {
  window_->SetLength(length);
  experiment_windows_->cutter().SetDefaultLength(length);
}

void AgentTelemetry::CutExperimentWindows(
    std::optional<std::pair<uint64_t, std::vector<ExperimentAssignment>>> assignments) {
  const SteadyTime now = std::chrono::steady_clock::now();
  if (assignments.has_value()) {
    experiment_windows_->cutter().SetAssignments(assignments->first, std::move(assignments->second),
                                                 now);
  }
  sampler_->RunOnce(now);
}

std::map<std::string, AdapterWindow> AgentTelemetry::LastWindows() const {
  return window_->LastWindows();
}

uint64_t AgentTelemetry::completed_windows() const { return window_->completed_windows(); }

void AgentTelemetry::UpdateAdapterSeries(const AdapterSnapshot& s, const AdapterEvents& events) {
  AdapterLabels labels;
  labels.adapter_id = s.id;
  labels.chip = absl::AsciiStrToUpper(s.chip);
  labels.vid = absl::StrFormat("%04x", s.device.vid);
  labels.pid = absl::StrFormat("%04x", s.device.pid);
  labels.usb_speed = std::string(common::UsbSpeedName(s.device.speed));
  labels.port_path = s.device.port_path;
  labels.netdev = s.netdev;
  labels.driver = s.driver;
  labels.family = s.family;
  labels.managed = s.family == "rtw89" ? "true" : "false";
  labels.chip_source = s.chip_source;
  labels.bus = absl::StrCat(s.device.bus);
  labels.hub_chain = absl::StrJoin(s.topology.hubs, ">", [](std::string* out, const HubHop& hop) {
    absl::StrAppend(out, hop.port_path, ":", common::ToAbslView(common::UsbSpeedName(hop.speed)));
  });
  labels.usb3_partner = s.topology.Usb3Partner() ? "true" : "false";
  adapters_.SetAdapter(labels);
  CountEvents(s.id, events);
  std::map<std::string, uint32_t> fields;
  for (const common::FieldValue& f : s.observed_fields) fields[f.name] = f.value;
  adapters_.SetObservedFields(s.id, fields);
  adapters_.SetState(s.id, MetricsState(s.phase));
  std::optional<double> desired;
  if (s.desired && s.desired->resolved.hold_us) {
    desired = s.desired->resolved.hold_us->value * 1e-6;
  }
  adapters_.SetDesiredHold(s.id, desired);
  std::optional<double> observed;
  if (s.observed_reg0 && s.layout) {
    observed = common::DecodeRxAgg(*s.layout, *s.observed_reg0).hold_us * 1e-6;
  }
  adapters_.SetObservedHold(s.id, observed);

  std::set<std::string>& active = diagnoses_[s.id];
  std::set<std::string> now;
  for (const Diagnosis& d : s.diagnoses) now.insert(d.code);
  for (const std::string& code : active) {
    if (!now.contains(code)) adapters_.SetDiagnosis(s.id, code, false);
  }
  for (const std::string& code : now) adapters_.SetDiagnosis(s.id, code, true);
  active = now;

  std::map<std::string, std::string>& enrolled = experiments_[s.id];
  std::map<std::string, std::string> current;
  if (s.desired) current = s.desired->experiments;
  for (const auto& [experiment, arm] : enrolled) {
    if (!current.contains(experiment)) adapters_.SetExperimentArm(s.id, experiment, "");
  }
  for (const auto& [experiment, arm] : current) {
    adapters_.SetExperimentArm(s.id, experiment, arm);
  }
  enrolled = current;

  const bool tracked = s.present && !s.netdev.empty();
  netdev_.UpsertAdapter(
      NetdevSource{s.id, tracked ? s.netdev : "", tracked ? s.statistics_dir : ""});
  if (prober_) prober_->UpsertAdapter(ProbeAdapter{s.id, tracked ? s.netdev : "", ""});
}

void AgentTelemetry::OnAdapterChanged(const AdapterSnapshot& s, const AdapterEvents& events,
                                      bool status_changed) {
  if (status_changed) {
    UpdateAdapterSeries(s, events);
  } else {
    CountEvents(s.id, events);
  }
}

void AgentTelemetry::CountEvents(const std::string& adapter_id, const AdapterEvents& events) {
  if (events.applied) adapters_.CountApply(adapter_id);
  if (events.verified) adapters_.CountVerify(adapter_id);
  if (events.drift_repaired) adapters_.CountDriftRepair(adapter_id);
  if (events.failure_reason) adapters_.CountFailure(adapter_id, *events.failure_reason);
  if (events.io_burst_ended) adapters_.CountIoErrorBurst(adapter_id, events.io_burst_ended->reason);
  if (events.reenumeration_loop) adapters_.CountReenumerationLoop(adapter_id);
}

void AgentTelemetry::OnAdapterRemoved(const std::string& adapter_id) {
  adapters_.RemoveAdapter(adapter_id);
  probe_metrics_.Remove(adapter_id);
  netdev_.RemoveAdapter(adapter_id);
  if (prober_) prober_->RemoveAdapter(adapter_id);
  diagnoses_.erase(adapter_id);
  experiments_.erase(adapter_id);
}

LogFn AgentTelemetry::CollectorLog() {
  return [log = log_](std::string_view line) { log(LogLevel::kInfo, line); };
}

}  // namespace rxfleet::agent
