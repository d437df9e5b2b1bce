#include "agent/app/agent.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/experiments/experiment_windows.h"
#include "agent/status/adapter_proto.h"
#include "agent/status/status_server.h"
#include "agent/telemetry/agent_telemetry.h"
#include "common/host_labels.h"
#include "common/proto/time.h"
#include "common/service_notifier.h"
#include "common/validation.h"
#include "rxfleet/version.h"

namespace rxfleet::agent {
namespace {

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
  if (absl::Status s = common::ValidateHostId(options.host_id); !s.ok()) return s;
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
    *agent->local_status_.mutable_load_time() = common::TimeToProto(absl::Now());
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
  if (agent->options_.mode == AgentMode::kRun) {
    Agent* raw = agent.get();
    TelemetryOptions telemetry;
    telemetry.sysfs_root = agent->options_.sysfs_root;
    telemetry.procfs_root = agent->options_.procfs_root;
    telemetry.probe_target = agent->options_.probe_target;
    telemetry.metric_window = agent->options_.metric_window;
    agent->telemetry_ = std::make_unique<AgentTelemetry>(
        telemetry, agent->log_, [raw] { return raw->RegisterStates(); },
        [raw](ExperimentWindow window) { raw->DeliverMetricWindow(std::move(window)); });
    agent->manager_->AddObserver(agent->telemetry_.get());
    agent->CreateProbeScheduler();
  }
  agent->PublishPolicies();
  return agent;
}

Agent::~Agent() {
  if (source_) source_->Stop();
  probes_.reset();  // before the telemetry its results go to
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

absl::Status Agent::SetServerBundle(ServerBundle bundle) {
  const uint64_t version = bundle.version;
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
  if (probes_) probes_->SetAssignments(bundle.assignments, absl::Now());
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
  if (probes_) probes_->SetDefaultWindowLength(length);
}

void Agent::CountMetricWindow(std::string_view result) {
  if (telemetry_) telemetry_->CountMetricWindow(result);
}

void Agent::CountBundlePersistFailure() {
  if (telemetry_) telemetry_->CountBundlePersistFailure();
}

void Agent::DeliverMetricWindow(ExperimentWindow window) {
  // The window's experiment probe, if one ran in it.
  if (probes_) {
    window.probe = probes_->TakeWindowResult(window.window.adapter_id, window.experiment,
                                             window.window.start_time);
  }
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
    if (s.observed_reg0 && s.layout) {
      state.fields = common::DecodeRxAgg(*s.layout, *s.observed_reg0);
    }
  }
  return states;
}

std::string Agent::metrics_bound_address() const {
  absl::MutexLock lock(&mu_);
  return metrics_bound_;
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
  *response.mutable_start_time() = common::TimeToProto(start_time_);
  HostFactsToProto(facts_, response.mutable_host_info());
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
    *local_status_.mutable_load_time() = common::TimeToProto(absl::Now());
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
    return absl::FailedPreconditionError("Run() needs an agent not created in once mode");
  }
  {
    absl::MutexLock lock(&mu_);
    log_(LogLevel::kInfo,
         absl::StrFormat("rxfleet-agent %s running: host %s, labels %s, %d local policies "
                         "(%s), reconcile every %s",
                         kVersion, options_.host_id, LabelsText(labels_), local_policies_.size(),
                         PolicyNames(local_policies_),
                         absl::FormatDuration(options_.reconcile_period)));
  }

  const std::string bound = telemetry_->Start(options_.metrics_address);
  probes_->Start();
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
  common::ServiceNotifier notifier(MonotonicNow());
  notifier.Ready(ServiceStatus(manager_->Snapshots()));

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
    notifier.PingIfDue(now);
    if (reload) {
      log_(LogLevel::kInfo, "reloading local policies (SIGHUP)");
      notifier.Reloading();
      PollLocalPolicies(/*force=*/true);
      notifier.ReloadDone();
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
    deadline = std::min(deadline, notifier.NextPing());
    notifier.SetStatus(ServiceStatus(manager_->Snapshots()));
    UpdatePolicyProbes();

    absl::MutexLock lock(&mu_);
    while (!wake_ && !stop_) {
      const absl::Duration timeout = deadline - MonotonicNow();
      if (timeout <= absl::ZeroDuration()) break;
      if (wake_cv_.WaitWithTimeout(&mu_, timeout)) break;
    }
  }

  notifier.Stopping();
  log_(LogLevel::kInfo, "stopping");
  if (hotplug) source_->Stop();
  status.reset();   // shuts the endpoint down and removes the socket
  probes_->Stop();  // after the attempt in progress (at most its duration + 10 s)
  telemetry_->Stop();
  log_(LogLevel::kInfo, "stopped");
  return absl::OkStatus();
}

}  // namespace rxfleet::agent
