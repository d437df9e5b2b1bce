#include "agent/app/agent.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/collectors/cpu_stat.h"
#include "agent/collectors/icmp_prober.h"
#include "agent/collectors/netdev_stats.h"
#include "agent/collectors/sampler.h"
#include "agent/experiments/experiment_windows.h"
#include "agent/metrics/adapter_metrics.h"
#include "agent/metrics/metrics_server.h"
#include "agent/status/adapter_proto.h"
#include "agent/status/status_server.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "google/protobuf/timestamp.pb.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "rxfleet/version.h"
#include "systemd/sd-daemon.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const absl::Duration since_epoch = t - absl::UnixEpoch();
  const int64_t seconds = absl::ToInt64Seconds(since_epoch);
  out->set_seconds(seconds);
  out->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(since_epoch - absl::Seconds(seconds))));
}

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
  }
  return AdapterState::kError;
}

std::string PolicyNames(const std::vector<common::Policy>& policies) {
  std::vector<std::string> names;
  for (const common::Policy& p : policies) names.push_back(p.name);
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// systemd STATUS= text, e.g. "3 adapters: 2 applied, 1 asleep".
std::string ServiceStatus(const std::vector<AdapterSnapshot>& snapshots) {
  std::map<std::string_view, int> phases;
  int adapters = 0;
  for (const AdapterSnapshot& s : snapshots) {
    if (s.device_class != DeviceClass::kSupported || !s.present) continue;
    ++adapters;
    ++phases[AdapterPhaseName(s.phase)];
  }
  std::string text = absl::StrFormat("%d adapter%s", adapters, adapters == 1 ? "" : "s");
  std::vector<std::string> parts;
  for (const auto& [phase, count] : phases) {
    parts.push_back(absl::StrFormat("%d %s", count, phase));
  }
  if (!parts.empty()) absl::StrAppend(&text, ": ", absl::StrJoin(parts, ", "));
  return text;
}

std::string LabelsText(const std::map<std::string, std::string>& labels) {
  return labels.empty() ? "none" : absl::StrJoin(labels, ",", absl::PairFormatter("="));
}

}  // namespace

