#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/chips/rx_agg.h"
#include "common/experiment/metric.h"
#include "common/policy/policy.h"
#include "common/policy/selectors.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::experiments {

/// Document identity of an experiment.
inline constexpr std::string_view kExperimentApiVersion = "rxfleet/v1";
inline constexpr std::string_view kExperimentKind = "Experiment";

/// Limits and defaults of the Experiment document (see docs/EXPERIMENTS.md).
inline constexpr size_t kMaxExperimentInputBytes = 1 << 20;  // 1 MiB per input text
inline constexpr size_t kMaxExperimentDocuments = 100;       // per input text
inline constexpr size_t kMaxArms = 16;
inline constexpr uint32_t kMaxArmWeight = 100;
inline constexpr size_t kMaxSegmentKeys = 4;
inline constexpr size_t kMaxGuardrails = 32;
inline constexpr uint32_t kDefaultMinAdaptersPerArm = 3;
inline constexpr uint32_t kDefaultMinWindowsPerArm = 10;
inline constexpr uint32_t kMaxMinAdaptersPerArm = 100000;
inline constexpr uint32_t kMaxMinWindowsPerArm = 10000000;
inline constexpr absl::Duration kDefaultWindowLength = absl::Seconds(60);
inline constexpr absl::Duration kMinWindowLength = absl::Seconds(1);
inline constexpr absl::Duration kMaxWindowLength = absl::Hours(1);
inline constexpr absl::Duration kMaxExperimentDuration = absl::Hours(24 * 90);
/// Margin added to a probe's duration to form its slot in a window (clock offsets between
/// agents, iperf3 connection set-up): a probe needs duration + kProbeSlotMargin <=
/// windowLength, and probes sharing an iperf3 server start at least that far apart.
inline constexpr absl::Duration kProbeSlotMargin = absl::Seconds(2);

/// Segment keys computed from the adapter rather than from host labels.
inline constexpr std::string_view kSegmentUsbSpeed = "usb_speed";  ///< UsbSpeedName
inline constexpr std::string_view kSegmentChip = "chip";           ///< chip table name
inline constexpr std::string_view kSegmentHost = "host";           ///< host id

/// How adapters are exposed to the arms.
enum class Design : uint8_t {
  /// Each adapter gets one arm for the whole experiment; arms are compared across adapters.
  kParallel,
  /// Each adapter alternates between the arms period by period in a randomised, balanced
  /// order; arms are compared within adapters.
  kSwitchback,
};

/// "parallel" or "switchback".
std::string_view DesignName(Design design);

/// One variant under test.
struct Arm {
  std::string name;                ///< [a-z0-9-], 1..63 characters, unique in the experiment
  common::RxAggSettings settings;  ///< at least one field; forceEnable is not allowed
  uint32_t weight = 1;             ///< 1..100: share of adapters (parallel) or periods (switchback)

  friend bool operator==(const Arm&, const Arm&) = default;
};

/// Direction of a guardrail, written as the condition the metric must keep.
enum class GuardrailOp : uint8_t {
  kAtMost,   ///< "<=": breached when the metric is credibly above the threshold
  kAtLeast,  ///< ">=": breached when the metric is credibly below the threshold
};

/// "<=" or ">=".
std::string_view GuardrailOpSymbol(GuardrailOp op);

/// A safety stop, checked per segment and arm (see server/experiments/guardrails.h).
struct Guardrail {
  Metric metric = Metric::kRxDropRatio;
  GuardrailOp op = GuardrailOp::kAtMost;
  double threshold = 0;  ///< in the metric's base unit (bit/s, s, ratio)
  /// Adapters an arm needs in a segment before the guardrail can trip, >= 2; unset = the
  /// experiment's min_adapters_per_arm.
  std::optional<uint32_t> min_adapters;
  /// Valid windows an arm needs in a segment before the guardrail can trip, >= 1; unset = the
  /// experiment's min_windows_per_arm.
  std::optional<uint32_t> min_windows;

  friend bool operator==(const Guardrail&, const Guardrail&) = default;
};

