#include "agent/metrics/adapter_metrics.h"

#include <algorithm>
#include <string>

#include "agent/collectors/collector.h"

namespace rxfleet::agent {
namespace {

using Labels = std::map<std::string, std::string>;

bool ValidCode(std::string_view code) {
  if (code.empty() || code.size() > 64) return false;
  return std::all_of(code.begin(), code.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

Labels InfoLabels(const AdapterLabels& l) {
  return {{"adapter", l.adapter_id},
          {"chip", l.chip},
          {"vid", l.vid},
          {"pid", l.pid},
          {"usb_speed", l.usb_speed},
          {"port_path", l.port_path},
          {"netdev", l.netdev},
          {"driver", l.driver},
          {"family", l.family},
          {"managed", l.managed},
          {"chip_source", l.chip_source},
          {"bus", l.bus},
          {"hub_chain", l.hub_chain},
          {"usb3_partner", l.usb3_partner}};
}

}  // namespace

std::string_view AdapterStateName(AdapterState state) {
  switch (state) {
    case AdapterState::kApplied:
      return "applied";
    case AdapterState::kPending:
      return "pending";
    case AdapterState::kAsleep:
      return "asleep";
    case AdapterState::kDisabledByDriver:
      return "disabled_by_driver";
    case AdapterState::kUnsupported:
      return "unsupported";
    case AdapterState::kStorageMode:
      return "storage_mode";
    case AdapterState::kOtherVendor:
      return "ignored_other_vendor";
    case AdapterState::kGone:
      return "gone";
    case AdapterState::kError:
      return "error";
    case AdapterState::kObserved:
      return "observed";
  }
  return "error";
}

std::optional<AdapterState> ParseAdapterState(std::string_view name) {
  for (AdapterState s : kAllAdapterStates) {
    if (AdapterStateName(s) == name) return s;
  }
  return std::nullopt;
}

AdapterMetrics::AdapterMetrics(prometheus::Registry& registry)
    : info_(prometheus::BuildGauge()
                .Name("rxfleet_adapter_info")
                .Help("Adapter identity: chip, USB IDs, negotiated USB speed, port path, netdev "
                      "and driver as labels, where the chip identification came from, and the "
                      "USB topology (bus, hub chain with speeds, USB 3 partner) (value is "
                      "always 1).")
                .Register(registry)),
      state_(prometheus::BuildGauge()
                 .Name("rxfleet_adapter_state")
                 .Help("Adapter state as seen by the reconcile loop: 1 for the current state, 0 "
                       "for the others.")
                 .Register(registry)),
      desired_(prometheus::BuildGauge()
                   .Name("rxfleet_adapter_hold_desired_seconds")
                   .Help("RX aggregation hold the policy wants for the adapter, in seconds.")
                   .Register(registry)),
      observed_(prometheus::BuildGauge()
                    .Name("rxfleet_adapter_hold_observed_seconds")
                    .Help("RX aggregation hold read back from the adapter's register, in "
                          "seconds.")
                    .Register(registry)),
      applies_(prometheus::BuildCounter()
                   .Name("rxfleet_adapter_applies_total")
                   .Help("Writes of the RX aggregation settings to the adapter.")
                   .Register(registry)),
      verifies_(prometheus::BuildCounter()
                    .Name("rxfleet_adapter_verifies_total")
                    .Help("Read-back verifications of the adapter's RX aggregation settings.")
                    .Register(registry)),
      drift_repairs_(prometheus::BuildCounter()
                         .Name("rxfleet_adapter_drift_repairs_total")
                         .Help("Re-applies after the adapter's settings drifted from the desired "
                               "ones (driver reset, firmware reload).")
                         .Register(registry)),
      failures_(prometheus::BuildCounter()
                    .Name("rxfleet_adapter_failures_total")
                    .Help("Failed reconcile operations on the adapter, by reason.")
                    .Register(registry)),
      io_error_bursts_(prometheus::BuildCounter()
                           .Name("rxfleet_adapter_io_error_bursts_total")
                           .Help("Bursts of consecutive failed transfers on the adapter that "
                                 "ended with a successful pass, by the reason of the first "
                                 "failure (one event each, never drift).")
                           .Register(registry)),
      reenumeration_loops_(prometheus::BuildCounter()
                               .Name("rxfleet_adapter_reenumeration_loops_total")
                               .Help("Quarantines of the adapter for re-enumerating too often "
                                     "on its connector (no writes while quarantined).")
                               .Register(registry)),
      diagnosis_(prometheus::BuildGauge()
                     .Name("rxfleet_adapter_diagnosis")
                     .Help("Active diagnoses of the adapter (value 1 while active; the series "
                           "is deleted when the diagnosis clears).")
                     .Register(registry)),
      experiment_(prometheus::BuildGauge()
                      .Name("rxfleet_adapter_experiment_info")
                      .Help("Experiment arm the adapter is enrolled in (value is always 1).")
                      .Register(registry)),
      rx_agg_field_(prometheus::BuildGauge()
                        .Name("rxfleet_adapter_rx_agg_field")
                        .Help("Observe-only chip families (rtw88, mt76): raw value of an RX "
                              "aggregation register field as last read and judged plausible.")
                        .Register(registry)) {}

AdapterMetrics::Adapter* AdapterMetrics::Find(std::string_view adapter_id) {
  auto it = adapters_.find(adapter_id);
  return it == adapters_.end() ? nullptr : &it->second;
}

void AdapterMetrics::SetAdapter(const AdapterLabels& labels) {
  if (labels.adapter_id.empty()) return;
  absl::MutexLock lock(&mu_);
  Adapter* a = Find(labels.adapter_id);
  if (a == nullptr) {
    Adapter fresh;
    fresh.labels = labels;
    const Labels id = {{"adapter", labels.adapter_id}};
    fresh.info = &info_.Add(InfoLabels(labels));
    fresh.info->Set(1);
    for (AdapterState s : kAllAdapterStates) {
      prometheus::Gauge& g =
          state_.Add({{"adapter", labels.adapter_id}, {"state", std::string(AdapterStateName(s))}});
      g.Set(s == AdapterState::kPending ? 1 : 0);
      fresh.states[s] = &g;
    }
    fresh.applies = &applies_.Add(id);
    fresh.verifies = &verifies_.Add(id);
    fresh.drift_repairs = &drift_repairs_.Add(id);
    fresh.reenumeration_loops = &reenumeration_loops_.Add(id);
    adapters_.emplace(labels.adapter_id, std::move(fresh));
    return;
  }
  if (a->labels == labels) return;
  info_.Remove(a->info);
  a->info = &info_.Add(InfoLabels(labels));
  a->info->Set(1);
  a->labels = labels;
}

void AdapterMetrics::RemoveAdapter(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  auto it = adapters_.find(adapter_id);
  if (it == adapters_.end()) return;
  Adapter& a = it->second;
  info_.Remove(a.info);
  for (auto& [s, g] : a.states) state_.Remove(g);
  if (a.desired != nullptr) desired_.Remove(a.desired);
  if (a.observed != nullptr) observed_.Remove(a.observed);
  applies_.Remove(a.applies);
  verifies_.Remove(a.verifies);
  drift_repairs_.Remove(a.drift_repairs);
  for (auto& [reason, c] : a.failures) failures_.Remove(c);
  for (auto& [reason, c] : a.io_error_bursts) io_error_bursts_.Remove(c);
  reenumeration_loops_.Remove(a.reenumeration_loops);
  for (auto& [code, g] : a.diagnoses) diagnosis_.Remove(g);
  for (auto& [experiment, arm] : a.experiments) experiment_.Remove(arm.second);
  for (auto& [field, g] : a.fields) rx_agg_field_.Remove(g);
  adapters_.erase(it);
}

void AdapterMetrics::SetObservedFields(std::string_view adapter_id,
                                       const std::map<std::string, uint32_t>& fields) {
  absl::MutexLock lock(&mu_);
  Adapter* a = Find(adapter_id);
  if (a == nullptr) return;
  for (auto it = a->fields.begin(); it != a->fields.end();) {
    if (fields.contains(it->first)) {
      ++it;
      continue;
    }
    rx_agg_field_.Remove(it->second);
    it = a->fields.erase(it);
  }
  for (const auto& [name, value] : fields) {
    auto it = a->fields.find(name);
    if (it == a->fields.end()) {
      if (!ValidCode(name) || a->fields.size() >= kMaxFieldsPerAdapter) continue;
      it = a->fields
               .emplace(name,
                        &rx_agg_field_.Add({{"adapter", a->labels.adapter_id}, {"field", name}}))
               .first;
    }
    it->second->Set(static_cast<double>(value));
  }
}

void AdapterMetrics::SetHoldLocked(prometheus::Family<prometheus::Gauge>& family,
                                   prometheus::Gauge*& gauge, const std::string& adapter_id,
                                   std::optional<double> seconds) {
  if (!seconds.has_value()) {
    if (gauge != nullptr) family.Remove(gauge);
    gauge = nullptr;
    return;
  }
  if (gauge == nullptr) gauge = &family.Add({{"adapter", adapter_id}});
  gauge->Set(*seconds);
}

void AdapterMetrics::SetDesiredHold(std::string_view adapter_id, std::optional<double> seconds) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) {
    SetHoldLocked(desired_, a->desired, a->labels.adapter_id, seconds);
  }
}

void AdapterMetrics::SetObservedHold(std::string_view adapter_id, std::optional<double> seconds) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) {
    SetHoldLocked(observed_, a->observed, a->labels.adapter_id, seconds);
  }
}