// Metrics, collectors and the Prometheus endpoint of standalone mode. Observes the manager so
// adapter series follow every change.
class Agent::Telemetry : public AdapterObserver {
 public:
  Telemetry(const AgentOptions& options, LogSink log,
            ExperimentWindowCollector::AdapterStates register_states,
            ExperimentWindowSink window_sink)
      : log_(std::move(log)),
        registry_(std::make_shared<prometheus::Registry>()),
        adapters_(*registry_),
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
        windows_dropped_(metric_windows_.Add({{"result", "dropped"}})) {
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

  ~Telemetry() override { Stop(); }

  // Starts sampling and probing, and the exporter if `address` is set. Returns the bound
  // address ("" if disabled or failed; a failure is logged, the agent keeps running).
  std::string Start(const std::string& address) {
    sampler_->Start();
    if (prober_) prober_->Start();
    if (address.empty()) return "";
    MetricsServerOptions server_options;
    server_options.address = address;
    auto server = MetricsServer::Start(server_options, registry_);
    if (!server.ok()) {
      log_(LogLevel::kError,
           absl::StrCat("metrics endpoint disabled: ", server.status().message()));
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

  void Stop() {
    server_.reset();
    if (prober_) prober_->Stop();
    sampler_->Stop();
  }

  void CountReload(bool ok) { (ok ? reload_success_ : reload_failure_).Increment(); }

  std::optional<absl::Time> NextExperimentEdge() const {
    return experiment_windows_->cutter().NextEdge();
  }

  void SetMetricWindowLength(absl::Duration length) {
    window_->SetLength(length);
    experiment_windows_->cutter().SetDefaultLength(length);
  }

  void CountMetricWindow(std::string_view result) {
    if (result == "sent") windows_sent_.Increment();
    if (result == "dropped") windows_dropped_.Increment();
  }

  // Closes the experiment windows at this instant: with new assignments (before they can
  // reach the registers) or without (an assignment's period ends now). Runs one sampler tick
  // on the calling thread (serialised with the sampler's own ticks).
  void CutExperimentWindows(
      std::optional<std::pair<uint64_t, std::vector<ExperimentAssignment>>> assignments) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (assignments.has_value()) {
      experiment_windows_->cutter().SetAssignments(assignments->first,
                                                   std::move(assignments->second), now);
    }
    sampler_->RunOnce(now);
  }

  std::map<std::string, AdapterWindow> LastWindows() const { return window_->LastWindows(); }
  uint64_t completed_windows() const { return window_->completed_windows(); }

  void OnAdapterChanged(const AdapterSnapshot& s, const AdapterEvents& events,
                        bool status_changed) override {
    if (status_changed) {
      AdapterLabels labels;
      labels.adapter_id = s.id;
      labels.chip = absl::AsciiStrToUpper(s.chip);
      labels.vid = absl::StrFormat("%04x", s.device.vid);
      labels.pid = absl::StrFormat("%04x", s.device.pid);
      labels.usb_speed = std::string(common::UsbSpeedName(s.device.speed));
      labels.port_path = s.device.port_path;
      labels.netdev = s.netdev;
      labels.driver = s.driver;
      labels.chip_source = s.chip_source;
      labels.bus = absl::StrCat(s.device.bus);
      labels.hub_chain =
          absl::StrJoin(s.topology.hubs, ">", [](std::string* out, const HubHop& hop) {
            absl::StrAppend(out, hop.port_path, ":",
                            common::ToAbslView(common::UsbSpeedName(hop.speed)));
          });
      labels.usb3_partner = s.topology.Usb3Partner() ? "true" : "false";
      adapters_.SetAdapter(labels);
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
    if (events.applied) adapters_.CountApply(s.id);
    if (events.verified) adapters_.CountVerify(s.id);
    if (events.drift_repaired) adapters_.CountDriftRepair(s.id);
    if (events.failure_reason) adapters_.CountFailure(s.id, *events.failure_reason);
  }

  void OnAdapterRemoved(const std::string& adapter_id) override {
    adapters_.RemoveAdapter(adapter_id);
    netdev_.RemoveAdapter(adapter_id);
    if (prober_) prober_->RemoveAdapter(adapter_id);
    diagnoses_.erase(adapter_id);
    experiments_.erase(adapter_id);
  }

 private:
  LogFn CollectorLog() {
    return [log = log_](std::string_view line) { log(LogLevel::kInfo, line); };
  }

  LogSink log_;
  std::shared_ptr<prometheus::Registry> registry_;
  AdapterMetrics adapters_;
  NetdevCollector netdev_;
  CpuCollector cpu_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reload_success_;
  prometheus::Counter& reload_failure_;
  std::unique_ptr<IcmpProber> prober_;
  prometheus::Family<prometheus::Counter>& metric_windows_;
  prometheus::Counter& windows_sent_;
  prometheus::Counter& windows_dropped_;
  std::unique_ptr<WindowTracker> window_;
  std::unique_ptr<ExperimentWindowCollector> experiment_windows_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<MetricsServer> server_;
  // Loop thread only (observer callbacks).
  std::map<std::string, std::set<std::string>> diagnoses_;
  std::map<std::string, std::map<std::string, std::string>> experiments_;
};

absl::Status ValidateHostId(const std::string& host_id) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (host_id.empty() || host_id.size() > 63) {
    return absl::InvalidArgumentError(
        absl::StrFormat("host id \"%s\" must be 1..63 characters", host_id));
  }
  for (char c : host_id) {
    if (!alnum(c) && c != '-' && c != '.') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "host id \"%s\" may only contain lower-case letters, digits, '-' and '.'", host_id));
    }
  }
  if (!alnum(host_id.front()) || !alnum(host_id.back())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("host id \"%s\" must start and end with a letter or digit", host_id));
  }
  return absl::OkStatus();
}

std::string DefaultHostId(const std::string& hostname) {
  std::string id;
  for (char c : hostname) {
    const char lower = absl::ascii_tolower(static_cast<unsigned char>(c));
    const bool ok = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') ||
                    lower == '-' || lower == '.';
    id.push_back(ok ? lower : '-');
  }
  if (id.size() > 63) id.resize(63);
  while (!id.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(id.back()))) id.pop_back();
  size_t begin = 0;
  while (begin < id.size() && !absl::ascii_isalnum(static_cast<unsigned char>(id[begin]))) ++begin;
  id = id.substr(begin);
  return id.empty() ? "localhost" : id;
}

