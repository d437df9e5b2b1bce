#pragma once

// Which arm an adapter runs, and when: the parallel and switchback designs.
//
// Assignment is a pure function of (experiment name, seed, adapter key, time, stopped arms),
// so every server process, every reconnect and every report computes the same arm. The hash is
// stable across builds and platforms (std::hash is not): FNV-1a 64 (Fowler, Noll & Vo;
// offset basis 0xcbf29ce484222325, prime 0x100000001b3, IETF draft-eastlake-fnv) over the
// bytes, followed by the MurmurHash3 fmix64 finaliser (Appleby) so that every output bit
// depends on every input bit. Shuffles use SplitMix64 (Steele, Lea & Flood, "Fast Splittable
// Pseudorandom Number Generators", OOPSLA 2014) seeded from that hash, with unbiased
// rejection sampling for bounded draws; neither depends on the standard library's
// implementation-defined distributions.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/policy/selectors.h"
#include "server/experiments/probe_schedule.h"

namespace rxfleet::experiments {

/// FNV-1a 64 of `bytes`.
uint64_t Fnv1a64(std::string_view bytes);

/// FNV-1a 64 followed by the fmix64 finaliser: the stable hash of assignment.
uint64_t StableHash64(std::string_view bytes);

/// SplitMix64: a small deterministic generator (same sequence on every platform).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  /// The next 64-bit value.
  uint64_t Next();
  /// A uniform value in [0, bound) without modulo bias; bound >= 1.
  uint64_t Below(uint64_t bound);

 private:
  uint64_t state_;
};

/// The fleet-unique key of an adapter: "host_id/adapter_id". Adapter ids are unique per host
/// only; host ids never contain '/'. Windows and assignments use this key.
std::string AdapterKey(std::string_view host_id, std::string_view adapter_id);

/// An arm taken out of one segment (by a guardrail or an operator). Adapters of that segment
/// scheduled on the arm run the control arm instead.
struct StoppedArm {
  std::string arm;
  /// Segment values aligned with Experiment::segment_keys; empty = every segment.
  std::vector<std::string> segment;
  std::string reason;   ///< CamelCase, e.g. "GuardrailTripped", "StoppedByUser"
  std::string message;  ///< human detail, e.g. "rx_drop_ratio 0.857 (lower bound 0.81) > 0.05"
  absl::Time time;      ///< when it was stopped

  friend bool operator==(const StoppedArm&, const StoppedArm&) = default;
};

/// True if `arm` is stopped for adapters of `segment` (an entry for that segment or for every
/// segment).
bool IsStopped(std::span<const StoppedArm> stopped, std::string_view arm,
               const std::vector<std::string>& segment);

/// What an adapter runs at one point in time.
struct Assignment {
  size_t arm_index = 0;  ///< index into Experiment::arms of the arm in effect
  std::string arm;       ///< its name
  /// The arm the design scheduled; differs from arm_index when that arm is stopped in the
  /// adapter's segment and the adapter was sent to control.
  size_t scheduled_arm_index = 0;
  bool sent_to_control = false;
  uint32_t period_index = 0;  ///< switchback period from the start, 0-based; 0 for parallel
  absl::Time period_start;    ///< start of the period (parallel: of the experiment)
  absl::Time period_end;      ///< end of the period, never after the experiment's end
  absl::Time burn_in_end;     ///< period_start + burn_in (at most period_end)
  bool in_burn_in = false;    ///< the time lies in [period_start, burn_in_end)
  /// Experiments with a probe: the adapter's turn in the probe plan (ProbePlan); unset when
  /// the experiment has none or the adapter is not in the plan yet (it then runs no probe).
  /// Set by the server's controller, never by Assigner.
  std::optional<ProbeTurn> probe;
};

/// Computes assignments of one experiment started at a known time.
///
/// Parallel: arm = the arm whose cumulative-weight range holds StableHash64("parallel" NUL
/// name NUL seed NUL key) mod (sum of weights); the same for the whole experiment.
/// Switchback: time is cut into periods of period_length from `start`; period k belongs to
/// block k / W (W = sum of weights) at position k mod W. Each block is a Fisher–Yates shuffle
/// of the arm list in which arm i appears weight_i times, seeded with StableHash64(
/// "switchback" NUL name NUL seed NUL key NUL block): every adapter runs every arm in
/// proportion to its weight in every block, in its own random order (cf. Bojinov,
/// Simchi-Levi & Zhao, "Design and Analysis of Switchback Experiments", Management Science
/// 69(7), 2023). The first burn_in of every period (parallel: of the experiment) is burn-in;
/// reports discard its windows.
class Assigner {
 public:
  /// Errors: InvalidArgument when ValidateExperiment fails or `start` is infinite.
  static absl::StatusOr<Assigner> Create(Experiment experiment, absl::Time start);

  const Experiment& experiment() const { return experiment_; }
  absl::Time start() const { return start_; }
  /// start + duration: the first instant after the experiment.
  absl::Time end() const { return start_ + experiment_.duration; }
  /// Number of periods: ceil(duration / period_length) for switchback (the last one may be
  /// shorter), 1 for parallel.
  uint32_t PeriodCount() const { return period_count_; }

  /// The period holding `time`. OutOfRange when time is before start or at/after end.
  absl::StatusOr<uint32_t> PeriodIndexAt(absl::Time time) const;
  /// Start and end of a period (end clamped to the experiment's end); period_index must be
  /// below PeriodCount().
  absl::Time PeriodStart(uint32_t period_index) const;
  absl::Time PeriodEnd(uint32_t period_index) const;

  /// The arm the design schedules for an adapter in a period, ignoring stops.
  size_t ScheduledArm(std::string_view adapter_key, uint32_t period_index) const;

  /// The assignment of an adapter at `time`, with stopped arms sent to control.
  /// `segment` are the adapter's segment values (SegmentValuesFor). Errors: OutOfRange when
  /// time is outside [start, end); InvalidArgument when `segment` does not have one value
  /// per segment key.
  absl::StatusOr<Assignment> Assign(std::string_view adapter_key,
                                    const std::vector<std::string>& segment, absl::Time time,
                                    std::span<const StoppedArm> stopped) const;

  /// For bundle building: nullopt when the experiment's selector does not match the adapter,
  /// else Assign(AdapterKey(adapter.host, adapter.adapter_id), SegmentValuesFor(...), ...).
  /// Errors as Assign.
  absl::StatusOr<std::optional<Assignment>> AssignAdapter(
      const common::AdapterAttributes& adapter, absl::Time time,
      std::span<const StoppedArm> stopped) const;

 private:
  Assigner(Experiment experiment, absl::Time start);

  Experiment experiment_;
  absl::Time start_;
  uint32_t period_count_ = 1;
  uint32_t total_weight_ = 0;
  std::vector<uint32_t> cumulative_weights_;  ///< cumulative_weights_[i] = w_0 + ... + w_i
};

}  // namespace rxfleet::experiments
