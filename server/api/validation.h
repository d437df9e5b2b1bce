#pragma once

// Validation of what agents send on AgentService.Connect. Everything an agent sends is input:
// a bad message ends its stream with INVALID_ARGUMENT and a message naming the field, and never
// reaches the registry.

#include <cstddef>

#include "absl/status/status.h"
#include "rxfleet/v1/agent_service.pb.h"

namespace rxfleet::server {

/// Limits on agent messages (besides the 4 MiB message size the server enforces).
inline constexpr size_t kMaxHostLabels = 64;
inline constexpr size_t kMaxCapabilities = 32;
inline constexpr size_t kMaxShortStringLength = 256;  // versions, capabilities, host facts
inline constexpr size_t kMaxAdaptersPerHost = 256;
inline constexpr size_t kMaxNackDetailLength = 4096;  // longer details are truncated, not refused

/// Hello: host_id per common::ValidateHostId; labels valid host
/// labels (common/host_labels.h), at most 64; agent_version and capabilities (at most 32) at most
/// 256 characters; metrics_address empty or HOST:PORT (port 1..65535, [IPv6] allowed);
/// host_info strings at most 256 characters. InvalidArgument naming the field otherwise.
absl::Status ValidateHello(const v1::Hello& hello);

/// An inventory or the `adapters` of an update: at most 256 adapters, each with a
/// metadata.name valid per common::ValidateAdapterId, unique within the message.
absl::Status ValidateAdapters(const google::protobuf::RepeatedPtrField<v1::Adapter>& adapters);

/// An update: ValidateAdapters plus removed ids (same id rules, at most 256).
absl::Status ValidateAdapterUpdate(const v1::AdapterUpdate& update);

}  // namespace rxfleet::server