Agent::Agent(AgentOptions options, std::unique_ptr<DeviceSource> source, LogSink log)
    : options_(std::move(options)),
      source_(std::move(source)),
      log_(std::move(log)),
      local_files_(options_.policy_paths),
      start_time_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentOptions options,
                                                     std::unique_ptr<DeviceSource> source,
                                                     LogSink log) {
  if (!log) log = [](LogLevel, std::string_view) {};
  if (options.reconcile_period <= absl::ZeroDuration() ||
      options.rescan_period <= absl::ZeroDuration() ||
      options.policy_poll_period <= absl::ZeroDuration() ||
      options.metric_window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("periods must be greater than zero");
  }
  const UnameInfo uname = ReadUname();
  if (options.host_id.empty()) options.host_id = DefaultHostId(uname.nodename);
  if (absl::Status s = ValidateHostId(options.host_id); !s.ok()) return s;
  for (const auto& [key, value] : options.labels) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) return s;
    if (absl::Status s = common::ValidateLabelValue(value); !s.ok()) return s;
  }

  std::unique_ptr<Agent> agent(new Agent(std::move(options), std::move(source), std::move(log)));
  agent->facts_ = ReadHostFacts(agent->options_.procfs_root, uname);
  agent->labels_ = DetectHostLabels(agent->options_.procfs_root, uname);
  for (const auto& [key, value] : agent->options_.labels) agent->labels_[key] = value;

  agent->local_fingerprint_ = agent->local_files_.Fingerprint();
  absl::StatusOr<std::vector<common::Policy>> policies = agent->local_files_.Load();
  if (!policies.ok()) return policies.status();
  {
    absl::MutexLock lock(&agent->mu_);
    agent->local_policies_ = *policies;
    agent->local_status_.set_path(absl::StrJoin(agent->options_.policy_paths, ","));
    agent->local_status_.set_loaded(true);
    agent->local_status_.set_policy_count(static_cast<uint32_t>(policies->size()));
    SetTime(absl::Now(), agent->local_status_.mutable_load_time());
    agent->link_status_.set_state(v1::SERVER_LINK_STATE_STANDALONE);
  }

  if (agent->source_ == nullptr) {
    absl::StatusOr<std::unique_ptr<DeviceSource>> created =
        CreateLibusbDeviceSource(agent->options_.sysfs_root);
    if (!created.ok()) return absl::InternalError(created.status().message());
    agent->source_ = std::move(*created);
  }

  AdapterManagerOptions manager_options;
  manager_options.reconcile_period = agent->options_.reconcile_period;
  manager_options.gone_retention = agent->options_.gone_retention;
  manager_options.settle = agent->options_.settle;
  manager_options.reenumeration_loop = {agent->options_.reenumeration_loop_count,
                                        agent->options_.reenumeration_loop_window};
  {
    std::vector<std::string> chip_errors;
    manager_options.chips = std::make_shared<const ChipCatalog>(
        ChipCatalog::Load(agent->options_.chips_dir, &chip_errors));
    for (const std::string& e : chip_errors) agent->log_(LogLevel::kWarning, e);
  }
  manager_options.log = agent->log_;
  agent->manager_ = std::make_unique<AdapterManager>(
      *agent->source_, UsbSysfs(agent->options_.sysfs_root), std::move(manager_options));
  agent->manager_->SetHostContext(agent->labels_, agent->options_.host_id);
  agent->manager_->SetWakeCallback([raw = agent.get()] { raw->Wake(); });
  if (agent->options_.mode == AgentMode::kStandalone) {
    Agent* raw = agent.get();
    agent->telemetry_ = std::make_unique<Telemetry>(
        agent->options_, agent->log_, [raw] { return raw->RegisterStates(); },
        [raw](ExperimentWindow window) { raw->DeliverMetricWindow(std::move(window)); });
    agent->manager_->AddObserver(agent->telemetry_.get());
  }
  agent->PublishPolicies();
  return agent;
}

Agent::~Agent() {
  if (source_) source_->Stop();
  telemetry_.reset();
}

void Agent::AddObserver(AdapterObserver* observer) {
  observers_.push_back(observer);
  manager_->AddObserver(observer);
}

void Agent::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
  wake_cv_.Signal();
}

void Agent::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  wake_ = true;
  wake_cv_.Signal();
}

void Agent::ReloadLocalPolicies() {
  absl::MutexLock lock(&mu_);
  reload_requested_ = true;
  wake_ = true;
  wake_cv_.Signal();
}

void Agent::PublishPolicies() {
  std::shared_ptr<const PolicySet> set;
  {
    absl::MutexLock lock(&mu_);
    set = std::make_shared<const PolicySet>(local_policies_, bundle_);
  }
  manager_->SetPolicies(std::move(set));
}

