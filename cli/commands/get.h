#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// The kinds `get` and `describe` know (`describe` has no events).
enum class ResourceKind { kHost, kAdapter, kPolicy, kExperiment, kEvent };

/// "hosts, adapters, policies, experiments, events": the types `get` lists in its
/// "unknown resource type" error.
inline constexpr char kGetResourceTypes[] = "hosts, adapters, policies, experiments, events";

/// Options of `rxfleetctl get hosts|adapters|policies|experiments|events [NAME]`.
struct GetOptions {
  ResourceKind kind = ResourceKind::kAdapter;
  /// One object: host name, HOST/ADAPTER, or policy name; empty lists all.
  std::string name;
  /// -l/--selector: label selector over (host) labels, e.g. "board=pi1,arch!=armv6l".
  std::string label_selector;
  /// --field-selector: built-in fields, e.g. "usb_speed=super,chip=rtl8922au" (hosts and
  /// adapters only).
  std::string field_selector;
  /// -o/--output: table, wide, json, yaml, name.
  std::string output = "table";
  /// --include-gone: also list unplugged adapters (adapters only).
  bool include_gone = false;
  /// Events only: --host, --kind (host|adapter|policy|experiment), --name, --type
  /// (normal|warning) filters, as for `watch`.
  std::string event_host;
  /// Newest events to show (`--limit`), 1..10000.
  size_t event_limit = 500;
  std::string event_kind;
  std::string event_name;
  std::string event_type;
  /// --audit (events only): the audit log (API changes: who, what, resource versions).
  bool event_audit = false;
};

/// The field selector keys of a kind: hosts "connected, stale"; adapters "usb_speed, chip,
/// vid_pid, host, adapter"; empty for kinds without a field selector.
std::vector<std::string> FieldSelectorKeys(ResourceKind kind);

/// Adds `get` with the subcommands `hosts`, `adapters`, `policies`, `experiments` and `events`
/// (singular aliases) to `root`; parsing one of them fills `selected`. Any other TYPE is a
/// usage error listing the valid types.
void AddGetCommand(CLI::App& root, SelectedCommand* selected);

/// Checks the options before any call: output format; label selector syntax (common's
/// ParseLabelSelector); field selectors only for hosts and adapters, every key one of
/// FieldSelectorKeys (else a UsageError, exit 2, listing them) and every value valid (hosts:
/// true|false; adapters: common's ParseFieldSelector); NAME of an adapter as HOST/ADAPTER;
/// NAME not combined with selectors. InvalidArgument naming the flag.
absl::Status ValidateGetOptions(const GetOptions& options);

/// Fetches (all pages) and prints. Tables go to stdout; an empty list prints
/// "No resources found." on stderr and succeeds (json/yaml still print the empty list).
/// A missing NAME is NOT_FOUND from the server.
absl::Status RunGet(const GetOptions& options, FleetClient& client, const CommandContext& ctx);

}  // namespace rxfleet::cli
