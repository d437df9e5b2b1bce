#include "agent/app/report.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/chips/rx_agg.h"
#include "common/units.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {
namespace {

std::string Hex4(uint16_t v) { return absl::StrFormat("%04x", v); }

nlohmann::json OrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

template <typename T>
nlohmann::json Field(const common::Resolved<T>& resolved) {
  return {{"value", resolved.value}, {"provenance", resolved.provenance.ToString()}};
}

std::string DesiredHold(const AdapterSnapshot& s) {
  if (!s.desired || !s.desired->resolved.hold_us) return "-";
  return common::FormatHoldUs(s.desired->resolved.hold_us->value);
}

std::string ObservedHold(const AdapterSnapshot& s) {
  if (!s.observed_reg0 || !s.layout) return "-";
  const common::RxAggFields f = common::DecodeRxAgg(*s.layout, *s.observed_reg0);
  if (!f.enable) return "off";
  return common::FormatHoldUs(f.hold_us);
}

std::string Register(const AdapterSnapshot& s) {
  if (!s.observed_reg0 || !s.layout) return "-";
  return absl::StrFormat("0x%04x=0x%08x", common::GetRxAggLayoutSpec(*s.layout).reg0_address,
                         *s.observed_reg0);
}

std::string Source(const AdapterSnapshot& s) {
  if (!s.desired || !s.desired->resolved.hold_us) return "-";
  return s.desired->resolved.hold_us->provenance.ToString();
}

// Display width in terminal columns: counts UTF-8 lead bytes only ("µ" is one column).
size_t Width(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

nlohmann::json TopologyToJson(const AdapterSnapshot& s) {
  const UsbTopology& t = s.topology;
  nlohmann::json hubs = nlohmann::json::array();
  for (const HubHop& hop : t.hubs) {
    hubs.push_back({{"port_path", hop.port_path},
                    {"usb_speed", std::string(common::UsbSpeedName(hop.speed))},
                    {"upstream_peer", OrNull(hop.upstream_peer)}});
  }
  nlohmann::json appearances = nlohmann::json::array();
  for (const Appearance& a : s.appearances) {
    appearances.push_back({{"bus", a.bus},
                           {"devnum", a.devnum},
                           {"port_path", a.port_path},
                           {"usb_speed", std::string(common::UsbSpeedName(a.speed))},
                           {"at", absl::FormatTime(absl::RFC3339_sec, a.at, absl::UTCTimeZone())}});
  }
  return {{"port_path", t.port_path},
          {"root_hub_speed", std::string(common::UsbSpeedName(t.root_speed))},
          {"hubs", hubs},
          {"usb3_partner", t.Usb3Partner()},
          {"peer_port_path", OrNull(t.peer_port_path)},
          {"appearances", appearances}};
}

}  // namespace

nlohmann::json AdapterToJson(const AdapterSnapshot& s) {
  nlohmann::json j;
  j["id"] = s.id;
  j["vid"] = Hex4(s.device.vid);
  j["pid"] = Hex4(s.device.pid);
  j["chip"] = OrNull(s.chip);
  j["layout"] = s.layout ? nlohmann::json(std::string(common::RxAggLayoutName(*s.layout)))
                         : nlohmann::json(nullptr);
  j["family"] = OrNull(s.family);
  j["managed"] = s.family == "rtw89";
  j["usb_speed"] = std::string(common::UsbSpeedName(s.device.speed));
  j["port_path"] = s.device.port_path;
  j["bus"] = s.device.bus;
  j["devnum"] = s.device.devnum;
  j["netdev"] = OrNull(s.netdev);
  j["driver"] = OrNull(s.driver);
  j["state"] = std::string(AdapterPhaseName(s.phase));
  j["reason"] = s.reason;
  j["message"] = s.message;

  nlohmann::json desired = nlohmann::json::object();
  if (s.desired) {
    const common::ResolvedSettings& r = s.desired->resolved;
    if (r.hold_us) desired["hold_us"] = Field(*r.hold_us);
    if (r.count_threshold) desired["count_threshold"] = Field(*r.count_threshold);
    if (r.buffer_kib) desired["buffer_kib"] = Field(*r.buffer_kib);
    if (r.enable) {
      desired["enable"] = Field(*r.enable);
      if (r.enable->value && r.force_enable) desired["force_enable"] = Field(*r.enable);
    }
  }
  j["desired"] = desired;

  if (s.observed_reg0 && s.layout) {
    const common::RxAggFields f = common::DecodeRxAgg(*s.layout, *s.observed_reg0);
    nlohmann::json observed;
    observed["registers"] = {
        {absl::StrFormat("0x%04x", common::GetRxAggLayoutSpec(*s.layout).reg0_address),
         absl::StrFormat("0x%08x", *s.observed_reg0)}};
    observed["enable"] = f.enable;
    observed["hold_us"] = f.hold_us;
    observed["count_threshold"] = f.count_threshold;
    observed["buffer_kib"] = f.buffer_kib;
    j["observed"] = observed;
  } else if (!s.observed_words.empty()) {
    nlohmann::json observed;
    nlohmann::json registers = nlohmann::json::object();
    for (const auto& [address, word] : s.observed_words) {
      registers[absl::StrFormat("0x%04x", address)] = absl::StrFormat("0x%08x", word);
    }
    observed["registers"] = registers;
    nlohmann::json fields = nlohmann::json::object();
    for (const common::FieldValue& f : s.observed_fields) fields[f.name] = f.value;
    observed["fields"] = fields;
    j["observed"] = observed;
  } else {
    j["observed"] = nullptr;
  }
  j["counters"] = {{"applies", s.counters.applies},
                   {"verifies", s.counters.verifies},
                   {"drift_repairs", s.counters.drift_repairs},
                   {"failures", s.counters.failures}};
  nlohmann::json diagnoses = nlohmann::json::array();
  for (const Diagnosis& d : s.diagnoses) {
    diagnoses.push_back({{"code", d.code}, {"message", d.message}});
  }
  j["diagnoses"] = diagnoses;
  j["chip_source"] = OrNull(s.chip_source);
  j["chip_origin"] = OrNull(s.chip_origin);
  j["topology"] = TopologyToJson(s);
  j["quarantined"] = s.quarantined;
  j["counters"]["io_error_bursts"] = s.counters.io_error_bursts;
  j["counters"]["reenumeration_loops"] = s.counters.reenumeration_loops;
  if (s.last_io_burst) {
    j["last_io_burst"] = {{"reason", s.last_io_burst->reason},
                          {"errno", OrNull(s.last_io_burst->errno_name)},
                          {"errno_value", s.last_io_burst->errno_value},
                          {"count", s.last_io_burst->count},
                          {"ended", absl::FormatTime(absl::RFC3339_sec, s.last_io_burst->ended,
                                                     absl::UTCTimeZone())}};
  } else {
    j["last_io_burst"] = nullptr;
  }
  return j;
}

std::string RenderAdaptersJson(const std::vector<AdapterSnapshot>& snapshots) {
  nlohmann::json array = nlohmann::json::array();
  for (const AdapterSnapshot& s : snapshots) array.push_back(AdapterToJson(s));
  return array.dump(2) + "\n";
}

std::string RenderAdaptersTable(const std::vector<AdapterSnapshot>& snapshots) {
  if (snapshots.empty()) return "No USB Wi-Fi adapters found.\n";
  std::vector<std::vector<std::string>> rows = {{"ADAPTER", "CHIP", "USB", "PORT", "NETDEV",
                                                 "STATE", "HOLD", "OBSERVED", "REGISTER",
                                                 "SOURCE"}};
  for (const AdapterSnapshot& s : snapshots) {
    rows.push_back({s.id,
                    s.chip.empty() ? common::FormatVidPid(s.device.vid, s.device.pid) : s.chip,
                    std::string(common::UsbSpeedDisplayName(s.device.speed)), s.device.port_path,
                    s.netdev.empty() ? "-" : s.netdev, std::string(AdapterPhaseName(s.phase)),
                    DesiredHold(s), ObservedHold(s), Register(s), Source(s)});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows[r].size(); ++i) {
      line += rows[r][i];
      if (i + 1 < rows[r].size()) line.append(widths[i] - Width(rows[r][i]) + 2, ' ');
    }
    out += line + "\n";
    if (r == 0) continue;
    const AdapterSnapshot& s = snapshots[r - 1];
    const bool problem = s.phase == AdapterPhase::kError ||
                         s.phase == AdapterPhase::kDisabledByDriver ||
                         s.phase == AdapterPhase::kInvalidSettings ||
                         s.phase == AdapterPhase::kAsleep || s.phase == AdapterPhase::kDrifted ||
                         (s.phase == AdapterPhase::kObserved && s.reason == "NotJudged");
    if (problem && !s.message.empty()) out += "  ! " + s.message + "\n";
    for (const Diagnosis& d : s.diagnoses) out += "  ! " + d.code + ": " + d.message + "\n";
  }
  return out;
}

}  // namespace rxfleet::agent