/// A validated experiment (inner code trusts it).
///
/// Document shape (YAML or JSON; several YAML documents may be separated by `---`):
///   apiVersion: rxfleet/v1
///   kind: Experiment
///   metadata:
///     name: hold-usb3            # [a-z0-9-], 1..63, starts/ends alphanumeric
///     labels: {team: edge}       # optional
///     resourceVersion: "3"       # optional, set by the server
///   spec:
///     selector: {usbSpeeds: [super], chips: [rtl8922au]}  # optional, as in RxAggPolicy
///     arms:                      # 2..16, names unique
///       - {name: control, settings: {hold: 1024us}, weight: 1}   # weight 1..100, default 1
///       - {name: short, settings: {hold: 32us}}
///     control: control           # optional, default the first arm
///     design: switchback         # required: parallel | switchback
///     duration: 24h              # required, (0, 90 days]
///     windowLength: 60s          # optional, default 60s, whole seconds in [1s, 1h]
///     periodLength: 30m          # switchback only and required there
///     burnIn: 5m                 # optional, default 0
///     primaryMetric: rx_throughput_bps   # required, from the metric catalogue (metric.h)
///     secondaryMetrics: [rtt_p99_seconds]  # optional, unique, not the primary
///     guardrails:                # optional, at most 32, (metric, op) unique
///       - {metric: rx_drop_ratio, op: "<=", threshold: 0.05, minAdapters: 3, minWindows: 10}
///     segments: [usb_speed, board]   # optional, <= 4 unique keys: usb_speed, chip, host or
///                                    # a host label key
///     minAdaptersPerArm: 3       # optional, 2..100000, default 3
///     minWindowsPerArm: 10       # optional, 1..10000000, default 10
///     priority: 0                # optional, -1000..1000, as PolicySpec.priority
///     seed: 0                    # optional, uint64; 0 lets the server choose
///     probe:                     # required iff a primary, secondary or guardrail metric is
///       server: 10.0.0.1:5201    #   a probe_* metric; iperf3 server host[:port], required
///       protocol: tcp            #   tcp (default) | udp
///       direction: reverse       #   reverse (default, the adapter receives) | forward
///       parallelStreams: 1       #   1..16, default 1
///       duration: 10s            #   whole seconds in 1s..60s, default 10s
///       udpRate: 50Mbit/s        #   UDP only and required there: bit/s, 1 kbit/s..10 Gbit/s
/// Durations use Go/Abseil syntax ("90s", "5m", "1h30m", "500ms").
///
/// Cross-field rules: `control` names an arm; windowLength <= duration; switchback:
/// windowLength <= periodLength <= duration, periodLength a multiple of windowLength,
/// burnIn + windowLength <= periodLength (every period keeps at least one window), and
/// duration >= periodLength * (sum of weights) (every adapter sees one full balanced block);
/// parallel: burnIn + windowLength <= duration; each arm's settings pass
/// ValidateRxAggSettings and, for every register layout the selector can match,
/// ValidateRxAggSettingsForLayout. Probe: ValidateProbeSpec (interval is ignored);
/// probe.duration + kProbeSlotMargin <= windowLength; probe_rx_throughput_bps needs direction
/// reverse, probe_tx_throughput_bps forward, probe_udp_* protocol udp, probe_tcp_retransmits
/// tcp.
struct Experiment {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string resource_version;  ///< metadata.resourceVersion, empty locally
  common::Selector selector;
  std::vector<Arm> arms;
  std::string control_arm;  ///< always set: the first arm's name when the document omits it
  Design design = Design::kParallel;
  absl::Duration duration;
  absl::Duration window_length = kDefaultWindowLength;
  absl::Duration period_length;  ///< switchback only; zero for parallel
  absl::Duration burn_in;
  Metric primary_metric = Metric::kRxThroughputBps;
  std::vector<Metric> secondary_metrics;
  std::vector<Guardrail> guardrails;
  std::vector<std::string> segment_keys;
  uint32_t min_adapters_per_arm = kDefaultMinAdaptersPerArm;
  uint32_t min_windows_per_arm = kDefaultMinWindowsPerArm;
  int priority = 0;
  uint64_t seed = 0;
  /// The active probe every adapter under test runs once per window (after burn-in); set iff
  /// a reported or guarded metric is a probe metric (IsProbeMetric). Its interval is unused
  /// and always kDefaultProbeInterval.
  std::optional<common::ProbeSpec> probe;
  /// Where the experiment came from, for messages: "file.yaml:3" or "server". Not part of
  /// the document.
  std::string source;

