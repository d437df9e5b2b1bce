#pragma once

// The server's schedule of policy probes (PolicySpec.probe; PolicyBundle.probe_slots): when
// each adapter whose probe a server policy decides runs it, so that adapters of the whole
// fleet probing against one iperf3 server never test at the same time (an iperf3 server runs
// one test at a time; a second one fails `busy` or halves both results). The same idea as the
// slots of experiment probes (server/experiments/probe_schedule.h), over an interval instead of
// a metric window.
//
// Rule. For every adapter, common::ResolveProbe over the server's valid policies alone (one
// kServerPolicy layer) names the deciding policy and its probe; an adapter without one gets no
// slot. Adapters are grouped by their probe's server (common::ProbeServerAddress, host:port).
// The group of server S has, from the valid policies whose probe targets S (not from the
// adapters, so adapters joining or leaving never change them):
//  - slot length L = the longest probe duration among those policies + kProbeSlotMargin
//    (common/experiment/experiment.h, 2 s): a slot holds any probe of the group with half the
//    margin before and after it, against clock offsets between agents and iperf3's set-up;
//  - cycle C = the greatest common divisor of those policies' intervals (the interval itself
//    when they share one, the usual case).
// Each member has a sticky sequence number s (below) and runs at Unix epoch + k * interval +
// offset (k = 0, 1, ...; interval of its own probe) with
//   offset = (s * L + kProbeSlotMargin / 2) mod interval,   in [0, interval).
// With n = the highest sequence number of the group + 1 (the slots in use): when n * L <= C,
// no two runs of the group ever overlap (every slot lies in [0, C) and every interval is a
// multiple of C, so all runs repeat at the same places modulo C). When n * L > C the group is
// overcommitted: the offsets wrap modulo the interval and runs of some members overlap (with
// one interval for the group n slots cannot fit in it, whatever the offsets; agents retry a
// `busy` server twice); the plan records one note per change of that state and of n, L or C
// while it lasts (TakeNotes), for the server's log.
//
// Sticky numbers: an adapter, keyed by (host id, adapter id), keeps its number while its probe
// targets the same server (its deciding policy may change). One that leaves the group
// (unplugged, no longer decided by a policy probing there, dropped by the caller) frees its
// number; joiners take the lowest free numbers, in (host id, adapter id) order when several
// join at once. So a host's inventory change moves only that host's slots, and a policy change
// moves the adapters it moves between groups and, when it changes a group's L or C, the
// offsets of that group. The plan lives in the server's memory: after a restart the numbers are
// given afresh in (host id, adapter id) order.
//
// A plain value; not thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "common/policy/policy.h"
#include "common/policy/selectors.h"

namespace rxfleet::server {

/// One adapter's slot (rxfleet.v1.ProbeSlot).
struct ProbeSlotEntry {
  std::string adapter_id;
  /// Name of the server policy whose probe the adapter runs.
  std::string policy;
  /// Runs start at Unix epoch + k * interval + offset; in [0, interval).
  absl::Duration offset;

  friend bool operator==(const ProbeSlotEntry&, const ProbeSlotEntry&) = default;
};

/// The state of one group (one iperf3 server).
struct ProbeSlotGroup {
  std::string server;          ///< host:port
  absl::Duration slot_length;  ///< L
  absl::Duration cycle;        ///< C
  size_t members = 0;          ///< adapters with a number
  uint32_t slots = 0;          ///< n = highest number + 1 (0 without members)
  bool overcommitted() const { return slot_length * static_cast<int64_t>(slots) > cycle; }
};

/// A change of an overcommitted group, for the server's log.
struct ProbeSlotNote {
  bool overlap = false;  ///< true: the group is overcommitted now; false: it fits again
  std::string message;
};

/// The sticky plan (see the file comment).
class ProbeSlotPlan {
 public:
  /// Makes `policies` (PolicySnapshot::valid: validated, names unique) the server's policies
  /// and `adapters` every adapter of the fleet that can probe (AdapterAttributes with host and
  /// adapter_id set; any order; a repeated (host, adapter_id) counts once), and re-resolves
  /// them all. Hosts absent from `adapters` lose their slots.
  void Reset(const std::vector<common::Policy>& policies,
             const std::vector<common::AdapterAttributes>& adapters);

  /// Replaces the adapters of host `host` (each with AdapterAttributes::host == `host`; others
  /// are ignored) under the current policies; an empty list removes the host. Only this host's
  /// slots change.
  void SetHost(std::string_view host, const std::vector<common::AdapterAttributes>& adapters);

  /// The slots of a host's adapters, by adapter id; empty for a host without any.
  std::vector<ProbeSlotEntry> HostSlots(std::string_view host) const;

  /// Every group with its numbers, by server.
  std::vector<ProbeSlotGroup> Groups() const;

  /// The valid policies that set a probe, as the last Reset gave them (by name).
  const std::vector<common::Policy>& probe_policies() const { return probe_policies_; }

  /// Notes about overcommitted groups since the last call, oldest first, e.g.
  ///   "probe slots against iperf.lab:5201 overlap: 6 slots of 12s need 1m12s, more than the
  ///    1m0s cycle of the group's probe intervals; some runs overlap"
  ///   "probe slots against iperf.lab:5201 fit again: 5 slots of 12s in the 1m0s cycle"
  std::vector<ProbeSlotNote> TakeNotes();

  /// The valid policies of `policies` that set a probe, in their order.
  static std::vector<common::Policy> ProbePolicies(const std::vector<common::Policy>& policies);

 private:
  struct Want {
    std::string server;
    std::string policy;
    absl::Duration interval;
  };
  struct Member {
    Want want;
    uint32_t number = 0;
  };
  struct Group {
    absl::Duration slot_length;
    absl::Duration cycle;
    std::set<uint32_t> holes;  ///< free numbers below `end`
    uint32_t end = 0;          ///< highest number + 1
    size_t members = 0;
    /// What the last note said: (overcommitted, end, L, C); nullopt before any note.
    std::optional<std::tuple<bool, uint32_t, absl::Duration, absl::Duration>> noted;
    uint32_t Join();
    void Leave(uint32_t number);
  };
  using HostMembers = std::map<std::string, Member, std::less<>>;  ///< adapter id -> member
  using Wants = std::map<std::string, std::map<std::string, Want>, std::less<>>;

  std::optional<Want> Resolve(const common::AdapterAttributes& adapter) const;
  /// Applies `wants` to the hosts it names (and, with `all`, removes every other host):
  /// leavers first, then joiners in (host, adapter) order.
  void Apply(const Wants& wants, bool all);
  void Note(const std::string& server, Group& group);

  std::vector<common::Policy> probe_policies_;
  std::map<std::string, HostMembers, std::less<>> hosts_;
  std::map<std::string, Group, std::less<>> groups_;  ///< by server
  std::vector<ProbeSlotNote> notes_;
};

}  // namespace rxfleet::server
