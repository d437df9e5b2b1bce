#include "cli/output/format.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/probe/probe_spec.h"
#include "common/proto/probe.h"
#include "common/units.h"

namespace rxfleet::cli {
namespace {

// "ADAPTER_STATE_DISABLED_BY_DRIVER" with prefix "ADAPTER_STATE_" -> "disabled_by_driver".
std::string EnumWord(const std::string& full_name, absl::string_view prefix) {
  absl::string_view name = full_name;
  if (absl::StartsWith(name, prefix)) name.remove_prefix(prefix.size());
  if (name.empty() || name == "UNSPECIFIED") return "unknown";
  return absl::AsciiStrToLower(name);
}

std::string Capitalised(std::string word) {
  if (!word.empty()) word[0] = absl::ascii_toupper(static_cast<unsigned char>(word[0]));
  return word;
}

// "10s", "1h", "1h30m": absl::FormatDuration without zero tails.
std::string ShortDuration(absl::Duration d) {
  std::string text = absl::FormatDuration(d);
  if (absl::EndsWith(text, "m0s")) text.resize(text.size() - 2);
  if (absl::EndsWith(text, "h0m")) text.resize(text.size() - 2);
  return text;
}

}  // namespace

absl::Time AsTime(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return absl::InfinitePast();
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

std::string FormatAge(absl::Time then, absl::Time now) {
  if (then == absl::InfinitePast()) return "<unknown>";
  const int64_t seconds = std::max<int64_t>(0, absl::ToInt64Seconds(now - then));
  if (seconds < 120) return absl::StrCat(seconds, "s");
  const int64_t minutes = seconds / 60;
  if (minutes < 120) return absl::StrCat(minutes, "m");
  const int64_t hours = minutes / 60;
  if (hours < 48) return absl::StrCat(hours, "h");
  return absl::StrCat(hours / 24, "d");
}

std::string FormatTimeWithAge(const google::protobuf::Timestamp& timestamp, absl::Time now) {
  const absl::Time t = AsTime(timestamp);
  if (t == absl::InfinitePast()) return "<none>";
  return absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone()),
                      t > now ? absl::StrCat(" (in ", FormatAge(now, t), ")")
                              : absl::StrCat(" (", FormatAge(t, now), " ago)"));
}

std::string UsbSpeedWord(v1::UsbSpeed speed) {
  return EnumWord(v1::UsbSpeed_Name(speed), "USB_SPEED_");
}

std::string AdapterStateWord(v1::AdapterState state) {
  return EnumWord(v1::AdapterState_Name(state), "ADAPTER_STATE_");
}

std::string LayoutWord(v1::RxAggLayout layout) {
  return EnumWord(v1::RxAggLayout_Name(layout), "RX_AGG_LAYOUT_");
}

std::string EventTypeWord(v1::EventType type) {
  return Capitalised(EnumWord(v1::EventType_Name(type), "EVENT_TYPE_"));
}

std::string ConditionStatusWord(v1::ConditionStatus status) {
  return Capitalised(EnumWord(v1::ConditionStatus_Name(status), "CONDITION_STATUS_"));
}

std::string FormatVidPid(uint32_t vid, uint32_t pid) {
  return absl::StrFormat("%04x:%04x", vid, pid);
}

std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "<none>";
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string FormatSegmentValues(const google::protobuf::RepeatedPtrField<std::string>& keys,
                                const google::protobuf::Map<std::string, std::string>& segment) {
  if (segment.empty()) return "<all>";
  std::vector<std::string> parts;
  std::map<std::string, std::string> rest(segment.begin(), segment.end());
  for (const std::string& key : keys) {
    auto it = rest.find(key);
    if (it == rest.end()) continue;
    parts.push_back(absl::StrCat(it->first, "=", it->second));
    rest.erase(it);
  }
  for (const auto& [key, value] : rest) parts.push_back(absl::StrCat(key, "=", value));
  return absl::StrJoin(parts, ",");
}

const std::vector<std::string>& SettingsFieldNames() {
  static const auto* const kNames = new std::vector<std::string>{
      "hold_us", "count_threshold", "buffer_kib", "enable", "force_enable"};
  return *kNames;
}

