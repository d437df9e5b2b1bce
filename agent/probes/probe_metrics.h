#pragma once

// The probe series (docs/METRICS.md, "Throughput probes"): the last probe's measurement per
// adapter, when it ran, and counts of runs and failures.

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/probes/probe_result.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace rxfleet::agent {

/// Registers and updates:
///  - rxfleet_probe_throughput_bits_per_second{adapter,direction,protocol} (gauge, last ok
///    probe of that direction and protocol);
///  - rxfleet_probe_retransmits{adapter} (gauge, last ok TCP probe, count);
///  - rxfleet_probe_udp_loss_ratio{adapter}, rxfleet_probe_udp_jitter_seconds{adapter}
///    (gauges, last ok UDP probe);
///  - rxfleet_probe_last_run_timestamp_seconds{adapter} (gauge, Unix time the last probe
///    ended, ok or not);
///  - rxfleet_probe_runs_total{adapter,result="ok|failed"} (counter, final results);
///  - rxfleet_probe_failures_total{adapter,reason} (counter, ProbeFailureName words);
///  - rxfleet_probe_state{adapter,state} (gauge, 1 for the last outcome: "ok" or a reason).
/// Thread-safe.
class ProbeMetrics {
 public:
  explicit ProbeMetrics(prometheus::Registry& registry);

  /// Records one final result of `adapter_id`.
  void Record(const std::string& adapter_id, const ProbeResult& result);
  /// Deletes every series of the adapter (it was forgotten).
  void Remove(const std::string& adapter_id);

 private:
  void SetState(const std::string& adapter_id, const std::string& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Gauge>& throughput_;
  prometheus::Family<prometheus::Gauge>& retransmits_;
  prometheus::Family<prometheus::Gauge>& udp_loss_;
  prometheus::Family<prometheus::Gauge>& udp_jitter_;
  prometheus::Family<prometheus::Gauge>& last_run_;
  prometheus::Family<prometheus::Counter>& runs_;
  prometheus::Family<prometheus::Counter>& failures_;
  prometheus::Family<prometheus::Gauge>& state_;

  absl::Mutex mu_;
  // Label sets created per adapter, so Remove deletes exactly those.
  std::map<std::string, std::map<std::string, prometheus::Gauge*>> gauges_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, prometheus::Counter*>> counters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, prometheus::Gauge*>> states_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rxfleet::agent
