#include "agent/experiments/metric_window_proto.h"

#include "agent/probes/probe_result_proto.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"

namespace rxfleet::agent {

v1::MetricWindow MetricWindowToProto(const ExperimentWindow& window) {
  const AdapterWindow& w = window.window;
  v1::MetricWindow out;
  out.set_adapter_id(w.adapter_id);
  out.set_experiment(window.experiment);
  out.set_arm(window.arm);
  out.set_period_index(window.period_index);
  *out.mutable_window_start_time() = common::TimeToProto(w.start_time);
  *out.mutable_window_duration() = common::DurationToProto(absl::Seconds(w.duration_seconds));
  if (w.has_traffic) {
    out.set_rx_bytes(w.traffic.rx_bytes);
    out.set_tx_bytes(w.traffic.tx_bytes);
    out.set_rx_packets(w.traffic.rx_packets);
    out.set_tx_packets(w.traffic.tx_packets);
    out.set_rx_dropped(w.traffic.rx_dropped);
  }
  v1::RttSummary* rtt = out.mutable_rtt();
  rtt->set_count(w.rtt.count);
  rtt->set_mean_seconds(w.rtt.mean_seconds);
  rtt->set_p50_seconds(w.rtt.p50_seconds);
  rtt->set_p90_seconds(w.rtt.p90_seconds);
  rtt->set_p99_seconds(w.rtt.p99_seconds);
  for (const RttBucket& bucket : w.rtt.buckets) {
    v1::HistogramBucket* b = rtt->add_buckets();
    b->set_upper_bound_seconds(bucket.upper_bound_seconds);
    b->set_cumulative_count(bucket.cumulative_count);
  }
  out.set_probes_sent(w.probes_sent);
  out.set_probes_lost(w.probes_lost);
  if (w.cpu.has_value()) {
    out.set_busiest_core_ratio(w.cpu->busiest_core_ratio);
    out.set_host_cpu_ratio(w.cpu->host_ratio);
  }
  out.set_valid(window.valid);
  out.set_invalid_reason(window.invalid_reason);
  if (window.observed_settings.has_value()) {
    *out.mutable_observed_settings() = common::RxAggSettingsToProto(*window.observed_settings);
  }
  out.set_bundle_version(window.bundle_version);
  if (window.probe.has_value()) *out.mutable_probe() = ProbeResultToProto(*window.probe);
  return out;
}

}  // namespace rxfleet::agent
