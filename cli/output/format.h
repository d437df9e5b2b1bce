#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/map.h"
#include "google/protobuf/timestamp.pb.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/common.pb.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/experiment.pb.h"
#include "rxfleet/v1/policy.pb.h"
#include "rxfleet/v1/probe.pb.h"
#include "rxfleet/v1/tuning.pb.h"

namespace rxfleet::cli {

// Small formatters shared by the table, describe and status printers. Units follow the
// product: holds in µs ("32µs"), buffers in KiB, times in UTC.

/// A protobuf timestamp as absl::Time; an unset (zero) timestamp is absl::InfinitePast().
absl::Time AsTime(const google::protobuf::Timestamp& timestamp);

/// kubectl-style age of `then` at `now`: "45s", "12m", "5h", "3d"; "<unknown>" for
/// InfinitePast; times in the future (clock skew) print "0s".
std::string FormatAge(absl::Time then, absl::Time now);

/// "2024-05-01T10:00:00Z (5m ago)" for a time at or before `now`, "2024-05-01T10:00:26Z (in
/// 26s)" for a later one (ends of periods, planned ends), "<none>" for an unset timestamp.
std::string FormatTimeWithAge(const google::protobuf::Timestamp& timestamp, absl::Time now);

/// USB speed as the field selector spells it: low, full, high, super, super_plus,
/// super_plus_x2; "unknown" for UNSPECIFIED.
std::string UsbSpeedWord(v1::UsbSpeed speed);

/// Adapter state in snake case as the field selector spells it: applied, pending, drifted,
/// asleep, disabled_by_driver, ...; "unknown" for UNSPECIFIED.
std::string AdapterStateWord(v1::AdapterState state);

/// Experiment phase as a word: "Pending", "Running", "Completed", "Stopped"; "Unknown" for
/// UNSPECIFIED.
std::string ExperimentPhaseWord(v1::ExperimentPhase phase);

/// Hold tuning phase as a word: "Running", "Stopped"; "Unknown" for UNSPECIFIED.
std::string HoldTuningPhaseWord(v1::HoldTuningPhase phase);

/// A tuning's objective as the document spells it: "maximize rx_throughput_bps";
/// "<none>" without a metric.
std::string FormatObjective(const v1::HoldTuningSpec& spec);

/// Holds in µs as a list: "32µs,64µs,128µs"; "<none>" when empty.
std::string FormatHolds(const google::protobuf::RepeatedField<uint32_t>& holds_us);

/// Experiment design: "parallel", "switchback"; "unknown" for UNSPECIFIED.
std::string ExperimentDesignWord(v1::ExperimentDesign design);

/// A protobuf duration as "90s", "1h", "1h30m", "500ms"; "-" for zero.
std::string FormatProtoDuration(const google::protobuf::Duration& duration);

/// Register layout: "v1", "v2", "v3", "unknown".
std::string LayoutWord(v1::RxAggLayout layout);

/// "Normal" / "Warning" / "Unknown".
std::string EventTypeWord(v1::EventType type);

/// "True" / "False" / "Unknown".
std::string ConditionStatusWord(v1::ConditionStatus status);

/// Lower-case hex USB id: "0bda:8912".
std::string FormatVidPid(uint32_t vid, uint32_t pid);

/// Labels sorted by key as "k=v,k2=v2"; "<none>" when empty.
std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels);

/// Segment values as "k=v,k2=v2" in the order of `keys` (the resource's segment keys, as
/// server messages order them), then any other keys sorted; "<all>" when empty.
std::string FormatSegmentValues(const google::protobuf::RepeatedPtrField<std::string>& keys,
                                const google::protobuf::Map<std::string, std::string>& segment);

/// The RxAggSettings field names in display order with their snake_case proto names:
/// hold_us, count_threshold, buffer_kib, enable, force_enable.
const std::vector<std::string>& SettingsFieldNames();

/// One settings field for display ("32µs", "255", "20KiB", "true"); nullopt when unset.
/// `field` is a snake_case RxAggSettings field name; unknown names yield nullopt.
std::optional<std::string> FormatSettingsField(const v1::RxAggSettings& settings,
                                               std::string_view field);

/// Every set field as "hold=32µs,count=255,buffer=20KiB,enable=true"; "<none>" if none is set.
std::string FormatSettings(const v1::RxAggSettings& settings);

/// A rate in bit/s without spaces, for table cells and probe lines: "50Mbit/s", "1.5Gbit/s",
/// "800kbit/s" (%g of the value in the largest unit it reaches, SI: 1 Mbit/s = 10^6 bit/s).
std::string FormatBitRate(uint64_t bps);

/// A policy's probe in one narrow table cell, defaults applied (common::ProbeSpecFromProto):
/// "probe 10.0.0.1:5201 TCP download 10s/1h" (test length / interval between runs), with the
/// UDP rate per stream and the streams when above one: "probe iperf.lab:5201 UDP upload
/// 50Mbit/s x4 10s/1h". A spec the CLI cannot read shows as "probe SERVER (invalid)".
std::string FormatProbeShort(const v1::ProbeSpec& probe);

/// A policy's SETTINGS cell: FormatSettings, then "; " and FormatProbeShort when the policy
/// carries a probe; a probe-only policy shows the probe alone.
std::string FormatSettingsAndProbe(const v1::PolicySpec& spec);

/// Selector terms as "board=pi1,usb=high,chip=rtl8922au,vid_pid=0bda:8912,adapter=port-2-2";
/// "<all>" for an empty selector (it matches every adapter).
std::string FormatSelector(const v1::AdapterSelector& selector);

/// Short provenance for table columns: the policy name, "local:NAME", "experiment:NAME/ARM",
/// "builtin-default", "driver"; "-" when unknown.
std::string ProvenanceShort(const v1::Provenance& provenance);

/// Full provenance: "server policy pi1-long-hold (priority 100, generation 2, bundle 7)",
/// "local file /etc/rxfleet/policy.yaml, policy NAME (priority 5)", "experiment E arm A
/// (priority 10, bundle 7)", "built-in default", "driver (no layer sets it)".
std::string ProvenanceLong(const v1::Provenance& provenance);

/// Writes one "label: value" line of the `describe` and `status` layouts: "<label>:" padded
/// with spaces to `label_width` columns (at least one space after the colon), `value`, '\n'.
void PrintLabelled(std::ostream& out, absl::string_view label, absl::string_view value,
                   size_t label_width);

/// `s`, or "<none>" when it is empty.
std::string OrNone(const std::string& s);

}  // namespace rxfleet::cli
