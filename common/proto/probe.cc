#include "common/proto/probe.h"

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/proto/checked_duration.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

absl::Status Prefixed(absl::string_view field, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", status.message()));
}

}  // namespace

absl::StatusOr<ProbeSpec> ProbeSpecFromProto(const v1::ProbeSpec& proto,
                                             std::string_view std_field) {
  const absl::string_view field = ToAbslView(std_field);
  ProbeSpec spec;
  if (absl::Status s = ParseProbeServer(proto.server(), spec); !s.ok() && !proto.server().empty()) {
    return Prefixed(field, s);
  }
  switch (proto.protocol()) {
    case v1::PROBE_PROTOCOL_UNSPECIFIED:
    case v1::PROBE_PROTOCOL_TCP:
      spec.protocol = ProbeProtocol::kTcp;
      break;
    case v1::PROBE_PROTOCOL_UDP:
      spec.protocol = ProbeProtocol::kUdp;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".protocol ", static_cast<int>(proto.protocol()), " is unknown"));
  }
  switch (proto.direction()) {
    case v1::PROBE_DIRECTION_UNSPECIFIED:
    case v1::PROBE_DIRECTION_REVERSE:
      spec.direction = ProbeDirection::kReverse;
      break;
    case v1::PROBE_DIRECTION_FORWARD:
      spec.direction = ProbeDirection::kForward;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".direction ", static_cast<int>(proto.direction()), " is unknown"));
  }
  if (proto.parallel_streams() > static_cast<uint32_t>(kMaxProbeStreams)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".parallelStreams ", proto.parallel_streams(), " is outside 1..", kMaxProbeStreams));
  }
  spec.parallel_streams =
      proto.parallel_streams() == 0 ? 1 : static_cast<int>(proto.parallel_streams());
  if (proto.has_duration()) {
    absl::StatusOr<absl::Duration> d =
        CheckedDurationFromProto(proto.duration(), ToStdView(absl::StrCat(field, ".duration")));
    if (!d.ok()) return d.status();
    spec.duration = *d;
  }
  if (proto.has_interval()) {
    absl::StatusOr<absl::Duration> d =
        CheckedDurationFromProto(proto.interval(), ToStdView(absl::StrCat(field, ".interval")));
    if (!d.ok()) return d.status();
    spec.interval = *d;
  }
  spec.udp_rate_bps = proto.udp_rate_bps();
  if (absl::Status s = ValidateProbeSpec(spec); !s.ok()) return Prefixed(field, s);
  return spec;
}

v1::ProbeSpec ProbeSpecToProto(const ProbeSpec& spec) {
  v1::ProbeSpec proto;
  proto.set_server(ProbeServerAddress(spec));
  proto.set_protocol(spec.protocol == ProbeProtocol::kUdp ? v1::PROBE_PROTOCOL_UDP
                                                          : v1::PROBE_PROTOCOL_TCP);
  proto.set_direction(spec.direction == ProbeDirection::kForward ? v1::PROBE_DIRECTION_FORWARD
                                                                 : v1::PROBE_DIRECTION_REVERSE);
  proto.set_parallel_streams(static_cast<uint32_t>(spec.parallel_streams));
  *proto.mutable_duration() = DurationToProto(spec.duration);
  *proto.mutable_interval() = DurationToProto(spec.interval);
  proto.set_udp_rate_bps(spec.udp_rate_bps);
  return proto;
}

}  // namespace rxfleet::common
