#pragma once

// The retry hint of the agent-server link: a server that refuses or ends an agent stream
// (admission control's RESOURCE_EXHAUSTED, a draining server's UNAVAILABLE) may send trailing
// metadata `rxfleet-retry-after-ms: <decimal milliseconds>`; the agent waits at least that long,
// plus jitter, before it reconnects. Shared by the server (which writes it), the agent and the
// load generator (which read it), so all agree on the key, the format and the bound.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rxfleet::common {

/// Trailing metadata key of the hint (gRPC metadata keys are lower case).
inline constexpr std::string_view kRetryAfterMetadataKey = "rxfleet-retry-after-ms";

/// Longest hint honoured: the value comes from the network, so a larger one is cut to this.
inline constexpr absl::Duration kMaxRetryAfter = absl::Minutes(5);

/// Extra jitter a client adds on top of a hint: up to this fraction of it.
inline constexpr double kRetryHintJitter = 0.2;

/// A client's wait before its next connection attempt: `backoff` (its own jittered backoff
/// delay), or, with a retry `hint` from the server, the larger of `backoff` and
/// hint * (1 + hint_jitter), the hint first cut to [0, kMaxRetryAfter]. `hint_jitter` is a
/// random draw in [0, kRetryHintJitter] (values outside are clamped). So the result never exceeds
/// max(backoff, kMaxRetryAfter * (1 + kRetryHintJitter)).
absl::Duration ReconnectDelay(absl::Duration backoff, std::optional<absl::Duration> hint,
                              double hint_jitter);

/// The metadata value for `delay`: decimal milliseconds, rounded up, at least 1, at most
/// kMaxRetryAfter ("1500" for 1.5 s).
std::string FormatRetryAfter(absl::Duration delay);

/// Parses a metadata value: 1 to 10 decimal digits (milliseconds, no sign, no spaces). Values
/// above kMaxRetryAfter are cut to it. InvalidArgument (naming the value, at most 32 of its
/// characters) for anything else, including an empty value.
absl::StatusOr<absl::Duration> ParseRetryAfter(std::string_view value);

}  // namespace rxfleet::common