std::optional<std::string> FormatSettingsField(const v1::RxAggSettings& settings,
                                               std::string_view field) {
  if (field == "hold_us" && settings.has_hold_us()) {
    return common::FormatHoldUs(settings.hold_us());
  }
  if (field == "count_threshold" && settings.has_count_threshold()) {
    return absl::StrCat(settings.count_threshold());
  }
  if (field == "buffer_kib" && settings.has_buffer_kib()) {
    return absl::StrCat(settings.buffer_kib(), "KiB");
  }
  if (field == "enable" && settings.has_enable()) return settings.enable() ? "true" : "false";
  if (field == "force_enable" && settings.has_force_enable()) {
    return settings.force_enable() ? "true" : "false";
  }
  return std::nullopt;
}

std::string FormatSettings(const v1::RxAggSettings& settings) {
  static constexpr std::pair<const char*, const char*> kShort[] = {
      {"hold_us", "hold"},
      {"count_threshold", "count"},
      {"buffer_kib", "buffer"},
      {"enable", "enable"},
      {"force_enable", "force_enable"}};
  std::vector<std::string> parts;
  for (const auto& [field, label] : kShort) {
    if (auto value = FormatSettingsField(settings, field)) {
      parts.push_back(absl::StrCat(label, "=", *value));
    }
  }
  return parts.empty() ? "<none>" : absl::StrJoin(parts, ",");
}

std::string FormatBitRate(uint64_t bps) {
  if (bps >= 1'000'000'000) return absl::StrFormat("%gGbit/s", static_cast<double>(bps) / 1e9);
  if (bps >= 1'000'000) return absl::StrFormat("%gMbit/s", static_cast<double>(bps) / 1e6);
  return absl::StrFormat("%gkbit/s", static_cast<double>(bps) / 1e3);
}

std::string FormatProbeShort(const v1::ProbeSpec& probe) {
  absl::StatusOr<common::ProbeSpec> spec = common::ProbeSpecFromProto(probe, "probe");
  if (!spec.ok()) return absl::StrCat("probe ", OrNone(probe.server()), " (invalid)");
  std::string out =
      absl::StrCat("probe ", common::ProbeServerAddress(*spec),
                   spec->protocol == common::ProbeProtocol::kUdp ? " UDP" : " TCP",
                   spec->direction == common::ProbeDirection::kForward ? " upload" : " download");
  if (spec->protocol == common::ProbeProtocol::kUdp) {
    absl::StrAppend(&out, " ", FormatBitRate(spec->udp_rate_bps));
  }
  if (spec->parallel_streams > 1) absl::StrAppend(&out, " x", spec->parallel_streams);
  absl::StrAppend(&out, " ", ShortDuration(spec->duration), "/", ShortDuration(spec->interval));
  return out;
}

std::string FormatSettingsAndProbe(const v1::PolicySpec& spec) {
  const std::string settings = FormatSettings(spec.settings());
  if (!spec.has_probe()) return settings;
  const std::string probe = FormatProbeShort(spec.probe());
  return settings == "<none>" ? probe : absl::StrCat(settings, "; ", probe);
}

std::string FormatSelector(const v1::AdapterSelector& selector) {
  std::vector<std::string> parts;
  std::map<std::string, std::string> labels(selector.match_labels().begin(),
                                            selector.match_labels().end());
  for (const auto& [key, value] : labels) parts.push_back(absl::StrCat(key, "=", value));
  for (int speed : selector.usb_speeds()) {
    parts.push_back(absl::StrCat("usb=", UsbSpeedWord(static_cast<v1::UsbSpeed>(speed))));
  }
  for (const auto& chip : selector.chips()) parts.push_back(absl::StrCat("chip=", chip));
  for (const auto& vid_pid : selector.vid_pids()) {
    parts.push_back(absl::StrCat("vid_pid=", vid_pid));
  }
  for (const auto& adapter : selector.adapters()) {
    parts.push_back(absl::StrCat("adapter=", adapter));
  }
  return parts.empty() ? "<all>" : absl::StrJoin(parts, ",");
}

std::string ProvenanceShort(const v1::Provenance& provenance) {
  switch (provenance.source()) {
    case v1::SETTING_SOURCE_SERVER_POLICY:
      return provenance.name();
    case v1::SETTING_SOURCE_LOCAL_FILE:
      return absl::StrCat("local:", provenance.name());
    case v1::SETTING_SOURCE_EXPERIMENT:
      return absl::StrCat("experiment:", provenance.name(), "/", provenance.arm());
    case v1::SETTING_SOURCE_BUILT_IN_DEFAULT:
      return "builtin-default";
    case v1::SETTING_SOURCE_DRIVER:
      return "driver";
    default:
      return "-";
  }
}

std::string ProvenanceLong(const v1::Provenance& provenance) {
  std::vector<std::string> details;
  if (provenance.source() != v1::SETTING_SOURCE_BUILT_IN_DEFAULT &&
      provenance.source() != v1::SETTING_SOURCE_DRIVER) {
    details.push_back(absl::StrCat("priority ", provenance.priority()));
  }
  if (provenance.generation() != 0) {
    details.push_back(absl::StrCat("generation ", provenance.generation()));
  }
  if (provenance.bundle_version() != 0) {
    details.push_back(absl::StrCat("bundle ", provenance.bundle_version()));
  }
  const std::string suffix =
      details.empty() ? "" : absl::StrCat(" (", absl::StrJoin(details, ", "), ")");
  switch (provenance.source()) {
    case v1::SETTING_SOURCE_SERVER_POLICY:
      return absl::StrCat("server policy ", provenance.name(), suffix);
    case v1::SETTING_SOURCE_LOCAL_FILE:
      return absl::StrCat("local file ", provenance.file().empty() ? "?" : provenance.file(),
                          ", policy ", provenance.name(), suffix);
    case v1::SETTING_SOURCE_EXPERIMENT:
      return absl::StrCat("experiment ", provenance.name(), " arm ", provenance.arm(), suffix);
    case v1::SETTING_SOURCE_BUILT_IN_DEFAULT:
      return absl::StrCat("built-in default", suffix);
    case v1::SETTING_SOURCE_DRIVER:
      return "driver (no layer sets it)";
    default:
      return "unknown";
  }
}

}  // namespace rxfleet::cli

