#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "cli/client/fleet_client.h"
#include "cli/commands/command.h"
#include "cli/commands/get.h"
#include "cli/output/describe.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/policy.pb.h"

namespace rxfleet::cli {

/// How many of an object's most recent events describe shows.
inline constexpr size_t kDescribeEventCount = 20;

/// Options of `rxfleetctl describe host|adapter|policy NAME`.
struct DescribeOptions {
  ResourceKind kind = ResourceKind::kAdapter;
  /// Host name, HOST/ADAPTER, or policy name.
  std::string name;
};

/// Adds `describe` with the subcommands `host`, `adapter`, `policy` (plural aliases).
void AddDescribeCommand(CLI::App& root, SelectedCommand* selected);

/// NAME present; for adapters HOST/ADAPTER. InvalidArgument otherwise.
absl::Status ValidateDescribeOptions(const DescribeOptions& options);

/// The probe `policies` decide for `adapter`: common::ResolveProbe over the policies that pass
/// common::PolicyFromProto (the server resolves over its valid policies alone), the adapter's
/// attributes as the server reads them (host labels = adapter metadata.labels). nullopt when
/// no matching valid policy sets a probe.
std::optional<AdapterProbe> ResolveAdapterProbe(const v1::Adapter& adapter,
                                                const std::vector<v1::Policy>& policies);

/// Fetches the object (adapters through ExplainAdapter, for the provenance, and every policy,
/// for the adapter's probe), what belongs to
/// it (a host's adapters) and its kDescribeEventCount most recent events, and prints them.
/// NOT_FOUND if the object does not exist.
absl::Status RunDescribe(const DescribeOptions& options, FleetClient& client,
                         const CommandContext& ctx);

}  // namespace rxfleet::cli
