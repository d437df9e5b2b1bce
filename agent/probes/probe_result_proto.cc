#include "agent/probes/probe_result_proto.h"

#include <string>

#include "common/proto/probe.h"
#include "common/proto/time.h"

namespace rxfleet::agent {

v1::ProbeResult ProbeResultToProto(const ProbeResult& result) {
  v1::ProbeResult proto;
  *proto.mutable_start_time() = common::TimeToProto(result.start_time);
  *proto.mutable_duration() = common::DurationToProto(result.duration);
  proto.set_ok(result.ok);
  proto.set_failure_reason(std::string(ProbeFailureName(result.failure)));
  proto.set_failure_message(BoundedFailureMessage(result.failure_message));
  proto.set_throughput_bps(result.throughput_bps);
  proto.set_retransmits(result.retransmits);
  proto.set_udp_loss_ratio(result.udp_loss_ratio);
  proto.set_udp_jitter_seconds(result.udp_jitter_seconds);
  proto.set_bytes(result.bytes);
  proto.set_attempts(result.attempts);
  *proto.mutable_spec() = common::ProbeSpecToProto(result.spec);
  return proto;
}

}  // namespace rxfleet::agent
