#include "agent/probes/probe_metrics.h"

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::agent {
namespace {

// Every state word rxfleet_probe_state carries.
constexpr ProbeFailure kFailures[] = {ProbeFailure::kUnreachable,   ProbeFailure::kBusy,
                                      ProbeFailure::kInterfaceDown, ProbeFailure::kTimeout,
                                      ProbeFailure::kRefused,       ProbeFailure::kError};

}  // namespace

ProbeMetrics::ProbeMetrics(prometheus::Registry& registry)
    : throughput_(prometheus::BuildGauge()
                      .Name("rxfleet_probe_throughput_bits_per_second")
                      .Help("Receiver-side throughput of the adapter's last successful active "
                            "probe (iperf3) of this direction and protocol, bit/s.")
                      .Register(registry)),
      retransmits_(prometheus::BuildGauge()
                       .Name("rxfleet_probe_retransmits")
                       .Help("TCP retransmits of the adapter's last successful TCP probe.")
                       .Register(registry)),
      udp_loss_(prometheus::BuildGauge()
                    .Name("rxfleet_probe_udp_loss_ratio")
                    .Help("Lost / sent datagrams of the adapter's last successful UDP probe, "
                          "0-1.")
                    .Register(registry)),
      udp_jitter_(prometheus::BuildGauge()
                      .Name("rxfleet_probe_udp_jitter_seconds")
                      .Help("Receiver-side jitter of the adapter's last successful UDP probe, "
                            "seconds.")
                      .Register(registry)),
      last_run_(prometheus::BuildGauge()
                    .Name("rxfleet_probe_last_run_timestamp_seconds")
                    .Help("Unix time the adapter's last probe ended, successful or not.")
                    .Register(registry)),
      runs_(prometheus::BuildCounter()
                .Name("rxfleet_probe_runs_total")
                .Help("Probes run to a final result (after retries), by result (ok, failed).")
                .Register(registry)),
      failures_(prometheus::BuildCounter()
                    .Name("rxfleet_probe_failures_total")
                    .Help("Failed probes by reason (unreachable, busy, interface_down, timeout, "
                          "refused, error).")
                    .Register(registry)),
      state_(prometheus::BuildGauge()
                 .Name("rxfleet_probe_state")
                 .Help("Outcome of the adapter's last probe: 1 for the current state (ok or a "
                       "failure reason), 0 for the others.")
                 .Register(registry)) {}

void ProbeMetrics::SetState(const std::string& adapter_id, const std::string& state) {
  std::map<std::string, prometheus::Gauge*>& states = states_[adapter_id];
  if (states.empty()) {
    states["ok"] = &state_.Add({{"adapter", adapter_id}, {"state", "ok"}});
    for (ProbeFailure failure : kFailures) {
      const std::string word(ProbeFailureName(failure));
      states[word] = &state_.Add({{"adapter", adapter_id}, {"state", word}});
    }
  }
  for (auto& [word, gauge] : states) gauge->Set(word == state ? 1 : 0);
}

void ProbeMetrics::Record(const std::string& adapter_id, const ProbeResult& result) {
  absl::MutexLock lock(&mu_);
  auto gauge = [&](prometheus::Family<prometheus::Gauge>& family, const std::string& key,
                   const prometheus::Labels& labels) -> prometheus::Gauge& {
    prometheus::Gauge*& slot = gauges_[adapter_id][key];
    if (slot == nullptr) slot = &family.Add(labels);
    return *slot;
  };
  auto counter = [&](prometheus::Family<prometheus::Counter>& family, const std::string& key,
                     const prometheus::Labels& labels) -> prometheus::Counter& {
    prometheus::Counter*& slot = counters_[adapter_id][key];
    if (slot == nullptr) slot = &family.Add(labels);
    return *slot;
  };
  const std::string end_key = "last_run";
  gauge(last_run_, end_key, {{"adapter", adapter_id}})
      .Set(absl::ToDoubleSeconds(result.start_time + result.duration - absl::UnixEpoch()));
  if (result.ok) {
    const std::string direction(common::ProbeDirectionName(result.spec.direction));
    const std::string protocol(common::ProbeProtocolName(result.spec.protocol));
    gauge(throughput_, "throughput/" + direction + "/" + protocol,
          {{"adapter", adapter_id}, {"direction", direction}, {"protocol", protocol}})
        .Set(result.throughput_bps);
    if (result.spec.protocol == common::ProbeProtocol::kTcp) {
      gauge(retransmits_, "retransmits", {{"adapter", adapter_id}})
          .Set(static_cast<double>(result.retransmits));
    } else {
      gauge(udp_loss_, "udp_loss", {{"adapter", adapter_id}}).Set(result.udp_loss_ratio);
      gauge(udp_jitter_, "udp_jitter", {{"adapter", adapter_id}}).Set(result.udp_jitter_seconds);
    }
    counter(runs_, "runs/ok", {{"adapter", adapter_id}, {"result", "ok"}}).Increment();
    SetState(adapter_id, "ok");
    return;
  }
  const std::string reason(ProbeFailureName(result.failure));
  counter(runs_, "runs/failed", {{"adapter", adapter_id}, {"result", "failed"}}).Increment();
  counter(failures_, "failures/" + reason, {{"adapter", adapter_id}, {"reason", reason}})
      .Increment();
  SetState(adapter_id, reason);
}

void ProbeMetrics::Remove(const std::string& adapter_id) {
  absl::MutexLock lock(&mu_);
  // prometheus-cpp removes a series through its family; a family without the pointer ignores it.
  auto drop_gauge = [&](prometheus::Gauge* gauge) {
    for (auto* family :
         {&throughput_, &retransmits_, &udp_loss_, &udp_jitter_, &last_run_, &state_}) {
      family->Remove(gauge);
    }
  };
  for (auto* all : {&gauges_, &states_}) {
    auto it = all->find(adapter_id);
    if (it == all->end()) continue;
    for (auto& [key, gauge] : it->second) drop_gauge(gauge);
    all->erase(it);
  }
  if (auto it = counters_.find(adapter_id); it != counters_.end()) {
    for (auto& [key, counter] : it->second) {
      runs_.Remove(counter);
      failures_.Remove(counter);
    }
    counters_.erase(it);
  }
}

}  // namespace rxfleet::agent