  /// Index of control_arm in `arms`; arms.size() if absent (never after validation).
  size_t ControlIndex() const;
  /// Index of the arm named `name`, or nullopt.
  std::optional<size_t> ArmIndex(std::string_view name) const;
  /// Sum of the arms' weights: the number of periods in one switchback block.
  uint32_t TotalWeight() const;
  /// Number of switchback periods, ceil(duration / period_length) (the last one may be
  /// shorter); 1 for parallel.
  uint32_t PeriodCount() const;
  /// The primary metric followed by the secondary metrics, in document order.
  std::vector<Metric> ReportedMetrics() const;
  /// Adapters a guardrail needs (its own or the experiment's minimum).
  uint32_t MinAdapters(const Guardrail& guardrail) const;
  /// Windows a guardrail needs (its own or the experiment's minimum).
  uint32_t MinWindows(const Guardrail& guardrail) const;
  /// True when the primary, a secondary or a guardrail metric is a probe metric.
  bool NamesProbeMetric() const;

  friend bool operator==(const Experiment&, const Experiment&) = default;
};

/// Parses one or many Experiment documents (YAML, or JSON which is parsed as YAML).
/// `source_name` prefixes every message and Experiment::source.
/// Strict; returns InvalidArgument with "source:line:column: field: message" for:
///  - malformed YAML, input over 1 MiB, more than 100 documents;
///  - apiVersion other than rxfleet/v1 or kind other than Experiment (checked first);
///  - unknown or duplicate fields, missing required fields, wrong types;
///  - every rule of the document shape above (the position is the offending field's value;
///    for cross-field rules the later field, e.g. periodLength for "window must fit the
///    period", control for an unknown control arm);
///  - two documents with the same metadata.name.
/// Empty documents are skipped; empty input yields an empty vector.
absl::StatusOr<std::vector<Experiment>> ParseExperimentDocuments(std::string_view text,
                                                                 std::string_view source_name);

/// Parses exactly one Experiment document. InvalidArgument as above, and when the text holds
/// no document or more than one.
absl::StatusOr<Experiment> ParseExperiment(std::string_view text, std::string_view source_name);

/// Validates an experiment built from data (e.g. received through the API) with the parser's
/// rules. Returns InvalidArgument "experiment 'name': field: message".
absl::Status ValidateExperiment(const Experiment& experiment);

/// Serialises an experiment as one YAML document (without `---`), every field explicit.
/// ParseExperiment(ExperimentToYaml(e)) yields e again (except `source`).
std::string ExperimentToYaml(const Experiment& experiment);

/// The segment an adapter belongs to: one value per experiment.segment_keys entry, in the
/// same order. usb_speed -> UsbSpeedName, chip -> chip name, host -> host id, any other key ->
/// the host label's value. Missing values are "" (reported as "(none)").
std::vector<std::string> SegmentValuesFor(const Experiment& experiment,
                                          const common::AdapterAttributes& adapter);

/// Segment values by key, e.g. {usb_speed: super, board: pi5}. `values` is aligned with
/// `keys`; extra values are ignored, missing ones are "".
std::map<std::string, std::string> SegmentMap(const std::vector<std::string>& keys,
                                              const std::vector<std::string>& values);

/// Human form: "usb_speed=super, board=pi5"; "all adapters" when there are no keys.
std::string FormatSegment(const std::vector<std::string>& keys,
                          const std::vector<std::string>& values);

}  // namespace rxfleet::experiments