namespace rxfleet::cli {

std::string ExperimentPhaseWord(v1::ExperimentPhase phase) {
  return Capitalised(EnumWord(v1::ExperimentPhase_Name(phase), "EXPERIMENT_PHASE_"));
}

std::string HoldTuningPhaseWord(v1::HoldTuningPhase phase) {
  return Capitalised(EnumWord(v1::HoldTuningPhase_Name(phase), "HOLD_TUNING_PHASE_"));
}

std::string FormatObjective(const v1::HoldTuningSpec& spec) {
  if (spec.objective_metric().empty()) return "<none>";
  std::string direction;
  switch (spec.objective_direction()) {
    case v1::TUNING_DIRECTION_MAXIMIZE:
      direction = "maximize";
      break;
    case v1::TUNING_DIRECTION_MINIMIZE:
      direction = "minimize";
      break;
    default:
      direction = "<unspecified direction>";
  }
  return absl::StrCat(direction, " ", spec.objective_metric());
}

std::string FormatHolds(const google::protobuf::RepeatedField<uint32_t>& holds_us) {
  if (holds_us.empty()) return "<none>";
  std::vector<std::string> holds;
  for (uint32_t hold : holds_us) holds.push_back(common::FormatHoldUs(hold));
  return absl::StrJoin(holds, ",");
}

std::string ExperimentDesignWord(v1::ExperimentDesign design) {
  return EnumWord(v1::ExperimentDesign_Name(design), "EXPERIMENT_DESIGN_");
}

std::string FormatProtoDuration(const google::protobuf::Duration& duration) {
  const absl::Duration d = absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
  if (d == absl::ZeroDuration()) return "-";
  std::string text = absl::FormatDuration(d);
  // absl prints "1h30m0s" and "2h0m0s": drop the zero tails.
  if (absl::EndsWith(text, "m0s")) text.resize(text.size() - 2);
  if (absl::EndsWith(text, "h0m")) text.resize(text.size() - 2);
  return text;
}

void PrintLabelled(std::ostream& out, absl::string_view label, absl::string_view value,
                   size_t label_width) {
  std::string line = absl::StrCat(label, ":");
  if (line.size() < label_width)
    line.resize(label_width, ' ');
  else
    line += ' ';
  out << line << value << '\n';
}

std::string OrNone(const std::string& s) { return s.empty() ? "<none>" : s; }

}  // namespace rxfleet::cli
