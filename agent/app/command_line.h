#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/app/agent.h"
#include "agent/link/credentials.h"

namespace rxfleet::agent {

/// Exit codes of rxfleet-agent (also in --help and docs/AGENT.md).
inline constexpr int kExitOk = 0;       ///< done (also with unsupported adapters or none at all)
inline constexpr int kExitRuntime = 1;  ///< fatal runtime error, e.g. libusb cannot start
inline constexpr int kExitUsage = 2;    ///< bad flags, config file or policy files

/// How --once prints its report.
enum class OutputFormat { kTable, kJson };

struct CommandLine {
  AgentOptions options;
  OutputFormat output = OutputFormat::kTable;
  /// --server HOST:PORT[,HOST:PORT...]: the rxfleet-server entries (replicas), validated by
  /// ParseServerAddresses (agent/link/server_list.h), in the given order; not with --once;
  /// empty = local policies only.
  std::vector<std::string> servers;
  /// --tls-ca/--tls-cert/--tls-key for the server link (all three required with --server
  /// unless --insecure); unset = plaintext (--insecure).
  std::optional<LinkTlsFiles> server_tls;
};

/// Parses rxfleet-agent's flags (CLI11) and the optional --config file into validated options.
/// Returns the command line, or the exit code to end with right away: kExitOk after --help or
/// --version (text written to `out`), kExitUsage after a usage or config error (message written
/// to `err`, config errors as "FILE:LINE: ...").
std::variant<CommandLine, int> ParseCommandLine(int argc, const char* const* argv,
                                                std::ostream& out, std::ostream& err);

/// Parses a period flag: an absl duration ("200ms", "10s", "1m30s") or plain seconds ("10").
/// InvalidArgument unless it is > 0.
absl::StatusOr<absl::Duration> ParsePeriod(const std::string& text);

/// Applies a YAML agent config file to `options` (before flags are applied). Keys:
///   hostId: h1                  labels: {board: pi1}        policyFiles: [/etc/x.yaml]
///   reconcilePeriod: 10s        rescanPeriod: 30s           statusSocket: /run/x.sock | none
///   metricsAddress: 127.0.0.1:9477 | none                   stateDir: /var/lib/rxfleet/agent
///   probeTarget: none | gateway | 192.0.2.1                metricWindow: 60s
///   sysfsRoot: /sys             procfsRoot: /proc
/// Errors: InvalidArgument "FILE:LINE: KEY: problem" for malformed YAML, unknown keys, wrong
/// types or bad values; NotFound if the file cannot be read.
absl::Status ApplyConfigFile(const std::string& path, AgentOptions& options);

}  // namespace rxfleet::agent
