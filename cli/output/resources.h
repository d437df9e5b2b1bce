#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/experiment.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "rxfleet/v1/policy.pb.h"
#include "rxfleet/v1/tuning.pb.h"

namespace rxfleet::cli {

// Tables of `rxfleetctl get`. Rows are sorted (hosts and policies by name, adapters by host
// then adapter id) whatever order the server used; columns are fixed (docs/CLI.md).

/// Hosts: NAME, STATUS, ADAPTERS, AGENT, BUNDLE (acked/sent), LAST-SEEN, AGE;
/// wide adds ARCH, KERNEL, BOARD, PEER, LABELS.
void PrintHostTable(const std::vector<v1::Host>& hosts, bool wide, absl::Time now,
                    std::ostream& out);

/// Adapters: HOST, ADAPTER, CHIP, USB, HOLD (desired/observed), STATE, AGE;
/// wide adds PORT, NETDEV, POLICY (what decided the hold), LAST-ACK (the host's last ACKed
/// bundle and its age, looked up in `hosts` by host id; "-" if unknown).
void PrintAdapterTable(const std::vector<v1::Adapter>& adapters,
                       const std::map<std::string, v1::Host>& hosts, bool wide, absl::Time now,
                       std::ostream& out);

/// Policies: NAME, PRIORITY, SELECTOR, SETTINGS, MATCHED, EFFECTIVE, AGE;
/// wide adds GENERATION, VERSION (resource version), DESCRIPTION.
void PrintPolicyTable(const std::vector<v1::Policy>& policies, bool wide, absl::Time now,
                      std::ostream& out);

/// Experiments: NAME, PHASE, DESIGN, ARMS (names, control first), ADAPTERS (assigned now),
/// WINDOWS (valid metric windows so far), AGE; wide adds PRIMARY (metric), STARTED (age of the
/// start, "-" while pending), ENDS ("in 2h" while running, "5m ago" once ended, "-" pending).
/// Sorted by name.
void PrintExperimentTable(const std::vector<v1::Experiment>& experiments, bool wide, absl::Time now,
                          std::ostream& out);

/// Hold tunings for `tune get`: NAME, PHASE (Running, Stopped), SEGMENTS, PROPOSED (segments
/// in phase "proposed"), ADAPTERS (assigned now, all segments), AGE; wide adds OBJECTIVE
/// ("maximize rx_throughput_bps"), CANDIDATES (holds), WINDOWS (valid metric windows so far),
/// STARTED (age of the start, "-" before). Sorted by name.
void PrintHoldTuningTable(const std::vector<v1::HoldTuning>& tunings, bool wide, absl::Time now,
                          std::ostream& out);

/// Events for `get events`: LAST-SEEN, TYPE, REASON, OBJECT, COUNT, MESSAGE, oldest first
/// (the server's order).
void PrintEventTable(const std::vector<v1::Event>& events, absl::Time now, std::ostream& out);

/// `-o name` forms: "host/pi1", "adapter/pi1/port-2-2", "policy/usb3-short".
std::string ResourceName(const v1::Host& host);
std::string ResourceName(const v1::Adapter& adapter);
std::string ResourceName(const v1::Policy& policy);
std::string ResourceName(const v1::Experiment& experiment);
std::string ResourceName(const v1::Event& event);
/// "holdtuning/hold-usb3".
std::string ResourceName(const v1::HoldTuning& tuning);

/// "desired/observed" hold of an adapter, e.g. "32µs/32µs"; "-" for a side that is unknown.
std::string FormatAdapterHold(const v1::Adapter& adapter);

/// Host status word(s): "Connected" or "Disconnected", plus ",Stale" and ",Nacked" (a NACK
/// newer than the last ACK).
std::string HostStatusWords(const v1::HostStatus& status);

}  // namespace rxfleet::cli
