#include "cli/output/status.h"

#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/output/format.h"
#include "cli/output/resources.h"
#include "cli/output/table.h"

namespace rxfleet::cli {
namespace {

constexpr size_t kLabelWidth = 16;

void Field(std::ostream& out, absl::string_view label, absl::string_view value) {
  PrintLabelled(out, label, value, kLabelWidth);
}

std::string LinkState(v1::ServerLinkState state) {
  std::string name = v1::ServerLinkState_Name(state);
  constexpr std::string_view kPrefix = "SERVER_LINK_STATE_";
  if (name.rfind(kPrefix, 0) == 0) name = name.substr(kPrefix.size());
  return name == "UNSPECIFIED" ? "unknown" : absl::AsciiStrToLower(name);
}

std::string BundleOrigin(v1::BundleOrigin origin) {
  switch (origin) {
    case v1::BUNDLE_ORIGIN_SERVER:
      return "from the server";
    case v1::BUNDLE_ORIGIN_PERSISTED:
      return "persisted, loaded at start-up";
    default:
      return "none";
  }
}

}  // namespace

void PrintLocalStatus(const v1::GetStatusResponse& status, absl::Time now, std::ostream& out) {
  Field(out, "Host", status.host_id());
  Field(out, "Labels", FormatLabels(status.labels()));
  Field(out, "Agent",
        absl::StrCat(OrNone(status.agent_version()), ", started ",
                     FormatTimeWithAge(status.start_time(), now)));
  const auto& info = status.host_info();
  Field(out, "Machine",
        absl::StrCat(OrNone(info.board_model().empty() ? info.cpu_model() : info.board_model()),
                     ", ", OrNone(info.arch()), ", kernel ", OrNone(info.kernel_release())));

  const auto& link = status.server_link();
  std::string server = LinkState(link.state());
  if (!link.server_address().empty()) absl::StrAppend(&server, " (", link.server_address(), ")");
  if (link.state() == v1::SERVER_LINK_STATE_CONNECTED) {
    absl::StrAppend(&server, " since ", FormatTimeWithAge(link.last_connect_time(), now));
  }
  Field(out, "Server", server);
  if (!link.last_error().empty()) Field(out, "Last error", link.last_error());
  Field(
      out, "Bundle",
      link.active_bundle_version() == 0
          ? "<none>"
          : absl::StrCat(link.active_bundle_version(), " (",
                         BundleOrigin(link.active_bundle_origin()), ")",
                         link.active_bundle_persist_error().empty()
                             ? ""
                             : absl::StrCat(", NOT saved: ", link.active_bundle_persist_error())));
  if (link.last_nacked_version() != 0) {
    Field(out, "Last NACK",
          absl::StrCat(link.last_nacked_version(), ": ", OrNone(link.last_nack_detail())));
  }

  const auto& file = status.local_policy_file();
  std::string policy_file = "<none>";
  if (!file.path().empty()) {
    policy_file = file.loaded()
                      ? absl::StrCat(file.path(), ", ", file.policy_count(), " policies, loaded ",
                                     FormatTimeWithAge(file.load_time(), now))
                      : absl::StrCat(file.path(), ", NOT loaded: ", OrNone(file.error()));
  }
  Field(out, "Policy file", policy_file);
  Field(out, "Metrics", OrNone(status.metrics_address()));

  if (status.adapters().empty()) {
    Field(out, "Adapters", "<none>");
    return;
  }
  out << "Adapters:\n";
  Table table({"ADAPTER", "CHIP", "USB", "HOLD", "STATE", "POLICY", "NETDEV"});
  std::map<std::string, const v1::Adapter*> sorted;
  for (const auto& adapter : status.adapters()) sorted[adapter.metadata().name()] = &adapter;
  for (const auto& [name, adapter] : sorted) {
    const auto& s = adapter->status();
    std::string policy = "-";
    if (auto it = s.desired().provenance().find("hold_us"); it != s.desired().provenance().end()) {
      policy = ProvenanceShort(it->second);
    }
    table.AddRow({name, s.chip().empty() ? FormatVidPid(s.vid(), s.pid()) : s.chip(),
                  UsbSpeedWord(s.usb_speed()), FormatAdapterHold(*adapter),
                  AdapterStateWord(s.state()), policy, s.netdev().empty() ? "-" : s.netdev()});
  }
  table.Print(out, "  ");

  Table diagnoses({"ADAPTER", "SEVERITY", "CODE", "MESSAGE"});
  for (const auto& [name, adapter] : sorted) {
    for (const auto& d : adapter->status().diagnoses()) {
      diagnoses.AddRow({name, d.severity() == v1::DIAGNOSIS_SEVERITY_WARNING ? "Warning" : "Info",
                        d.code(), d.message()});
    }
  }
  if (!diagnoses.empty()) {
    out << "Diagnoses:\n";
    diagnoses.Print(out, "  ");
  }
}

}  // namespace rxfleet::cli
