#include "cli/output/describe.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/output/describe_internal.h"
#include "cli/output/events.h"
#include "cli/output/format.h"
#include "cli/output/resources.h"
#include "cli/output/table.h"
#include "common/experiment/metric.h"
#include "common/probe/probe_spec.h"
#include "common/proto/probe.h"
#include "common/units.h"

namespace rxfleet::cli {
namespace describe_internal {

void Field(std::ostream& out, absl::string_view label, absl::string_view value) {
  PrintLabelled(out, label, value, kLabelWidth);
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

void PrintSelector(const v1::AdapterSelector& sel, std::ostream& out) {
  if (FormatSelector(sel) == "<all>") {
    Field(out, "Selector", "<all adapters>");
    return;
  }
  out << "Selector:\n";
  if (!sel.match_labels().empty()) Field(out, "  Host labels", FormatLabels(sel.match_labels()));
  if (!sel.usb_speeds().empty()) {
    std::vector<std::string> speeds;
    for (int speed : sel.usb_speeds())
      speeds.push_back(UsbSpeedWord(static_cast<v1::UsbSpeed>(speed)));
    Field(out, "  USB speeds", absl::StrJoin(speeds, ","));
  }
  if (!sel.chips().empty()) Field(out, "  Chips", absl::StrJoin(sel.chips(), ","));
  if (!sel.vid_pids().empty()) Field(out, "  USB IDs", absl::StrJoin(sel.vid_pids(), ","));
  if (!sel.adapters().empty()) Field(out, "  Adapters", absl::StrJoin(sel.adapters(), ","));
}

void PrintConditions(const google::protobuf::RepeatedPtrField<v1::Condition>& conditions,
                     absl::Time now, std::ostream& out) {
  if (conditions.empty()) {
    Field(out, "Conditions", "<none>");
    return;
  }
  out << "Conditions:\n";
  Table table({"TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"});
  for (const auto& c : conditions) {
    table.AddRow({c.type(), ConditionStatusWord(c.status()), c.reason().empty() ? "-" : c.reason(),
                  FormatAge(AsTime(c.last_transition_time()), now), c.message()});
  }
  table.Print(out, "  ");
}

void PrintMetadata(const v1::ObjectMeta& meta, absl::Time now, std::ostream& out) {
  Field(out, "Name", meta.name());
  Field(out, "Labels", FormatLabels(meta.labels()));
  if (!meta.annotations().empty()) Field(out, "Annotations", FormatLabels(meta.annotations()));
  Field(out, "Created", FormatTimeWithAge(meta.create_time(), now));
}

}  // namespace describe_internal

using describe_internal::Field;
using describe_internal::FormatSegment;
using describe_internal::PrintConditions;
using describe_internal::PrintGuardrails;
using describe_internal::PrintMetadata;
using describe_internal::PrintSelector;
using describe_internal::YesNo;

namespace {

// The observed register fields as settings, so they format like the others.
v1::RxAggSettings ObservedSettings(const v1::AdapterStatus& status) {
  v1::RxAggSettings settings;
  if (!status.has_observed() || status.observed().registers_size() == 0) return settings;
  const auto& decoded = status.observed().decoded();
  settings.set_hold_us(decoded.hold_us());
  settings.set_count_threshold(decoded.count_threshold());
  settings.set_buffer_kib(decoded.buffer_kib());
  settings.set_enable(decoded.enable());
  return settings;
}

}  // namespace

void DescribeHost(const v1::Host& host, const std::vector<v1::Adapter>& adapters,
                  const std::vector<v1::Event>& events, absl::Time now, std::ostream& out) {
  const auto& status = host.status();
  const auto& info = status.host_info();
  PrintMetadata(host.metadata(), now, out);
  Field(out, "Status", HostStatusWords(status));
  Field(out, "Last seen", FormatTimeWithAge(status.last_seen_time(), now));
  Field(out, "Connected since",
        status.connected() ? FormatTimeWithAge(status.connect_time(), now) : "-");
  Field(out, "Peer", OrNone(status.peer_address()));
  Field(out, "Server", OrNone(status.replica()));
  Field(out, "Agent", OrNone(status.agent_version()));
  Field(out, "Capabilities",
        status.capabilities().empty() ? "<none>" : absl::StrJoin(status.capabilities(), ","));
  Field(out, "Metrics", OrNone(status.metrics_address()));
  out << "Machine:\n";
  Field(out, "  Hostname", OrNone(info.hostname()));
  Field(out, "  Board", OrNone(info.board_model()));
  Field(out, "  CPU",
        info.cpu_model().empty() ? absl::StrCat(info.cpu_count(), " CPUs")
                                 : absl::StrCat(info.cpu_model(), " x", info.cpu_count()));
  Field(out, "  Memory",
        info.memory_bytes() == 0
            ? "<unknown>"
            : absl::StrFormat("%.1f GiB", static_cast<double>(info.memory_bytes()) /
                                              (1024.0 * 1024.0 * 1024.0)));
  Field(out, "  Arch", OrNone(info.arch()));
  Field(out, "  Kernel", OrNone(info.kernel_release()));
  Field(out, "  OS", OrNone(info.os()));
  Field(out, "  Boot id", OrNone(info.boot_id()));
  out << "Bundle:\n";
  Field(out, "  Last sent", absl::StrCat(status.last_sent_version()));
  Field(out, "  Last ACKed",
        status.last_acked_version() == 0
            ? "<none>"
            : absl::StrCat(status.last_acked_version(), " at ",
                           FormatTimeWithAge(status.last_ack_time(), now)));
  if (status.has_last_nack() && status.last_nack().version() != 0) {
    const auto& nack = status.last_nack();
    Field(out, "  Last NACK",
          absl::StrCat(nack.version(), " at ", FormatTimeWithAge(nack.time(), now), ": ",
                       nack.error_detail()));
  } else {
    Field(out, "  Last NACK", "<none>");
  }
  PrintConditions(status.conditions(), now, out);
  if (adapters.empty()) {
    Field(out, "Adapters", "<none>");
  } else {
    out << "Adapters:\n";
    Table table({"ADAPTER", "CHIP", "USB", "HOLD", "STATE", "NETDEV"});
    for (const auto& adapter : adapters) {
      const auto& s = adapter.status();
      table.AddRow({adapter.metadata().name(),
                    s.chip().empty() ? FormatVidPid(s.vid(), s.pid()) : s.chip(),
                    UsbSpeedWord(s.usb_speed()), FormatAdapterHold(adapter),
                    AdapterStateWord(s.state()), s.netdev().empty() ? "-" : s.netdev()});
    }
    table.Print(out, "  ");
  }
  PrintEventsSection(events, now, out);
}

void DescribeAdapter(const v1::ExplainAdapterResponse& explain,
                     const std::optional<AdapterProbe>& probe, const std::vector<v1::Event>& events,
                     absl::Time now, std::ostream& out) {
  const v1::Adapter& adapter = explain.adapter();
  const v1::AdapterStatus& s = adapter.status();
  Field(out, "Name", adapter.metadata().name());
  Field(out, "Host", adapter.host_id());
  Field(out, "Labels", FormatLabels(adapter.metadata().labels()));
  Field(out, "Chip",
        absl::StrCat(s.chip().empty() ? "<unknown>" : s.chip(), " (layout ", LayoutWord(s.layout()),
                     ")"));
  if (!s.family().empty()) {
    Field(out, "Family",
          absl::StrCat(s.family(), s.managed() ? " (managed: rxfleet holds RX aggregation)"
                                               : " (observe-only: read, never written)"));
  }
  if (!s.chip_source().empty()) {
    Field(out, "Chip source", absl::StrCat(s.chip_source(), " (", OrNone(s.chip_origin()), ")"));
  }
  Field(out, "USB ID", FormatVidPid(s.vid(), s.pid()));
  Field(out, "Product",
        absl::StrCat(OrNone(s.product()), " (", OrNone(s.manufacturer()), "), serial ",
                     OrNone(s.serial())));
  Field(out, "USB speed",
        absl::StrFormat("%s (bcdUSB %x.%02x)", UsbSpeedWord(s.usb_speed()), s.bcd_usb() >> 8,
                        s.bcd_usb() & 0xFF));
  Field(out, "Port",
        absl::StrCat(OrNone(s.port_path()), " (peer ", OrNone(s.peer_port_path()), ", bus ",
                     s.bus(), ", device ", s.devnum(), ")"));
  if (s.has_topology()) {
    const v1::UsbTopology& t = s.topology();
    std::string hubs;
    for (const v1::UsbHubHop& hop : t.hubs()) {
      absl::StrAppend(&hubs, hubs.empty() ? "" : " > ", hop.port_path(), " (",
                      UsbSpeedWord(hop.usb_speed()), ")");
    }
    Field(
        out, "Topology",
        absl::StrCat("root hub ", UsbSpeedWord(t.root_hub_speed()), ", hubs ",
                     hubs.empty() ? "<none>" : hubs, ", USB 3 partner ", YesNo(t.usb3_partner())));
    std::string seen;
    for (const v1::UsbAppearance& a : t.appearances()) {
      absl::StrAppend(&seen, seen.empty() ? "" : ", ", a.port_path(), " bus ", a.bus(), " dev ",
                      a.devnum(), " ", UsbSpeedWord(a.usb_speed()));
    }
    if (!seen.empty()) Field(out, "Appearances", seen);
  }
  if (s.quarantined()) Field(out, "Quarantined", "yes (re-enumeration loop)");
  if (s.has_last_io_burst()) {
    const v1::IoErrorBurst& b = s.last_io_burst();
    Field(out, "Last I/O burst",
          absl::StrCat(b.count(), " x ", b.reason(),
                       b.errno_name().empty()
                           ? std::string()
                           : absl::StrCat(" (", b.errno_name(), " ", b.errno_value(), ")")));
  }
  Field(out, "Netdev",
        s.netdev().empty() ? "<none>"
                           : absl::StrCat(s.netdev(), " (driver ", OrNone(s.driver()), ")"));
  Field(out, "State", AdapterStateWord(s.state()));
  Field(out, "In sync", YesNo(explain.in_sync()));
  Field(
      out, "Bundle",
      absl::StrCat("latest ", explain.latest_bundle_version(), ", acked ",
                   explain.acked_bundle_version(), ", applied ", s.last_applied_bundle_version()));
  Field(out, "Last apply", FormatTimeWithAge(s.last_apply_time(), now));
  Field(out, "Reported", FormatTimeWithAge(s.report_time(), now));
  Field(out, "Created", FormatTimeWithAge(adapter.metadata().create_time(), now));

  // Per field: what the server expects (with provenance), what the agent wants, what the
  // register holds.
  out << "Effective settings:\n";
  const v1::RxAggSettings observed = ObservedSettings(s);
  Table settings({"FIELD", "EXPECTED", "AGENT", "OBSERVED", "SOURCE"});
  for (const std::string& field : SettingsFieldNames()) {
    auto expected = FormatSettingsField(explain.expected().settings(), field);
    auto desired = FormatSettingsField(s.desired().settings(), field);
    auto seen = FormatSettingsField(observed, field);
    std::string source = "-";
    if (auto it = explain.expected().provenance().find(field);
        it != explain.expected().provenance().end()) {
      source = ProvenanceLong(it->second);
    } else if (auto agent_it = s.desired().provenance().find(field);
               agent_it != s.desired().provenance().end()) {
      source = absl::StrCat(ProvenanceLong(agent_it->second), " [agent]");
    } else if (!expected && !desired) {
      source = "driver (no layer sets it)";
    }
    settings.AddRow(
        {field, expected.value_or("-"), desired.value_or("-"), seen.value_or("-"), source});
  }
  settings.Print(out, "  ");
  if (explain.differences().empty()) {
    Field(out, "Differences", "<none>");
  } else {
    out << "Differences:\n";
    for (const auto& difference : explain.differences()) out << "  " << difference << '\n';
  }
  if (explain.policies().empty()) {
    Field(out, "Policies", "<none>");
  } else {
    out << "Policies:\n";
    Table policies({"NAME", "PRIORITY", "MATCHES", "DECIDES", "REASON"});
    for (const auto& match : explain.policies()) {
      std::vector<std::string> decides(match.decided_fields().begin(),
                                       match.decided_fields().end());
      if (probe && probe->policy == match.policy()) decides.push_back("probe");
      policies.AddRow({match.policy(), absl::StrCat(match.priority()), YesNo(match.matched()),
                       decides.empty() ? "-" : absl::StrJoin(decides, ","),
                       match.reason().empty() ? "-" : match.reason()});
    }
    policies.Print(out, "  ");
  }
  if (!probe) {
    Field(out, "Probe", "<none>");
  } else {
    absl::StatusOr<common::ProbeSpec> spec = common::ProbeSpecFromProto(probe->spec, "probe");
    const v1::ProbeSpec shown = spec.ok() ? common::ProbeSpecToProto(*spec) : probe->spec;
    Field(out, "Probe",
          absl::StrCat(spec.ok() ? common::DescribeProbeSpec(*spec) : OrNone(probe->spec.server()),
                       ", every ", FormatProtoDuration(shown.interval()), " (server policy ",
                       probe->policy, ")"));
  }
  if (explain.has_assignment() && !explain.assignment().experiment().empty()) {
    const auto& a = explain.assignment();
    Field(out, "Experiment",
          absl::StrCat(a.experiment(), " arm ", a.arm(), " (", FormatSettings(a.settings()),
                       ", period ", a.period_index(), " ends ",
                       FormatTimeWithAge(a.period_end_time(), now), ")"));
  } else {
    Field(out, "Experiment", "<none>");
  }
  if (s.observed().registers().empty()) {
    Field(out, "Registers", "<not read>");
  } else {
    Field(out, "Registers",
          absl::StrCat("read ", FormatTimeWithAge(s.observed().read_time(), now)));
    for (const auto& reg : s.observed().registers()) {
      out << absl::StrFormat("  0x%04X = 0x%08X\n", reg.address(), reg.value());
    }
  }
  if (!s.observed_fields().empty()) {
    std::vector<std::string> fields;
    for (const auto& f : s.observed_fields())
      fields.push_back(absl::StrCat(f.name(), "=", f.value()));
    Field(out, "Observed fields", absl::StrJoin(fields, " "));
  }
  PrintConditions(s.conditions(), now, out);
  if (s.diagnoses().empty()) {
    Field(out, "Diagnoses", "<none>");
  } else {
    out << "Diagnoses:\n";
    Table diagnoses({"SEVERITY", "CODE", "MESSAGE"});
    for (const auto& d : s.diagnoses()) {
      diagnoses.AddRow({d.severity() == v1::DIAGNOSIS_SEVERITY_WARNING ? "Warning" : "Info",
                        d.code(), d.message()});
    }
    diagnoses.Print(out, "  ");
  }
  const auto& c = s.counters();
  Field(
      out, "Counters",
      absl::StrCat("applies ", c.applies_total(), ", verifications ", c.verifications_total(),
                   ", drift repairs ", c.drift_repairs_total(), ", failures ", c.failures_total()));
  PrintEventsSection(events, now, out);
}

namespace {

// The "Probe:" section of `describe policy`: every field with the defaults applied.
void PrintPolicyProbe(const v1::PolicySpec& spec, std::ostream& out) {
  if (!spec.has_probe()) {
    Field(out, "Probe", "<none>");
    return;
  }
  absl::StatusOr<common::ProbeSpec> probe = common::ProbeSpecFromProto(spec.probe(), "probe");
  if (!probe.ok()) {
    Field(out, "Probe", absl::StrCat("invalid: ", probe.status().message()));
    return;
  }
  const bool udp = probe->protocol == common::ProbeProtocol::kUdp;
  out << "Probe:\n";
  Field(out, "  Server", common::ProbeServerAddress(*probe));
  Field(out, "  Protocol", udp ? "UDP" : "TCP");
  Field(out, "  Direction",
        probe->direction == common::ProbeDirection::kForward ? "forward (upload)"
                                                             : "reverse (download)");
  Field(out, "  Streams", absl::StrCat(probe->parallel_streams));
  const v1::ProbeSpec shown = common::ProbeSpecToProto(*probe);
  Field(out, "  Duration", FormatProtoDuration(shown.duration()));
  Field(out, "  UDP rate",
        udp ? absl::StrCat(FormatBitRate(probe->udp_rate_bps), " per stream") : "- (TCP)");
  Field(out, "  Interval", FormatProtoDuration(shown.interval()));
}

}  // namespace

void DescribePolicy(const v1::Policy& policy, const std::vector<v1::Event>& events, absl::Time now,
                    std::ostream& out) {
  const auto& meta = policy.metadata();
  const auto& spec = policy.spec();
  PrintMetadata(meta, now, out);
  Field(out, "Updated", FormatTimeWithAge(meta.update_time(), now));
  Field(out, "Resource version", OrNone(meta.resource_version()));
  Field(out, "Generation", absl::StrCat(meta.generation()));
  Field(out, "Description", OrNone(spec.description()));
  Field(out, "Priority", absl::StrCat(spec.priority()));
  PrintSelector(spec.selector(), out);
  out << "Settings:\n";
  bool any = false;
  for (const std::string& field : SettingsFieldNames()) {
    if (auto value = FormatSettingsField(spec.settings(), field)) {
      Field(out, absl::StrCat("  ", field), *value);
      any = true;
    }
  }
  if (!any) out << "  <none>\n";
  PrintPolicyProbe(spec, out);
  const auto& status = policy.status();
  Field(out, "Matched adapters", absl::StrCat(status.matched_adapters()));
  Field(out, "Effective adapters", absl::StrCat(status.effective_adapters()));
  Field(out, "Observed generation", absl::StrCat(status.observed_generation()));
  PrintConditions(status.conditions(), now, out);
  PrintEventsSection(events, now, out);
}

namespace describe_internal {

std::string FormatSegment(const google::protobuf::Map<std::string, std::string>& segment) {
  return segment.empty() ? "<all>" : FormatLabels(segment);
}

std::string FormatThreshold(double value) { return absl::StrFormat("%g", value); }

// Guardrails as the condition to keep and the one that trips them (experiments and tunings).
void PrintGuardrails(const google::protobuf::RepeatedPtrField<v1::Guardrail>& all,
                     std::ostream& out) {
  if (all.empty()) {
    Field(out, "Guardrails", "<none>");
    return;
  }
  out << "Guardrails:\n";
  Table guardrails({"METRIC", "KEEP", "TRIPS WHEN", "MIN WINDOWS", "MIN ADAPTERS"});
  for (const auto& g : all) {
    const bool above = g.comparator() == v1::COMPARATOR_GREATER_THAN;
    const std::string subject =
        g.relative_to_control() ? absl::StrCat(g.metric(), " vs control") : g.metric();
    const std::string threshold = g.relative_to_control()
                                      ? absl::StrFormat("%+g%%", g.threshold() * 100)
                                      : FormatThreshold(g.threshold());
    guardrails.AddRow({subject, absl::StrCat(above ? "<= " : ">= ", threshold),
                       absl::StrCat(above ? "> " : "< ", threshold),
                       g.min_windows() == 0 ? "default" : absl::StrCat(g.min_windows()),
                       g.min_adapters() == 0 ? "default" : absl::StrCat(g.min_adapters())});
  }
  guardrails.Print(out, "  ");
}

}  // namespace describe_internal

void DescribeExperiment(const v1::Experiment& experiment, const std::vector<v1::Event>& events,
                        absl::Time now, std::ostream& out) {
  const auto& meta = experiment.metadata();
  const auto& spec = experiment.spec();
  const auto& status = experiment.status();
  PrintMetadata(meta, now, out);
  Field(out, "Resource version", OrNone(meta.resource_version()));
  Field(out, "Generation", absl::StrCat(meta.generation()));
  Field(out, "Phase", ExperimentPhaseWord(status.phase()));
  Field(out, "Started", FormatTimeWithAge(status.start_time(), now));
  if (status.has_end_time()) {
    Field(out, "Ended", FormatTimeWithAge(status.end_time(), now));
  } else if (status.has_start_time()) {
    google::protobuf::Timestamp planned = status.start_time();
    planned.set_seconds(planned.seconds() + spec.duration().seconds());
    Field(out, "Ends", FormatTimeWithAge(planned, now));
  }
  out << "Spec:\n";
  Field(out, "  Design", ExperimentDesignWord(spec.design()));
  Field(out, "  Duration", FormatProtoDuration(spec.duration()));
  Field(out, "  Window", FormatProtoDuration(spec.window_length()));
  if (spec.design() == v1::EXPERIMENT_DESIGN_SWITCHBACK) {
    Field(out, "  Period", FormatProtoDuration(spec.period_length()));
  }
  Field(out, "  Burn-in", FormatProtoDuration(spec.burn_in()));
  Field(out, "  Priority", absl::StrCat(spec.priority()));
  Field(out, "  Seed", spec.seed() == 0 ? "<server chooses>" : absl::StrCat(spec.seed()));
  Field(out, "  Primary metric", OrNone(spec.primary_metric()));
  Field(out, "  Secondary metrics",
        spec.secondary_metrics().empty() ? "<none>" : absl::StrJoin(spec.secondary_metrics(), ","));
  Field(
      out, "  Segments by",
      spec.segment_label_keys().empty() ? "<none>" : absl::StrJoin(spec.segment_label_keys(), ","));
  if (spec.min_adapters_per_arm() != 0) {
    Field(out, "  Min adapters/arm", absl::StrCat(spec.min_adapters_per_arm()));
  }
  if (spec.min_windows_per_arm() != 0) {
    Field(out, "  Min windows/arm", absl::StrCat(spec.min_windows_per_arm()));
  }
  if (spec.has_probe()) {
    absl::StatusOr<common::ProbeSpec> probe = common::ProbeSpecFromProto(spec.probe(), "probe");
    Field(out, "  Probe",
          probe.ok() ? common::DescribeProbeSpec(*probe) : OrNone(spec.probe().server()));
  }
  PrintSelector(spec.selector(), out);
  if (spec.arms().empty()) {
    Field(out, "Arms", "<none>");
  } else {
    out << "Arms:\n";
    Table arms({"NAME", "WEIGHT", "SETTINGS", "ROLE"});
    for (const auto& arm : spec.arms()) {
      arms.AddRow({arm.name(), absl::StrCat(arm.weight()), FormatSettings(arm.settings()),
                   arm.name() == spec.control_arm() ? "control" : "treatment"});
    }
    arms.Print(out, "  ");
  }
  PrintGuardrails(spec.guardrails(), out);
  out << "Status:\n";
  Field(out, "  Assigned adapters", absl::StrCat(status.assigned_adapters()));
  Field(out, "  Valid windows", absl::StrCat(status.valid_windows()));
  Field(out, "  Seed in use", status.seed() == 0 ? "-" : absl::StrCat(status.seed()));
  Field(out, "  Generation seen", absl::StrCat(status.observed_generation()));
  if (status.stopped_arms().empty()) {
    Field(out, "Stopped arms", "<none>");
  } else {
    out << "Stopped arms:\n";
    Table stopped({"ARM", "SEGMENT", "REASON", "AGE", "MESSAGE"});
    for (const auto& arm : status.stopped_arms()) {
      stopped.AddRow({arm.arm(), FormatSegment(arm.segment()), OrNone(arm.reason()),
                      FormatAge(AsTime(arm.time()), now), arm.message()});
    }
    stopped.Print(out, "  ");
  }
  PrintConditions(status.conditions(), now, out);
  PrintEventsSection(events, now, out);
}

}  // namespace rxfleet::cli
