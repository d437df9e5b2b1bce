#pragma once

// The HoldTuning document: which holds to try on which adapters, what to optimise, under which
// guardrails and with how much exploration (docs/EXPERIMENTS.md, "Tuning a hold"). Its API form
// and conversion: proto/rxfleet/v1/tuning.proto, common/proto/tuning.h.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "common/experiment/metric.h"
#include "common/policy/policy.h"

namespace rxfleet::tuning {

/// Document identity.
inline constexpr std::string_view kHoldTuningApiVersion = "rxfleet/v1";
inline constexpr std::string_view kHoldTuningKind = "HoldTuning";

/// Limits and defaults of the document.
inline constexpr size_t kMaxHoldTuningInputBytes = 1 << 20;  // 1 MiB per input text
inline constexpr size_t kMaxHoldTuningDocuments = 100;       // per input text
inline constexpr size_t kMinCandidates = 2;
inline constexpr size_t kMaxCandidates = 16;
inline constexpr double kDefaultAdapterShare = 0.2;
inline constexpr double kMaxAdapterShare = 0.5;
inline constexpr double kDefaultRecheckShare = 0.05;
inline constexpr double kDefaultMinEffect = 0.02;
inline constexpr uint64_t kMaxExplorationWindows = 1000000000;
/// Longest period: the comparison of all candidates must fit one experiment's 90-day limit.
inline constexpr absl::Duration kMaxTuningPeriodLength = absl::Hours(24);

/// Which way the objective should move.
enum class Direction : uint8_t {
  kMaximize,
  kMinimize,
};

/// "maximize" or "minimize".
std::string_view DirectionName(Direction direction);

/// The metric to optimise and its direction.
struct Objective {
  experiments::Metric metric = experiments::Metric::kRxThroughputBps;
  Direction direction = Direction::kMaximize;
  friend bool operator==(const Objective&, const Objective&) = default;
};

/// How much of a segment may be exposed to challengers.
struct Budget {
  /// Share of a segment's adapters running a challenger at any time, in (0, 0.5].
  double adapter_share = kDefaultAdapterShare;
  /// Windows (one adapter, one windowLength) on challengers per segment and exploration, in
  /// [MinExplorationWindows(), 1e9]. Burn-in windows on a challenger count.
  uint64_t max_windows = 0;
  friend bool operator==(const Budget&, const Budget&) = default;
};

/// A validated HoldTuning (inner code trusts it).
///
/// Document shape (YAML or JSON; several YAML documents may be separated by `---`):
///   apiVersion: rxfleet/v1
///   kind: HoldTuning
///   metadata:
///     name: hold-usb3            # [a-z0-9-], 1..63, starts/ends alphanumeric
///     labels: {team: edge}       # optional
///     resourceVersion: "3"       # optional, set by the server
///   spec:
///     selector: {chips: [rtl8922au]}     # optional, as in RxAggPolicy and Experiment
///     segments: [usb_speed, board]       # optional, as in Experiment
///     candidates: [32us, 64us, 128us, 256us, 512us, 1024us]  # required, 2..16 unique holds
///     objective: {metric: rx_throughput_bps, direction: maximize}   # required
///     guardrails:                        # optional, as in Experiment
///       - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
///     budget: {adapterShare: 0.2, maxWindows: 20000}   # required; adapterShare default 0.2
///     minEffect: 0.02                    # optional, relative, (0, 1), default 0.02
///     windowLength: 60s                  # optional, default 60s, whole seconds in [1s, 1h]
///     periodLength: 30m                  # required, multiple of windowLength, <= 24h
///     burnIn: 5m                         # optional, default 0
///     autoApply: false                   # optional, default false
///     recheckShare: 0.05                 # optional, [0, 0.5], default 0.05; 0 = no recheck
///     minAdaptersPerArm: 3               # optional, 2..100000, default 3
///     minWindowsPerArm: 10               # optional, 1..10000000, default 10
///
/// Rules beyond the shapes: candidates pass ParseHoldUs (multiples of 32 µs, 0..8160 µs) and,
/// as experiment arms do, common::CheckSettingsForSelector for every register layout the
/// selector can match; objective and guardrail metrics are not probe_* metrics (HoldTuning
/// runs no active probe); the direction is the metric's own (HigherIsBetter: maximize
/// throughput, minimize RTT, drops, loss and CPU); the switchback timing rules of
/// experiments (CheckSwitchbackPeriod); maxWindows >= MinExplorationWindows(), so every
/// candidate gets at least minAdaptersPerArm periods in every round. Observe-only adapters
/// (rtw88, mt76) are refused at planning time (server/tuning/planner.h), as experiments
/// refuse them at their API.
struct HoldTuning {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string resource_version;
  common::Selector selector;
  std::vector<std::string> segment_keys;
  std::vector<uint32_t> candidates_us;  ///< document order, µs
  Objective objective;
  std::vector<experiments::Guardrail> guardrails;
  Budget budget;
  double min_effect = kDefaultMinEffect;  ///< relative: 0.02 = 2 %
  absl::Duration window_length = experiments::kDefaultWindowLength;
  absl::Duration period_length;
  absl::Duration burn_in;
  bool auto_apply = false;
  double recheck_share = kDefaultRecheckShare;
  uint32_t min_adapters_per_arm = experiments::kDefaultMinAdaptersPerArm;
  uint32_t min_windows_per_arm = experiments::kDefaultMinWindowsPerArm;
  /// Where the document came from, for messages: "file.yaml:3". Not part of the document.
  std::string source;

  /// periodLength / windowLength (>= 1 after validation).
  uint32_t WindowsPerPeriod() const;

  friend bool operator==(const HoldTuning&, const HoldTuning&) = default;
};

/// Rounds of exploration with `challengers` challengers: ceil(log2(challengers)) rounds of
/// Sequential Halving plus one confirmation round of the survivor; 0 for no challengers.
uint32_t ExplorationRounds(size_t challengers);

/// The smallest budget.max_windows the document accepts: rounds * candidates *
/// minAdaptersPerArm * WindowsPerPeriod, with rounds = ExplorationRounds(candidates).
uint64_t MinExplorationWindows(const HoldTuning& tuning);

/// Parses one or many HoldTuning documents (YAML, or JSON parsed as YAML). Strict; returns
/// InvalidArgument "source:line:column: field: message" for malformed YAML, input over 1 MiB,
/// more than 100 documents, apiVersion/kind other than rxfleet/v1 HoldTuning (checked first),
/// unknown, duplicate or missing fields, wrong types, every rule above (at the offending
/// value; maxWindows' minimum at spec.budget.maxWindows) and duplicate metadata.name.
/// Empty documents are skipped.
absl::StatusOr<std::vector<HoldTuning>> ParseHoldTuningDocuments(std::string_view text,
                                                                 std::string_view source_name);

/// Exactly one document; InvalidArgument as above and when the text holds none or several.
absl::StatusOr<HoldTuning> ParseHoldTuning(std::string_view text, std::string_view source_name);

/// Serialises a tuning as one YAML document (without `---`), every field explicit.
/// ParseHoldTuning(HoldTuningToYaml(t)) yields t again (except `source`).
std::string HoldTuningToYaml(const HoldTuning& tuning);

/// The parser's rules on a value built from data: InvalidArgument
/// "hold tuning 'name': field: message".
absl::Status ValidateHoldTuning(const HoldTuning& tuning);

}  // namespace rxfleet::tuning
