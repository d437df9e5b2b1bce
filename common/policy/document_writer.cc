// Emitting the YAML documents (common/policy/document_reader.h).
#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/policy/document_reader.h"
#include "common/string_view_compat.h"
#include "common/units.h"

namespace rxfleet::common {

// ---------------------------------------------------------------------------------------------
// Emitting.

void EmitStringList(YAML::Emitter& out, std::string_view key, const std::vector<std::string>& items,
                    bool quoted) {
  out << YAML::Key << std::string(key) << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& item : items) {
    if (quoted) out << YAML::DoubleQuoted;
    out << item;
  }
  out << YAML::EndSeq;
}

void EmitLabels(YAML::Emitter& out, std::string_view key,
                const std::map<std::string, std::string>& labels) {
  out << YAML::Key << std::string(key) << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : labels) out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  out << YAML::EndMap;
}

void EmitSelector(YAML::Emitter& out, const Selector& selector) {
  if (selector.Empty()) return;
  out << YAML::Key << "selector" << YAML::Value << YAML::BeginMap;
  if (!selector.match_labels.empty()) EmitLabels(out, "matchLabels", selector.match_labels);
  if (!selector.usb_speeds.empty()) {
    std::vector<std::string> speeds;
    for (UsbSpeed speed : selector.usb_speeds) speeds.emplace_back(UsbSpeedName(speed));
    EmitStringList(out, "usbSpeeds", speeds, /*quoted=*/false);
  }
  if (!selector.chips.empty()) EmitStringList(out, "chips", selector.chips, /*quoted=*/false);
  if (!selector.vid_pids.empty()) {
    std::vector<std::string> ids;
    for (const VidPid& id : selector.vid_pids) ids.push_back(FormatVidPid(id.vid, id.pid));
    EmitStringList(out, "vidPids", ids, /*quoted=*/true);
  }
  if (!selector.adapters.empty()) {
    EmitStringList(out, "adapters", selector.adapters, /*quoted=*/true);
  }
  if (!selector.families.empty()) {
    EmitStringList(out, "families", selector.families, /*quoted=*/false);
  }
  out << YAML::EndMap;
}

void EmitSettingsFields(YAML::Emitter& out, const RxAggSettings& settings) {
  if (settings.hold_us) {
    out << YAML::Key << "hold" << YAML::Value << FormatHoldYaml(*settings.hold_us);
  }
  if (settings.count_threshold) {
    out << YAML::Key << "countThreshold" << YAML::Value << *settings.count_threshold;
  }
  if (settings.buffer_kib) {
    out << YAML::Key << "bufferKiB" << YAML::Value << *settings.buffer_kib;
  }
  if (settings.enable) {
    out << YAML::Key << "enable" << YAML::Value << YAML::TrueFalseBool << *settings.enable;
  }
  if (settings.force_enable) {
    out << YAML::Key << "forceEnable" << YAML::Value << YAML::TrueFalseBool << true;
  }
}

void EmitProbe(YAML::Emitter& out, const ProbeSpec& probe) {
  out << YAML::Key << "probe" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << YAML::DoubleQuoted << ProbeServerAddress(probe);
  out << YAML::Key << "protocol" << YAML::Value << std::string(ProbeProtocolName(probe.protocol));
  out << YAML::Key << "direction" << YAML::Value
      << std::string(ProbeDirectionName(probe.direction));
  out << YAML::Key << "parallelStreams" << YAML::Value << probe.parallel_streams;
  out << YAML::Key << "duration" << YAML::Value << absl::FormatDuration(probe.duration);
  if (probe.protocol == ProbeProtocol::kUdp) {
    out << YAML::Key << "udpRate" << YAML::Value << absl::StrCat(probe.udp_rate_bps, "bit/s");
  }
  out << YAML::Key << "interval" << YAML::Value << absl::FormatDuration(probe.interval);
  out << YAML::EndMap;
}

}  // namespace rxfleet::common
