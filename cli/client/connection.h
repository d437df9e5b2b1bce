#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rxfleet::cli {

/// Address rxfleetctl uses when neither --server, RXFLEET_SERVER nor the config file names one:
/// the default listen address of rxfleet-server.
inline constexpr std::string_view kDefaultServerAddress = "127.0.0.1:7443";

/// Per-call gRPC deadline when --timeout is not given.
inline constexpr absl::Duration kDefaultTimeout = absl::Seconds(10);

/// Where the agent serves LocalStatusService when --local-socket is not given.
inline constexpr std::string_view kDefaultAgentSocket = "/run/rxfleet/agent.sock";

/// Environment variables rxfleetctl reads.
inline constexpr std::string_view kServerEnv = "RXFLEET_SERVER";
inline constexpr std::string_view kTokenEnv = "RXFLEET_TOKEN";

/// Looks up an environment variable; nullopt if unset. Injected so tests control it.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// Connection settings given on the command line; unset fields were not given.
struct ConnectionFlags {
  std::optional<std::string> server;     ///< --server HOST:PORT
  std::optional<std::string> token;      ///< --token
  bool insecure = false;                 ///< --insecure
  std::optional<std::string> ca_file;    ///< --ca-file
  std::optional<std::string> cert_file;  ///< --cert-file
  std::optional<std::string> key_file;   ///< --key-file
  std::optional<std::string> timeout;    ///< --timeout, e.g. "10s", "500ms", "30"
  std::optional<std::string> config;     ///< --config PATH (replaces the default path)
};

/// The settings of a config file. Relative TLS file paths are already resolved against the
/// directory of the config file.
struct ConfigFile {
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<bool> insecure;
  std::optional<std::string> ca_file;
  std::optional<std::string> cert_file;
  std::optional<std::string> key_file;
  std::optional<absl::Duration> timeout;
};

/// Parses a config file:
///   server: fleet.example.net:7443
///   token: s3cret
///   insecure: true            # plaintext (TLS is the default)
///   ca_file: ca.pem           # the fleet CA (else the system roots)
///   cert_file: client.pem     # with key_file: client certificate
///   key_file: client.key
///   timeout: 10s
/// Strict: InvalidArgument "PATH:LINE:COLUMN: ..." for malformed YAML, unknown or duplicate keys
/// (named) and wrong value types. An empty file has no settings.
absl::StatusOr<ConfigFile> ParseConfigFile(std::string_view text, std::string_view path);

/// Parses a --timeout value: an absl duration ("10s", "1.5s", "500ms", "2m") or a plain number
/// of seconds ("30"). InvalidArgument unless it is positive.
absl::StatusOr<absl::Duration> ParseTimeout(std::string_view text);

/// The default config path: $XDG_CONFIG_HOME/rxfleet/config.yaml, else
/// $HOME/.config/rxfleet/config.yaml; empty if neither variable is set.
std::string DefaultConfigPath(const EnvLookup& env);

/// Resolved settings of one connection to rxfleet-server.
struct ConnectionSettings {
  std::string server;         ///< gRPC target, e.g. "127.0.0.1:7443"
  std::string server_origin;  ///< where `server` came from: "--server", "RXFLEET_SERVER",
                              ///< the config file path, or "default"
  std::string token;          ///< empty = no authorization metadata
  bool tls = false;           ///< false = plaintext (insecure channel)
  std::string ca_file;        ///< TLS root certificates; empty = system roots
  std::string cert_file;      ///< client certificate chain; empty = none
  std::string key_file;       ///< client private key; set exactly when cert_file is
  absl::Duration timeout = kDefaultTimeout;  ///< deadline of every unary call
};

/// Resolves the connection with precedence flag > environment > config file > default, per
/// setting (server, token, timeout). The transport is decided as a whole by the highest source
/// that says anything about it (--insecure or a TLS file flag, else the config file's
/// insecure/TLS keys, else TLS with the system roots), so a flag never mixes with the file's TLS
/// settings. The config file is flags.config if given (it must exist), else DefaultConfigPath (a
/// missing default file is no error). Errors (InvalidArgument, naming the flag or file): unreadable
/// or invalid config file, invalid --timeout, an empty server address, insecure together with TLS
/// files from the same source, a client certificate without its key or the reverse.
absl::StatusOr<ConnectionSettings> ResolveConnection(const ConnectionFlags& flags,
                                                     const EnvLookup& env);

}  // namespace rxfleet::cli
