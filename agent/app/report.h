#pragma once

#include <string>
#include <vector>

#include "agent/reconcile/adapter_snapshot.h"
#include "nlohmann/json.hpp"

namespace rxfleet::agent {

/// One adapter as `rxfleet-agent --once -o json` prints it (docs/AGENT.md, "JSON output"):
///   {"id", "vid", "pid" (4 lower-case hex digits), "chip" (null if not an rtw89 chip),
///    "layout" ("v1".."v3" or null), "usb_speed" (common::UsbSpeedName), "port_path", "bus",
///    "devnum", "netdev" and "driver" (null if none), "state" (AdapterPhaseName), "reason",
///    "message",
///    "desired": {"hold_us": {"value": 32, "provenance": "builtin-default"}, ...} (only fields a
///               policy sets; {} for devices that are not reconciled),
///    "observed": {"registers": {"0x6000": "0x80ff0114"}, "enable", "hold_us",
///                 "count_threshold", "buffer_kib"} or null if never read,
///    "counters": {"applies", "verifies", "drift_repairs", "failures"},
///    "diagnoses": [{"code", "message"}]}
nlohmann::json AdapterToJson(const AdapterSnapshot& snapshot);

/// A JSON array of AdapterToJson, in the given order, pretty-printed with a trailing newline.
std::string RenderAdaptersJson(const std::vector<AdapterSnapshot>& snapshots);

/// An aligned human table: ADAPTER CHIP USB PORT NETDEV STATE HOLD (desired/observed) REGISTER
/// SOURCE, then one indented line per diagnosis or problem. "No USB Wi-Fi adapters found." when
/// empty.
std::string RenderAdaptersTable(const std::vector<AdapterSnapshot>& snapshots);

}  // namespace rxfleet::agent
