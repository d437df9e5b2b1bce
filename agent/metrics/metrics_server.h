#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace rxfleet::agent {

/// Default listen address of the agent's metrics endpoint. Loopback only: exposing metrics to
/// the network is an explicit operator choice (--metrics-address 0.0.0.0:9477). 9477 is inside
/// the Prometheus exporter range (9100-9999, fully allocated in the project's port list) and
/// clear of the ports commonly run on the same hosts (Prometheus 9090, Pushgateway 9091,
/// Alertmanager 9093, node_exporter 9100, blackbox_exporter 9115).
inline constexpr std::string_view kDefaultMetricsAddress = "127.0.0.1:9477";

/// civetweb request_timeout_ms: a connection that has not sent a complete request (or read the
/// answer) this long after it was accepted is closed, freeing its worker thread.
inline constexpr int kHttpRequestTimeoutMs = 5000;

/// A parsed HOST:PORT listen address.
struct ListenAddress {
  std::string host;  ///< IPv4 literal ("127.0.0.1", "0.0.0.0") or IPv6 literal without brackets
  int port = 0;      ///< 0..65535; 0 = any free port
};

/// Parses "HOST:PORT", "[V6]:PORT" or ":PORT" (all IPv4 interfaces). HOST must be an IP literal
/// (no name resolution). InvalidArgument naming the input otherwise.
absl::StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

struct MetricsServerOptions {
  /// HOST:PORT, see ParseListenAddress. Port 0 binds any free port (tests); read it back with
  /// MetricsServer::port().
  std::string address = std::string(kDefaultMetricsAddress);
  /// HTTP worker threads. 1..16. Each open connection holds one until it is done or
  /// kHttpRequestTimeoutMs passes, so a few idle TCP connections cannot stop a scrape.
  int threads = 8;
};

/// The agent's HTTP endpoint (prometheus-cpp Exposer on civetweb):
///   GET /metrics   the registry in the Prometheus text format (0.0.4), gzip if requested;
///                  a scrape only serialises the registry (collectors run on their own
///                  schedule), so it never does I/O or blocks on devices.
///   GET /healthz   200 "ok\n" (text/plain) while the process serves HTTP.
/// Other paths answer 404. Stopping = destroying the object (joins the HTTP threads).
class MetricsServer {
 public:
  /// Binds and starts serving `registry` (kept alive by the server). Errors: InvalidArgument for
  /// a malformed address or thread count; Unavailable if the address cannot be bound (in use,
  /// not local), with civetweb's message.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const MetricsServerOptions& options, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The bound TCP port (the real one when port 0 was requested).
  int port() const { return port_; }
  /// The bound host as given in the options.
  const std::string& host() const { return host_; }

 private:
  MetricsServer() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;
  int port_ = 0;
};

}  // namespace rxfleet::agent
