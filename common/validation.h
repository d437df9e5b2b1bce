#pragma once

// The naming rules every component checks: host ids, adapter ids, object names (policies,
// experiments, arms) and adapter selectors. The agent checks its own values with them, the
// server checks what agents and operators send, rxfleetctl checks arguments before it calls:
// one rule, one message, everywhere.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/policy/policy.h"

namespace rxfleet::common {

inline constexpr size_t kMaxHostIdLength = 63;
inline constexpr size_t kMaxObjectNameLength = 63;
inline constexpr size_t kMaxAdapterIdLength = 128;

/// A host id (--host-id, Hello.host_id): 1..63 characters of [a-z0-9.-], starting and ending
/// with a letter or digit (a DNS name in lower case, as the default from uname's nodename is).
/// InvalidArgument: "host id 'x' must be 1..63 characters", "host id 'x' may contain only
/// lower-case letters, digits, '-' and '.'", "host id 'x' must start and end with a letter or
/// digit" (non-printable characters are C-escaped in the message).
absl::Status ValidateHostId(std::string_view id);

/// An adapter id as the agent makes them ("port-<port path>", e.g. "port-2-1.4"; see
/// agent/sysfs/usb_sysfs.h StableAdapterId): 1..128 printable ASCII characters without spaces.
/// The same rule holds for ids agents report and ids policy and experiment selectors name.
/// InvalidArgument: "adapter id 'x' must be 1..128 characters", "adapter id 'x' must be printable
/// ASCII without spaces" (C-escaped).
absl::Status ValidateAdapterId(std::string_view id);

/// A document or arm name (policy, experiment, arm): 1..63 characters of [a-z0-9-], starting
/// and ending with a letter or digit. `what` names the value in messages: "<what> 'x' must be
/// 1..63 characters of [a-z0-9-]", "... may contain only lower-case letters, digits and '-'",
/// "... must start and end with a letter or digit".
absl::Status CheckObjectName(std::string_view what, std::string_view name);

/// An experiment name: CheckObjectName("experiment name", name).
absl::Status ValidateExperimentName(std::string_view name);

/// A rule broken by a value inside a document: the field path and the message.
struct FieldProblem {
  std::string field;  ///< e.g. "spec.selector.chips[1]"
  std::string message;
};

/// The first selector term that breaks its rule, with its path under `path` (e.g.
/// "spec.selector"): matchLabels keys ("<path>.matchLabels") and values
/// ("<path>.matchLabels.<key>", common/host_labels.h), usbSpeeds not unknown
/// ("<path>.usbSpeeds[i]"), chips known to the chip table ("<path>.chips[i]"), adapter ids
/// (ValidateAdapterId, "<path>.adapters[i]"). nullopt when the selector is valid.
std::optional<FieldProblem> FindSelectorProblem(const Selector& selector, std::string_view path);

}  // namespace rxfleet::common