void AdapterMetrics::SetStateLocked(Adapter& a, AdapterState state) {
  if (a.state == state) return;
  a.states[a.state]->Set(0);
  a.states[state]->Set(1);
  a.state = state;
}

void AdapterMetrics::SetState(std::string_view adapter_id, AdapterState state) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) SetStateLocked(*a, state);
}

void AdapterMetrics::SetState(std::string_view adapter_id, std::string_view state) {
  const std::optional<AdapterState> parsed = ParseAdapterState(state);
  absl::MutexLock lock(&mu_);
  if (!parsed.has_value() && logged_unknown_states_.emplace(std::string(state), true).second) {
    LogToStderr("unknown adapter state \"" + std::string(state) + "\" recorded as \"error\"");
  }
  if (Adapter* a = Find(adapter_id)) SetStateLocked(*a, parsed.value_or(AdapterState::kError));
}

std::optional<AdapterState> AdapterMetrics::State(std::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  auto it = adapters_.find(adapter_id);
  if (it == adapters_.end()) return std::nullopt;
  return it->second.state;
}

void AdapterMetrics::CountApply(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) a->applies->Increment();
}

void AdapterMetrics::CountVerify(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) a->verifies->Increment();
}

void AdapterMetrics::CountDriftRepair(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) a->drift_repairs->Increment();
}

