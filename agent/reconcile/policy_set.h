#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/chips/chip_table.h"
#include "common/chips/rx_agg.h"
#include "common/policy/policy.h"
#include "common/policy/precedence.h"
#include "common/policy/resolver.h"
#include "common/policy/selectors.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::agent {

/// One adapter's place in a running experiment, as the server computes it (mirrors
/// rxfleet.v1.ExperimentAssignment; the link converts the proto into this value).
struct ExperimentAssignment {
  /// Adapter id on this host ("port-2-2"). Non-empty.
  std::string adapter_id;
  /// Experiment name, 1..63 characters of [a-z0-9-] (DNS-label style, like policy names).
  std::string experiment;
  /// Arm in effect now: 1..63 characters of [A-Za-z0-9._-].
  std::string arm;
  /// The arm's settings; at least one field set, valid per common::ValidateRxAggSettings and,
  /// for adapters on layout v1, common::ValidateRxAggSettingsForLayout.
  common::RxAggSettings settings;
  /// Precedence of the arm's settings (ExperimentSpec.priority), -1000..1000.
  int priority = 0;
  /// SWITCHBACK period index, 0 for PARALLEL.
  uint32_t period_index = 0;
  /// Wall-clock end of the current period (SWITCHBACK) or of the experiment (PARALLEL). The
  /// assignment stops applying at that time unless a newer bundle replaces it. Unset: no end.
  std::optional<absl::Time> period_end;
  /// Wall-clock start of the current period (SWITCHBACK) or of the experiment (PARALLEL):
  /// metric windows are aligned to it and burn-in counts from it. Unset (older servers): the
  /// agent uses the moment it first saw the assignment. Not after period_end.
  std::optional<absl::Time> period_start;
  /// Experiment metadata.generation (informational; a change closes the open window).
  int64_t experiment_generation = 0;
  /// Length of the metric windows to report, >= 0; zero = the agent's metric window length
  /// (--metric-window).
  absl::Duration window_length = absl::ZeroDuration();
  /// Windows starting before period_start + burn_in are reported invalid (`burn_in`). >= 0.
  absl::Duration burn_in = absl::ZeroDuration();
  /// The experiment's active probe (ExperimentAssignment.probe), validated: run once in every
  /// window that ends after burn-in, probe_offset after the window's start. Unset: none.
  std::optional<common::ProbeSpec> probe;
  /// Start of the probe inside each window, in [0, window length).
  absl::Duration probe_offset = absl::ZeroDuration();
  /// Rotation (ExperimentAssignment.probe_rounds/probe_round): the probe runs only in windows
  /// whose index floor((window start - Unix epoch) / window length) modulo probe_rounds equals
  /// probe_round. probe_rounds 0 or 1: every window; probe_round < max(1, probe_rounds).
  uint32_t probe_rounds = 1;
  uint32_t probe_round = 0;

  friend bool operator==(const ExperimentAssignment&, const ExperimentAssignment&) = default;
};

/// The server's complete desired state for this host (state of the world, never a diff).
struct ServerBundle {
  /// PolicyBundle.version, >= 1.
  uint64_t version = 0;
  std::vector<common::Policy> policies;
  std::vector<ExperimentAssignment> assignments;
  /// PolicyBundle.probe_slots: adapter id -> (policy, offset) of the server's probe schedule.
  std::map<std::string, std::pair<std::string, absl::Duration>> probe_slots;
};

/// Validates a bundle before anything of it is used. Rules: version >= 1; every policy passes
/// common::ValidatePolicy; policy names are unique; every assignment has a non-empty adapter id,
/// a valid experiment name and arm, valid non-empty settings and a priority in range; no adapter
/// has two assignments for the same experiment; and for each assignment whose adapter is in
/// `adapter_layouts` (id -> layout of the adapters known now), the settings are valid on that
/// layout. Returns InvalidArgument naming the policy or assignment and the field, e.g.
/// "assignment 2 (experiment hold-ab, adapter port-1-1.3): bufferKiB 6 is not a multiple of 4
/// on layout v1".
absl::Status ValidateServerBundle(
    const ServerBundle& bundle, const std::map<std::string, common::RxAggLayout>& adapter_layouts);

/// The experiment-layer entry an assignment becomes (common/policy/precedence.h).
common::ArmInEffect ArmOf(const ExperimentAssignment& assignment);

/// Where one desired field came from (the shared precedence's origin).
using SettingOrigin = common::SettingOrigin;

/// An adapter's desired settings with per-field origins.
struct DesiredSettings {
  common::ResolvedSettings resolved;
  /// Keyed by field name: "hold_us", "count_threshold", "buffer_kib", "enable". Only resolved
  /// fields have an entry.
  std::map<std::string, SettingOrigin> origins;
  /// Version of the server bundle in effect (0 without one).
  uint64_t bundle_version = 0;
  /// Experiments the adapter is enrolled in now: experiment -> arm (whether or not the arm's
  /// settings won any field).
  std::map<std::string, std::string> experiments;

  common::RxAggSettings Settings() const { return resolved.ToSettings(); }
  friend bool operator==(const DesiredSettings&, const DesiredSettings&) = default;
};

/// All policy layers the agent resolves against: local files, the server bundle (policies and
/// experiment assignments) and, implicitly, the built-in default. An immutable value: the agent
/// swaps whole PolicySets, so a reconcile never sees half of an update.
class PolicySet {
 public:
  PolicySet() = default;
  PolicySet(std::vector<common::Policy> local, std::optional<ServerBundle> server);

  /// Resolves one adapter (common::ResolveLayers: local file, server policies, the adapter's
  /// experiment assignments), dropping assignments whose period ended before `wall_now`.
  DesiredSettings Resolve(const common::AdapterAttributes& adapter, absl::Time wall_now) const;

  /// The active throughput probe of one adapter (PolicySpec.probe; common::ResolveProbe over
  /// the local files and the server's policies); nullopt when no matching policy sets one.
  /// Experiment probes come with the assignments, not through here.
  std::optional<common::Resolved<common::ProbeSpec>> ResolveProbe(
      const common::AdapterAttributes& adapter) const;

  /// The server's probe slot for `adapter_id` when its probe is decided by `policy`
  /// (PolicyBundle.probe_slots); nullopt otherwise (the agent then spreads by a stable hash).
  std::optional<absl::Duration> ProbeSlot(const std::string& adapter_id,
                                          const std::string& policy) const;

  /// The earliest period end after `wall_now` among the assignments, if any: the moment
  /// resolution changes by itself.
  std::optional<absl::Time> NextExpiry(absl::Time wall_now) const;

  const std::vector<common::Policy>& local() const { return local_; }
  const std::optional<ServerBundle>& server() const { return server_; }
  uint64_t bundle_version() const { return server_ ? server_->version : 0; }

 private:
  std::vector<common::Policy> local_;
  std::optional<ServerBundle> server_;
};

}  // namespace rxfleet::agent