absl::Status Agent::SetServerBundle(uint64_t version, std::vector<common::Policy> policies,
                                    std::vector<ExperimentAssignment> assignments) {
  ServerBundle bundle;
  bundle.version = version;
  bundle.policies = std::move(policies);
  bundle.assignments = std::move(assignments);
  for (common::Policy& p : bundle.policies) {
    if (p.source.empty()) p.source = "server";
  }
  if (absl::Status s = ValidateServerBundle(bundle, manager_->Layouts()); !s.ok()) {
    log_(LogLevel::kError, absl::StrFormat("server bundle %d rejected, keeping bundle %d: %s",
                                           version, active_bundle_version(), s.message()));
    return s;
  }
  const size_t policy_count = bundle.policies.size();
  const size_t assignment_count = bundle.assignments.size();
  // Close the experiment windows of the previous bundle before its successor can change a
  // register, so no window mixes two arms.
  if (telemetry_) telemetry_->CutExperimentWindows(std::make_pair(version, bundle.assignments));
  {
    absl::MutexLock lock(&mu_);
    bundle_ = std::move(bundle);
  }
  PublishPolicies();
  log_(LogLevel::kInfo, absl::StrFormat("server bundle %d in effect: %d policies, %d assignments",
                                        version, policy_count, assignment_count));
  return absl::OkStatus();
}

uint64_t Agent::active_bundle_version() const {
  absl::MutexLock lock(&mu_);
  return bundle_ ? bundle_->version : 0;
}

std::vector<AdapterSnapshot> Agent::Snapshots() const { return manager_->Snapshots(); }

std::optional<AdapterSnapshot> Agent::Snapshot(const std::string& adapter_id) const {
  return manager_->Find(adapter_id);
}

std::map<std::string, AdapterWindow> Agent::LastMetricWindows() const {
  return telemetry_ ? telemetry_->LastWindows() : std::map<std::string, AdapterWindow>{};
}

uint64_t Agent::completed_metric_windows() const {
  return telemetry_ ? telemetry_->completed_windows() : 0;
}

void Agent::SetMetricWindowSink(ExperimentWindowSink sink) {
  absl::MutexLock lock(&mu_);
  window_sink_ = std::move(sink);
}

void Agent::SetMetricWindowLength(absl::Duration length) {
  if (telemetry_) telemetry_->SetMetricWindowLength(length);
}

void Agent::CountMetricWindow(std::string_view result) {
  if (telemetry_) telemetry_->CountMetricWindow(result);
}

void Agent::DeliverMetricWindow(ExperimentWindow window) {
  // Under the lock, so a sink being replaced (SetMetricWindowSink(nullptr)) is not called
  // afterwards. The sink only queues.
  absl::MutexLock lock(&mu_);
  if (window_sink_) window_sink_(std::move(window));
}

std::map<std::string, AdapterRegisterState> Agent::RegisterStates() const {
  std::map<std::string, AdapterRegisterState> states;
  for (const AdapterSnapshot& s : manager_->Snapshots()) {
    if (s.device_class != DeviceClass::kSupported) continue;
    AdapterRegisterState& state = states[s.id];
    state.present = s.present && s.phase != AdapterPhase::kGone;
    state.verified = s.phase == AdapterPhase::kApplied;
    if (s.observed_reg0 && s.layout)
      state.fields = common::DecodeRxAgg(*s.layout, *s.observed_reg0);
  }
  return states;
}

void Agent::SetServerLinkStatus(v1::ServerLinkStatus status) {
  absl::MutexLock lock(&mu_);
  link_status_ = std::move(status);
}

