// The agent's active throughput probes (docs/AGENT.md, "Probes"): the scheduler the agent
// owns, and what it is fed from each adapter's policy probe and the experiment assignments.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "agent/app/agent.h"
#include "agent/probes/iperf_probe.h"
#include "agent/telemetry/agent_telemetry.h"

namespace rxfleet::agent {

void Agent::CreateProbeScheduler() {
  ProbeSchedulerOptions probes;
  probes.host_id = options_.host_id;
  probes.netdev_of = [this](const std::string& adapter_id) {
    std::optional<AdapterSnapshot> s = manager_->Find(adapter_id);
    return s.has_value() && s->present ? s->netdev : std::string();
  };
  probes.on_result = [this](const std::string& adapter_id, ProbeOrigin, const ProbeResult& result) {
    telemetry_->RecordProbe(adapter_id, result);
  };
  probes.default_window_length = options_.metric_window;
  probes.log = log_;
  probe_runner_ = std::make_unique<IperfProbeRunner>();
  probes_ = std::make_unique<ProbeScheduler>(probe_runner_.get(), std::move(probes));
}

void Agent::UpdatePolicyProbes() {
  if (!probes_) return;
  std::map<std::string, PolicyProbe> wanted;
  const std::shared_ptr<const PolicySet> policies = manager_->policies();
  // An adapter under an experiment that probes runs the experiment's probes only: a policy
  // probe inside its windows would disturb them and could meet them at the iperf3 server.
  std::set<std::string> experiment_probed;
  if (policies->server().has_value()) {
    const absl::Time now = absl::Now();
    for (const ExperimentAssignment& a : policies->server()->assignments) {
      if (a.probe.has_value() && (!a.period_end.has_value() || *a.period_end > now)) {
        experiment_probed.insert(a.adapter_id);
      }
    }
  }
  std::set<std::string> probing = experiment_probed;
  for (const AdapterSnapshot& s : manager_->Snapshots()) {
    if (!s.present || !s.probe.has_value()) continue;
    probing.insert(s.id);
    if (experiment_probed.count(s.id) > 0) continue;
    PolicyProbe& probe = wanted[s.id];
    probe.policy = s.probe->provenance.name;
    probe.spec = s.probe->value;
    probe.slot_offset = policies->ProbeSlot(s.id, probe.policy);
  }
  // An adapter that stopped probing loses its series: a last `unreachable` state must not
  // keep an alert firing for a probe nobody runs any more.
  for (const std::string& id : probing_) {
    if (probing.count(id) == 0) telemetry_->RemoveProbeSeries(id);
  }
  probing_ = std::move(probing);
  if (wanted == policy_probes_) return;
  policy_probes_ = wanted;
  probes_->SetPolicyProbes(std::move(wanted), absl::Now());
}

}  // namespace rxfleet::agent
