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
/// Default bound on adapters per host, per message and in the registry across updates
/// (rxfleet-server --max-adapters-per-host).
inline constexpr size_t kMaxAdaptersPerHost = 256;
inline constexpr size_t kMaxNackDetailLength = 4096;  // longer details are truncated, not refused
/// Adapter reports: every string field named `message` (condition and diagnosis text) at most
/// this long, every other string (chip, product, manufacturer, serial, driver, netdev, codes,
/// reasons, ...) at most kMaxShortStringLength; every repeated field (conditions, diagnoses,
/// registers, ...) at most kMaxAdapterListEntries entries; one adapter at most
/// kMaxAdapterBytes serialised. 256 adapters of the largest size fit one 4 MiB message.
inline constexpr size_t kMaxAgentTextLength = 1024;
inline constexpr size_t kMaxAdapterListEntries = 64;
inline constexpr size_t kMaxAdapterBytes = 16 * 1024;

/// Hello: host_id per common::ValidateHostId; labels valid host
/// labels (common/host_labels.h), at most 64; agent_version and capabilities (at most 32) at most
/// 256 characters; metrics_address empty or HOST:PORT (port 1..65535, [IPv6] allowed);
/// host_info strings at most 256 characters. InvalidArgument naming the field otherwise.
absl::Status ValidateHello(const v1::Hello& hello);

/// An inventory or the `adapters` of an update: at most `max_adapters` adapters, each with a
/// metadata.name valid per common::ValidateAdapterId, unique within the message, and within the
/// string, list and size bounds above (checked over every field of the message, so fields
/// added later are bounded too). InvalidArgument naming the field path otherwise, e.g.
/// "adapters[3].status.product: 300 characters; at most 256".
absl::Status ValidateAdapters(const google::protobuf::RepeatedPtrField<v1::Adapter>& adapters,
                              size_t max_adapters = kMaxAdaptersPerHost);

/// An update: ValidateAdapters plus removed ids (same id rules, at most `max_adapters`).
absl::Status ValidateAdapterUpdate(const v1::AdapterUpdate& update,
                                   size_t max_adapters = kMaxAdaptersPerHost);

}  // namespace rxfleet::server
