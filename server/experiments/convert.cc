#include "server/experiments/convert.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/proto/convert.h"
#include "common/proto/probe.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void SegmentToProto(const std::vector<std::string>& keys, const std::vector<std::string>& values,
                    google::protobuf::Map<std::string, std::string>* out) {
  if (values.empty()) return;
  common::LabelsToProto(SegmentMap(keys, values), out);
}

}  // namespace

v1::ExperimentAssignment AssignmentToProto(const Experiment& e, int64_t generation,
                                           std::string_view adapter_id, const Assignment& a) {
  v1::ExperimentAssignment out;
  out.set_adapter_id(std::string(adapter_id));
  out.set_experiment(e.name);
  out.set_experiment_generation(generation);
  out.set_arm(a.arm);
  *out.mutable_settings() = common::RxAggSettingsToProto(e.arms[a.arm_index].settings);
  out.set_priority(e.priority);
  out.set_period_index(a.period_index);
  *out.mutable_period_start_time() = common::TimeToProto(a.period_start);
  *out.mutable_period_end_time() = common::TimeToProto(a.period_end);
  *out.mutable_window_length() = common::DurationToProto(e.window_length);
  *out.mutable_burn_in() = common::DurationToProto(e.burn_in);
  if (e.probe && a.probe) {
    *out.mutable_probe() = common::ProbeSpecToProto(*e.probe);
    out.mutable_probe()->clear_interval();  // policies only
    *out.mutable_probe_offset() = common::DurationToProto(a.probe->offset);
    if (a.probe->rounds > 1) {
      out.set_probe_rounds(a.probe->rounds);
      out.set_probe_round(a.probe->round);
    }
  }
  return out;
}

v1::StoppedArm StoppedArmToProto(const Experiment& e, const StoppedArm& s) {
  v1::StoppedArm out;
  SegmentToProto(e.segment_keys, s.segment, out.mutable_segment());
  out.set_arm(s.arm);
  out.set_reason(s.reason);
  out.set_message(s.message);
  *out.mutable_time() = common::TimeToProto(s.time);
  return out;
}

absl::StatusOr<StoppedArm> StoppedArmFromProto(const Experiment& e, const v1::StoppedArm& in) {
  StoppedArm s;
  if (!e.ArmIndex(in.arm())) {
    return absl::InvalidArgumentError(
        absl::StrCat("stopped arm '", in.arm(), "' is not an arm of experiment '", e.name, "'"));
  }
  s.arm = in.arm();
  if (!in.segment().empty()) {
    if (static_cast<size_t>(in.segment().size()) != e.segment_keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat("stopped arm '", in.arm(), "': segment has ",
                                                     in.segment().size(), " keys; experiment '",
                                                     e.name, "' has ", e.segment_keys.size()));
    }
    for (const std::string& key : e.segment_keys) {
      auto it = in.segment().find(key);
      if (it == in.segment().end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("stopped arm '", in.arm(), "': segment lacks key '", key, "'"));
      }
      s.segment.push_back(it->second);
    }
  }
  s.reason = in.reason();
  s.message = in.message();
  s.time = common::TimeFromProto(in.time());
  return s;
}