void AdapterMetrics::CountByReason(
    prometheus::Family<prometheus::Counter>& family,
    std::map<std::string, prometheus::Counter*, std::less<>>& counters,
    const std::string& adapter_id, std::string_view reason) {
  std::string_view bounded = "other";
  for (std::string_view r : kFailureReasons) {
    if (r == reason) bounded = r;
  }
  auto it = counters.find(bounded);
  if (it == counters.end()) {
    prometheus::Counter& c =
        family.Add({{"adapter", adapter_id}, {"reason", std::string(bounded)}});
    it = counters.emplace(std::string(bounded), &c).first;
  }
  it->second->Increment();
}

void AdapterMetrics::CountFailure(std::string_view adapter_id, std::string_view reason) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) {
    CountByReason(failures_, a->failures, a->labels.adapter_id, reason);
  }
}

void AdapterMetrics::CountIoErrorBurst(std::string_view adapter_id, std::string_view reason) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) {
    CountByReason(io_error_bursts_, a->io_error_bursts, a->labels.adapter_id, reason);
  }
}

void AdapterMetrics::CountReenumerationLoop(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  if (Adapter* a = Find(adapter_id)) a->reenumeration_loops->Increment();
}

void AdapterMetrics::SetDiagnosis(std::string_view adapter_id, std::string_view code, bool active) {
  if (!ValidCode(code)) return;
  absl::MutexLock lock(&mu_);
  Adapter* a = Find(adapter_id);
  if (a == nullptr) return;
  auto it = a->diagnoses.find(code);
  if (!active) {
    if (it != a->diagnoses.end()) {
      diagnosis_.Remove(it->second);
      a->diagnoses.erase(it);
    }
    return;
  }
  if (it != a->diagnoses.end() || a->diagnoses.size() >= kMaxDiagnosesPerAdapter) return;
  prometheus::Gauge& g =
      diagnosis_.Add({{"adapter", a->labels.adapter_id}, {"code", std::string(code)}});
  g.Set(1);
  a->diagnoses.emplace(std::string(code), &g);
}

void AdapterMetrics::SetExperimentArm(std::string_view adapter_id, std::string_view experiment,
                                      std::string_view arm) {
  if (!ValidName(experiment) || (!arm.empty() && !ValidName(arm))) return;
  absl::MutexLock lock(&mu_);
  Adapter* a = Find(adapter_id);
  if (a == nullptr) return;
  auto it = a->experiments.find(experiment);
  if (it != a->experiments.end()) {
    if (it->second.first == arm) return;
    experiment_.Remove(it->second.second);
    a->experiments.erase(it);
  }
  if (arm.empty() || a->experiments.size() >= kMaxExperimentsPerAdapter) return;
  prometheus::Gauge& g = experiment_.Add({{"adapter", a->labels.adapter_id},
                                          {"experiment", std::string(experiment)},
                                          {"arm", std::string(arm)}});
  g.Set(1);
  a->experiments.emplace(std::string(experiment), std::make_pair(std::string(arm), &g));
}

}  // namespace rxfleet::agent
