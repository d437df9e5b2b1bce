#include "cli/commands/events.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/client/paging.h"
#include "cli/output/events.h"
#include "cli/output/structured.h"
#include "cli/output/table.h"
#include "common/proto/time.h"

namespace rxfleet::cli {
namespace {

constexpr size_t kMaxLimit = 10000;

std::string TimeOf(const v1::Event& event) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", common::TimeFromProto(event.last_time()),
                          absl::UTCTimeZone());
}

std::string Versions(const v1::AuditRecord& audit) {
  if (audit.old_resource_version().empty() && audit.new_resource_version().empty()) return "-";
  return absl::StrCat(audit.old_resource_version().empty() ? "-" : audit.old_resource_version(),
                      " -> ",
                      audit.new_resource_version().empty() ? "-" : audit.new_resource_version());
}

}  // namespace

void AddGetEventsCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* get = root.get_subcommand("get");
  auto options = std::make_shared<GetEventsOptions>();
  CLI::App* sub = get->add_subcommand("events", "Get fleet events, or the audit log (--audit)");
  sub->alias("event");
  sub->footer(
      "Examples:\n  rxfleetctl get events\n  rxfleetctl get events --audit -o json\n"
      "The audit log records every accepted change with the token that made it.");
  sub->add_flag("--audit", options->audit,
                "The audit log (API changes: who, when, what, resource versions)");
  sub->add_option("--limit", options->limit, "The newest N events (1..10000)")
      ->check(CLI::Range(size_t{1}, kMaxLimit))
      ->capture_default_str();
  sub->add_option("-o,--output", options->output, "Output format")
      ->check(CLI::IsMember(OutputFormatNames()))
      ->capture_default_str();
  sub->callback([options, selected] {
    selected->path = "get events";
    selected->target = CommandTarget::kServer;
    selected->run = [options](const CommandContext& ctx) -> absl::Status {
      auto client = ctx.fleet();
      if (!client.ok()) return client.status();
      return RunGetEvents(*options, **client, ctx);
    };
  });
}

absl::Status RunGetEvents(const GetEventsOptions& options, FleetClient& client,
                          const CommandContext& ctx) {
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(options.output);
  if (!format.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("-o/--output: ", format.status().message()));
  }
  v1::ListEventsRequest request;
  request.set_audit(options.audit);
  absl::StatusOr<std::vector<v1::Event>> events = ListRecentEvents(client, request, options.limit);
  if (!events.ok()) return events.status();
  if (*format == OutputFormat::kJson || *format == OutputFormat::kYaml) {
    v1::ListEventsResponse list;
    for (const v1::Event& event : *events) *list.add_events() = event;
    return PrintStructured(list, *format, *ctx.streams.out, "events");
  }
  if (events->empty()) {
    *ctx.streams.err << "No resources found.\n";
    return absl::OkStatus();
  }
  if (*format == OutputFormat::kName) {
    for (const v1::Event& event : *events)
      *ctx.streams.out << "event/" << event.metadata().name() << "\n";
    return absl::OkStatus();
  }
  if (options.audit) {
    Table table({"TIME", "ACTOR", "ACTION", "OBJECT", "VERSIONS", "RESULT"});
    for (const v1::Event& event : *events) {
      const v1::AuditRecord& audit = event.audit();
      table.AddRow({TimeOf(event), audit.actor(),
                    absl::StrCat(audit.action(), audit.dry_run() ? " (dry run)" : ""),
                    EventObject(event), Versions(audit), audit.result_code()});
    }
    table.Print(*ctx.streams.out);
    return absl::OkStatus();
  }
  Table table({"TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"});
  for (const v1::Event& event : *events) {
    table.AddRow({TimeOf(event), event.type() == v1::EVENT_TYPE_WARNING ? "Warning" : "Normal",
                  event.reason(), EventObject(event), event.message()});
  }
  table.Print(*ctx.streams.out);
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
