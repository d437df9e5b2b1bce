#include "cli/commands/watch.h"

#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/output/events.h"
#include "cli/output/structured.h"
#include "common/string_view_compat.h"
#include "nlohmann/json.hpp"

namespace rxfleet::cli {
namespace {

// --kind value -> Event.involved_object.kind spelling.
absl::StatusOr<std::string> KindName(absl::string_view kind) {
  const std::string lower = absl::AsciiStrToLower(kind);
  if (lower.empty()) return std::string();
  if (lower == "host" || lower == "hosts") return std::string("Host");
  if (lower == "adapter" || lower == "adapters") return std::string("Adapter");
  if (lower == "policy" || lower == "policies") return std::string("Policy");
  if (lower == "experiment" || lower == "experiments") return std::string("Experiment");
  if (lower == "holdtuning" || lower == "holdtunings" || lower == "tuning") {
    return std::string("HoldTuning");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--kind: unknown kind '", kind,
                   "' (expected host, adapter, policy, experiment or holdtuning)"));
}

absl::StatusOr<v1::EventType> TypeValue(absl::string_view type) {
  const std::string lower = absl::AsciiStrToLower(type);
  if (lower.empty()) return v1::EVENT_TYPE_UNSPECIFIED;
  if (lower == "normal") return v1::EVENT_TYPE_NORMAL;
  if (lower == "warning") return v1::EVENT_TYPE_WARNING;
  return absl::InvalidArgumentError(
      absl::StrCat("--type: unknown event type '", type, "' (expected normal or warning)"));
}

}  // namespace

void AddWatchCommand(CLI::App& root, SelectedCommand* selected) {
  auto options = std::make_shared<WatchOptions>();
  CLI::App* watch =
      root.add_subcommand("watch", "Stream fleet events as they happen (Ctrl-C to stop)");
  watch->footer(
      "Examples:\n  rxfleetctl watch\n  rxfleetctl watch --host pi1 --type warning\n"
      "  rxfleetctl watch --kind policy --audit -o json");
  watch->add_option("--host", options->host, "Only events of this host");
  watch->add_option("--kind", options->kind, "Only events about this kind of object")
      ->check(CLI::IsMember({"host", "adapter", "policy", "experiment", "holdtuning"},
                            CLI::ignore_case));
  watch->add_option("--name", options->name, "Only events about objects with this name");
  watch->add_option("--type", options->type, "Only normal or warning events")
      ->check(CLI::IsMember({"normal", "warning"}, CLI::ignore_case));
  watch->add_flag("--audit", options->audit, "Watch the audit log (API writes) instead");
  watch->add_option("-o,--output", options->output, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  watch->callback([options, selected] {
    selected->path = "watch";
    selected->target = CommandTarget::kServer;
    selected->run = [options](const CommandContext& ctx) -> absl::Status {
      if (auto s = ValidateWatchOptions(*options); !s.ok()) return s;
      auto client = ctx.fleet();
      if (!client.ok()) return client.status();
      return RunWatch(*options, **client, ctx);
    };
  });
}

absl::Status ValidateWatchOptions(const WatchOptions& options) {
  if (auto kind = KindName(options.kind); !kind.ok()) return kind.status();
  if (auto type = TypeValue(options.type); !type.ok()) return type.status();
  if (options.output != "text" && options.output != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("-o/--output: unknown format '", options.output, "' (expected text or json)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ListEventsRequest> EventFilterRequest(std::string_view host,
                                                         std::string_view kind,
                                                         std::string_view name,
                                                         std::string_view type) {
  auto kind_name = KindName(common::ToAbslView(kind));
  if (!kind_name.ok()) return kind_name.status();
  auto type_value = TypeValue(common::ToAbslView(type));
  if (!type_value.ok()) return type_value.status();
  v1::ListEventsRequest filter;
  filter.set_involved_object_kind(*kind_name);
  filter.set_involved_object_name(std::string(name));
  filter.set_host_id(std::string(host));
  filter.set_type(*type_value);
  return filter;
}

absl::Status RunWatch(const WatchOptions& options, FleetClient& client, const CommandContext& ctx) {
  auto filter = EventFilterRequest(options.host, options.kind, options.name, options.type);
  if (!filter.ok()) return filter.status();
  v1::WatchEventsRequest request;
  *request.mutable_filter() = *std::move(filter);
  request.mutable_filter()->set_audit(options.audit);

  std::ostream& out = *ctx.streams.out;
  absl::Status print_status;
  const bool json = options.output == "json";
  auto on_event = [&](const v1::Event& event) {
    if (json) {
      auto text = MessageToJson(event);
      if (!text.ok()) {
        if (print_status.ok()) print_status = text.status();
        return;
      }
      // One compact document per line (JSON Lines).
      out << nlohmann::ordered_json::parse(*text).dump() << '\n';
    } else {
      out << FormatEventLine(event) << '\n';
    }
    out.flush();
  };
  absl::Status status = client.WatchEvents(request, on_event, ctx.stop);
  if (!status.ok()) return status;
  return print_status;
}

}  // namespace rxfleet::cli