Window WindowFromProto(const v1::MetricWindow& in, std::string_view host_id,
                       std::vector<std::string> segment) {
  Window w;
  w.adapter = AdapterKey(host_id, in.adapter_id());
  w.segment = std::move(segment);
  w.arm = in.arm();
  w.period_index = in.period_index();
  w.start = common::TimeFromProto(in.window_start_time());
  w.duration = common::DurationFromProto(in.window_duration());
  w.valid = in.valid();
  w.invalid_reason = in.invalid_reason();
  w.rx_bytes = in.rx_bytes();
  w.tx_bytes = in.tx_bytes();
  w.rx_packets = in.rx_packets();
  w.tx_packets = in.tx_packets();
  w.rx_dropped = in.rx_dropped();
  w.rtt_count = in.rtt().count();
  w.rtt_mean_seconds = in.rtt().mean_seconds();
  w.rtt_p99_seconds = in.rtt().p99_seconds();
  w.probes_sent = in.probes_sent();
  w.probes_lost = in.probes_lost();
  w.busiest_core_ratio = in.busiest_core_ratio();
  w.host_cpu_ratio = in.host_cpu_ratio();
  if (in.has_probe() && in.probe().ok()) {
    const v1::ProbeResult& p = in.probe();
    w.probe_ok = true;
    w.probe_spec_known = p.has_spec();
    w.probe_udp = p.spec().protocol() == v1::PROBE_PROTOCOL_UDP;
    w.probe_forward = p.spec().direction() == v1::PROBE_DIRECTION_FORWARD;
    w.probe_throughput_bps = p.throughput_bps();
    w.probe_udp_loss_ratio = p.udp_loss_ratio();
    w.probe_udp_jitter_seconds = p.udp_jitter_seconds();
    w.probe_retransmits = p.retransmits();
  }
  return w;
}

v1::ExperimentReport ReportToProto(const Report& r, int64_t generation, v1::ExperimentPhase phase) {
  v1::ExperimentReport out;
  out.set_experiment(r.experiment);
  out.set_generation(generation);
  out.set_phase(phase);
  *out.mutable_generate_time() = common::TimeToProto(r.generated);
  if (r.windows_used > 0) {
    *out.mutable_first_window_time() = common::TimeToProto(r.first_window_start);
    *out.mutable_last_window_time() = common::TimeToProto(r.last_window_start);
  }
  out.set_primary_metric(std::string(MetricName(r.primary_metric)));
  for (const SegmentResult& segment : r.segments) {
    v1::SegmentReport* s = out.add_segments();
    SegmentToProto(r.segment_keys, segment.values, s->mutable_segment());
    for (const ArmResult& arm : segment.arms) {
      v1::ArmReport* a = s->add_arms();
      a->set_arm(arm.arm);
      a->set_adapters(static_cast<uint32_t>(arm.adapters));
      a->set_windows(arm.windows);
      a->set_invalid_windows(arm.excluded_windows);
      a->set_stopped(arm.stopped);
      for (const MetricSummary& summary : arm.metrics) {
        v1::MetricSummary* m = a->add_metrics();
        m->set_metric(std::string(MetricName(summary.metric)));
        m->set_mean(summary.estimate.mean);
        m->set_ci95_low(summary.estimate.ci ? summary.estimate.ci->low : kNaN);
        m->set_ci95_high(summary.estimate.ci ? summary.estimate.ci->high : kNaN);
        m->set_samples(summary.windows);
      }
    }
    for (const Comparison& c : segment.comparisons) {
      if (!c.estimate) continue;
      v1::ArmComparison* out_c = s->add_comparisons();
      out_c->set_arm(c.arm);
      out_c->set_control_arm(c.control_arm);
      out_c->set_metric(std::string(MetricName(c.metric)));
      out_c->set_diff(c.estimate->diff);
      out_c->set_relative_diff(c.estimate->relative ? c.estimate->relative->value : 0.0);
      out_c->set_ci95_low(c.estimate->ci.low);
      out_c->set_ci95_high(c.estimate->ci.high);
      out_c->set_p_value(c.estimate->p_value);
      out_c->set_always_valid_p_value(c.estimate->always_valid.p_value);
      out_c->set_always_valid_ci95_low(c.estimate->always_valid.ci.low);
      out_c->set_always_valid_ci95_high(c.estimate->always_valid.ci.high);
      out_c->set_conclusive(c.conclusive);
      out_c->set_treatment_units(static_cast<uint32_t>(c.treatment_units));
      out_c->set_control_units(static_cast<uint32_t>(c.control_units));
    }
  }
  for (const ReportNote& note : r.notes) {
    v1::ReportNote* n = out.add_notes();
    n->set_code(note.code);
    n->set_message(note.message);
    if (note.segment) SegmentToProto(r.segment_keys, *note.segment, n->mutable_segment());
  }
  out.set_text(RenderReportText(r));
  return out;
}

}  // namespace rxfleet::experiments
