#pragma once

// What runs one probe attempt: libiperf in production (IperfProbeRunner), a fake in the
// scheduler's tests.

#include <string>

#include "agent/probes/probe_result.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::agent {

/// One attempt of one probe through one adapter's netdev.
struct ProbeRequest {
  /// Adapter id ("port-2-1"), for logs.
  std::string adapter_id;
  /// The adapter's netdev ("wlan1"); empty when it has none (-> kInterfaceDown).
  std::string netdev;
  /// A validated spec (common::ValidateProbeSpec).
  common::ProbeSpec spec;
};

/// Runs probe attempts. Blocking; called from one thread at a time (the scheduler's worker).
class ProbeRunner {
 public:
  virtual ~ProbeRunner() = default;
  /// Runs one attempt and returns its outcome with attempts = 1: ok with the measurement, or a
  /// failure (kBusy is retried by the caller, every other failure is final). Never throws,
  /// never aborts; returns within spec.duration + kProbeTimeoutMargin (+ whatever the runner
  /// documents beyond that).
  virtual ProbeResult Run(const ProbeRequest& request) = 0;
  /// The agent is stopping: ends the attempt in progress as soon as it can (its result is then
  /// a failure nobody records) and makes every later Run return a failure at once. Any
  /// thread; idempotent. The default does nothing (attempts run to their end).
  virtual void Cancel() {}
};

/// A probe with no result this long after its duration is ended as `timeout`.
inline constexpr absl::Duration kProbeTimeoutMargin = absl::Seconds(10);

}  // namespace rxfleet::agent
