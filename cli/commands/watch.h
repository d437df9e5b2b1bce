#pragma once

#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Options of `rxfleetctl watch`.
struct WatchOptions {
  /// --host: only events of this host.
  std::string host;
  /// --kind: only events about host, adapter, policy or experiment objects.
  std::string kind;
  /// --name: only events about objects with this name (e.g. an adapter id or policy name).
  std::string name;
  /// --type: normal or warning; empty = both.
  std::string type;
  /// --audit: the audit log (API writes) instead of fleet events.
  bool audit = false;
  /// -o/--output: "text" (one line per event) or "json" (one JSON object per line).
  std::string output = "text";
};

/// The ListEvents filter of --host, --kind (host|adapter|policy|experiment, any case, plural
/// too), --name and --type (normal|warning): kind as Event.involved_object.kind spells it
/// ("Adapter"). InvalidArgument naming the flag for an unknown kind or type.
absl::StatusOr<v1::ListEventsRequest> EventFilterRequest(std::string_view host,
                                                         std::string_view kind,
                                                         std::string_view name,
                                                         std::string_view type);

/// Adds `watch` to `root`.
void AddWatchCommand(CLI::App& root, SelectedCommand* selected);

/// Checks --kind, --type and -o values. InvalidArgument naming the flag.
absl::Status ValidateWatchOptions(const WatchOptions& options);

/// Streams matching events to stdout, flushing after each, until ctx.stop is triggered
/// (SIGINT/SIGTERM: returns OK) or the server ends the stream (UNAVAILABLE, exit 1).
absl::Status RunWatch(const WatchOptions& options, FleetClient& client, const CommandContext& ctx);

}  // namespace rxfleet::cli
