#pragma once

// When each adapter of an experiment with a probe (Experiment::probe) runs it inside a metric
// window, so that probes against one iperf3 server never overlap (an iperf3 server runs one
// test at a time; a second one at the same moment fails `busy` or halves both results).
//
// A window of length W holds K = floor(W / L) slots of length L = probe duration +
// kProbeSlotMargin (>= 1 by the experiment rules). Slot j starts at j * L + margin / 2, so
// each probe has half the margin before and after it against clock offsets between agents and
// iperf3's connection set-up, and ends by W - margin / 2. Every adapter of the experiment gets a
// sequence number s (below): its slot is s mod K and its round s / K; with R = ceil(n / K)
// rounds (n = the highest sequence number + 1) it probes only in the windows whose index
// floor((window start - Unix epoch) / W) mod R equals its round
// (ExperimentAssignment.probe_rounds / probe_round). So at most K probes run per window, one
// per slot, and each adapter probes every R-th window.
//
// Sequence numbers are sticky: Update keeps the number of every adapter that stays, frees the
// numbers of adapters that left and gives joiners the lowest free numbers in adapter-key
// order. Rebuilding bundles therefore never moves an adapter's offset; only the number of
// rounds changes when the fleet under test grows past R * K (or shrinks below (R - 1) * K).
// The plan lives in the server's memory: after a restart the numbers are given afresh in key
// order.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace rxfleet::experiments {

/// One adapter's probe turn.
struct ProbeTurn {
  absl::Duration offset;  ///< probe start after the window start, in [0, W - duration]
  uint32_t rounds = 1;    ///< R >= 1: the adapter probes every R-th window
  uint32_t round = 0;     ///< its turn, in [0, R)

  friend bool operator==(const ProbeTurn&, const ProbeTurn&) = default;
};

/// Probe slots of one window: K = floor(W / (duration + kProbeSlotMargin)), at least 1 when
/// duration + margin <= W (0 otherwise, which ValidateExperiment rules out).
uint32_t ProbeSlotsPerWindow(absl::Duration window_length, absl::Duration probe_duration);

/// The sticky slot plan of one experiment (see the file comment). A plain value; not
/// thread-safe.
class ProbePlan {
 public:
  /// `window_length` and `probe_duration` as validated by ValidateExperiment.
  ProbePlan(absl::Duration window_length, absl::Duration probe_duration);

  /// Makes `members` (adapter keys, any order, duplicates ignored) the adapters of the plan.
  /// Returns true when the turn of any adapter that stays changed, or adapters joined or
  /// left (the bundles must be rebuilt).
  bool Update(std::vector<std::string> members);

  /// The turn of an adapter of the plan; nullopt for others.
  std::optional<ProbeTurn> TurnOf(std::string_view adapter_key) const;

  uint32_t slots_per_window() const { return slots_; }
  absl::Duration slot_length() const { return slot_length_; }
  /// R: 1 with no members.
  uint32_t rounds() const { return rounds_; }
  size_t members() const { return sequence_.size(); }

 private:
  absl::Duration window_length_;
  absl::Duration probe_duration_;
  absl::Duration slot_length_;
  uint32_t slots_ = 1;
  uint32_t rounds_ = 1;
  std::map<std::string, uint32_t, std::less<>> sequence_;  ///< adapter key -> s
};

}  // namespace rxfleet::experiments