v1::GetStatusResponse Agent::Status(bool include_gone) const {
  v1::GetStatusResponse response;
  response.set_host_id(options_.host_id);
  for (const auto& [key, value] : labels_) (*response.mutable_labels())[key] = value;
  response.set_agent_version(kVersion);
  SetTime(start_time_, response.mutable_start_time());
  v1::HostInfo* info = response.mutable_host_info();
  info->set_hostname(facts_.hostname);
  info->set_kernel_release(facts_.kernel_release);
  info->set_arch(facts_.arch);
  info->set_os(facts_.os);
  info->set_cpu_model(facts_.cpu_model);
  info->set_cpu_count(facts_.cpu_count);
  info->set_board_model(facts_.board_model);
  info->set_memory_bytes(facts_.memory_bytes);
  info->set_boot_id(facts_.boot_id);
  {
    absl::MutexLock lock(&mu_);
    *response.mutable_server_link() = link_status_;
    if (bundle_) response.mutable_server_link()->set_active_bundle_version(bundle_->version);
    *response.mutable_local_policy_file() = local_status_;
    response.set_metrics_address(metrics_bound_);
  }
  const absl::Time now = absl::Now();
  for (const AdapterSnapshot& s : manager_->Snapshots()) {
    if (!include_gone && s.phase == AdapterPhase::kGone) continue;
    AdapterSnapshotToProto(s, options_.host_id, now, response.add_adapters());
  }
  return response;
}

void Agent::PollLocalPolicies(bool force) {
  const std::string fingerprint = local_files_.Fingerprint();
  if (!force && fingerprint == local_fingerprint_) return;
  local_fingerprint_ = fingerprint;
  absl::StatusOr<std::vector<common::Policy>> loaded = local_files_.Load();
  if (!loaded.ok()) {
    const std::string error(loaded.status().message());
    size_t kept = 0;
    {
      absl::MutexLock lock(&mu_);
      kept = local_policies_.size();
      local_status_.set_loaded(false);
      local_status_.set_error(error);
    }
    if (force || error != logged_policy_error_) {
      log_(LogLevel::kError,
           absl::StrFormat("local policies not reloaded, the previous %d stay in force: %s", kept,
                           error));
    }
    logged_policy_error_ = error;
    if (telemetry_) telemetry_->CountReload(false);
    return;
  }
  logged_policy_error_.clear();
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    changed = *loaded != local_policies_;
    local_policies_ = *loaded;
    local_status_.set_loaded(true);
    local_status_.clear_error();
    local_status_.set_policy_count(static_cast<uint32_t>(loaded->size()));
    SetTime(absl::Now(), local_status_.mutable_load_time());
  }
  if (telemetry_) telemetry_->CountReload(true);
  if (!changed) return;
  log_(LogLevel::kInfo,
       absl::StrFormat("local policies reloaded: %d (%s)", loaded->size(), PolicyNames(*loaded)));
  PublishPolicies();
}

absl::StatusOr<std::vector<AdapterSnapshot>> Agent::RunOnce() {
  if (absl::Status s = manager_->Rescan(); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot list USB devices: ", s.message()));
  }
  manager_->ProcessEvents();
  manager_->ReconcileAllNow();
  return manager_->Snapshots();
}

absl::Status Agent::Run() {
  if (telemetry_ == nullptr) {
    return absl::FailedPreconditionError("Run() needs an agent created in standalone mode");
  }
  {
    absl::MutexLock lock(&mu_);
    log_(LogLevel::kInfo,
         absl::StrFormat("rxfleet-agent %s standalone: host %s, labels %s, %d local policies "
                         "(%s), reconcile every %s",
                         kVersion, options_.host_id, LabelsText(labels_), local_policies_.size(),
                         PolicyNames(local_policies_),
                         absl::FormatDuration(options_.reconcile_period)));
  }

  const std::string bound = telemetry_->Start(options_.metrics_address);
  {
    absl::MutexLock lock(&mu_);
    metrics_bound_ = bound;
  }

  std::unique_ptr<StatusServer> status;
  if (!options_.status_socket.empty()) {
    auto started = StatusServer::Start(
        options_.status_socket,
        [this](const v1::GetStatusRequest& r) { return Status(r.include_gone()); });
    if (started.ok()) {
      status = std::move(*started);
      log_(LogLevel::kInfo, absl::StrCat("local status on unix:", options_.status_socket));
    } else {
      log_(LogLevel::kError,
           absl::StrCat("local status endpoint disabled: ", started.status().message()));
    }
  }

  bool hotplug = false;
  if (source_->SupportsHotplug()) {
    absl::Status started =
        source_->StartHotplug([this](HotplugEvent event, const UsbDeviceInfo& device) {
          manager_->PostHotplug(event, device);
        });
    if (started.ok()) {
      hotplug = true;
    } else {
      log_(LogLevel::kWarning,
           absl::StrCat("hotplug unavailable, rescanning every ",
                        absl::FormatDuration(options_.rescan_period), ": ", started.message()));
    }
  } else {
    log_(LogLevel::kInfo, absl::StrCat("hotplug not supported here, rescanning every ",
                                       absl::FormatDuration(options_.rescan_period)));
  }

  std::string rescan_error;
  auto rescan = [&] {
    absl::Status s = manager_->Rescan();
    if (!s.ok() && std::string(s.message()) != rescan_error) {
      log_(LogLevel::kError, absl::StrCat("cannot list USB devices: ", s.message()));
    }
    rescan_error = s.ok() ? "" : std::string(s.message());
  };
  rescan();
  absl::Time next_rescan = MonotonicNow() + options_.rescan_period;
  absl::Time next_poll = MonotonicNow() + options_.policy_poll_period;
  auto should_stop = [this] {
    absl::MutexLock lock(&mu_);
    return stop_;
  };

  // systemd (Type=notify, WatchdogSec=): READY once policies are loaded, the first scan is
  // done and the endpoints listen; WATCHDOG pings from this loop only, so a stuck loop stops
  // them. Without $NOTIFY_SOCKET these are no-ops.
  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  const absl::Duration watchdog_interval = absl::Microseconds(watchdog_usec) / 2;
  absl::Time next_watchdog = MonotonicNow();
  std::string service_status = ServiceStatus(manager_->Snapshots());
  sd_notify(0, absl::StrCat("READY=1\nSTATUS=", service_status).c_str());

  std::optional<absl::Time> expiry;  // wall clock: an experiment period ends
  std::optional<absl::Time> edge;    // wall clock: an experiment window ends
  while (true) {
    bool reload = false;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
      wake_ = false;
      reload = std::exchange(reload_requested_, false);
    }
    const absl::Time now = MonotonicNow();
    if (watchdog && now >= next_watchdog) {
      sd_notify(0, "WATCHDOG=1");
      next_watchdog = now + watchdog_interval;
    }
    if (reload) {
      log_(LogLevel::kInfo, "reloading local policies (SIGHUP)");
      sd_notify(0, "RELOADING=1");
      PollLocalPolicies(/*force=*/true);
      sd_notify(0, "READY=1");
      next_poll = now + options_.policy_poll_period;
    } else if (now >= next_poll) {
      PollLocalPolicies(/*force=*/false);
      next_poll = now + options_.policy_poll_period;
    }
    if (expiry && absl::Now() >= *expiry) {
      telemetry_->CutExperimentWindows(std::nullopt);  // the period's last window ends here
      manager_->RequeueAll();
    } else if (edge && absl::Now() >= *edge) {
      telemetry_->CutExperimentWindows(std::nullopt);  // close windows on their edge
    }
    manager_->ProcessEvents();
    if (manager_->TakeRescanRequest() || now >= next_rescan) {
      rescan();
      next_rescan = MonotonicNow() + options_.rescan_period;
      manager_->ProcessEvents();
    }
    absl::Time deadline = std::min({manager_->ReconcileDue(should_stop), next_rescan, next_poll});
    if (manager_->TakeRescanRequest()) {
      // A device vanished mid-pass: confirm with a rescan right away.
      rescan();
      next_rescan = MonotonicNow() + options_.rescan_period;
      deadline = MonotonicNow();
    }
    const absl::Time wall = absl::Now();
    expiry = manager_->policies()->NextExpiry(wall);
    if (expiry) deadline = std::min(deadline, MonotonicNow() + (*expiry - wall));
    edge = telemetry_->NextExperimentEdge();
    if (edge) deadline = std::min(deadline, MonotonicNow() + (*edge - wall));
    if (watchdog) deadline = std::min(deadline, next_watchdog);
    if (std::string status_text = ServiceStatus(manager_->Snapshots());
        status_text != service_status) {
      service_status = std::move(status_text);
      sd_notify(0, absl::StrCat("STATUS=", service_status).c_str());
    }

    absl::MutexLock lock(&mu_);
    while (!wake_ && !stop_) {
      const absl::Duration timeout = deadline - MonotonicNow();
      if (timeout <= absl::ZeroDuration()) break;
      if (wake_cv_.WaitWithTimeout(&mu_, timeout)) break;
    }
  }

  sd_notify(0, "STOPPING=1");
  log_(LogLevel::kInfo, "stopping");
  if (hotplug) source_->Stop();
  status.reset();  // shuts the endpoint down and removes the socket
  telemetry_->Stop();
  log_(LogLevel::kInfo, "stopped");
  return absl::OkStatus();
}

}  // namespace rxfleet::agent
