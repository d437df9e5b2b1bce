#pragma once

// The server's HTTP endpoint (prometheus-cpp Exposer on civetweb):
//   GET /metrics    Prometheus text exposition of the server's registry (ServerMetrics);
//   GET /sd/agents  Prometheus HTTP service discovery (http_sd_configs): one target group per
//                   agent that announced a metrics address, with its host labels;
//   GET /healthz    200 "ok\n" while the process serves HTTP.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"
#include "server/http/sd_target.h"
#include "server/registry/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace rxfleet::server {

/// Default HTTP listen address: loopback, next to the agent's 9477.
inline constexpr std::string_view kDefaultHttpListen = "127.0.0.1:9478";

/// civetweb request_timeout_ms: a connection that has not sent a complete request (or read the
/// answer) this long after it was accepted is closed, freeing its worker thread.
inline constexpr int kHttpRequestTimeoutMs = 5000;

/// The /sd/agents body: a JSON array of {"targets": [metrics_address], "labels": {...}} with,
/// per target, every host label (names sanitised to Prometheus label syntax: characters
/// outside [a-zA-Z0-9_] become '_', a leading digit gets a '_' prefix), `host` = host id, and
/// `__meta_rxfleet_connected` / `__meta_rxfleet_stale` ("true"/"false") for relabelling.
/// Reserved label names are never taken from host labels: `job`, `instance`, `host` and every
/// name starting with `__` (Prometheus reads `__address__`, `__scheme__`, `__metrics_path__`
/// and `__param_*` from service discovery). Targets that CheckSdTarget refuses under `policy`
/// are left out; each is described in `*refused` (if given) as "host H: reason".
std::string ServiceDiscoveryJson(const std::vector<Registry::MetricsTarget>& targets,
                                 const SdTargetPolicy& policy = {},
                                 std::vector<std::string>* refused = nullptr);

struct HttpServerOptions {
  /// HOST:PORT or [IPv6]:PORT; port 0 = any free port (tests).
  std::string address = std::string(kDefaultHttpListen);
  /// civetweb worker threads, 1..16. Each open connection holds one until it is done or
  /// kHttpRequestTimeoutMs passes, so a few idle TCP connections cannot stop a scrape.
  int threads = 8;
};

class HttpServer {
 public:
  /// Produces the current /sd/agents body; called on an HTTP thread for every request.
  using SdSource = std::function<std::string()>;

  /// Binds and serves. InvalidArgument for a malformed address or thread count; Unavailable
  /// if the address cannot be bound (with civetweb's reason).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options, std::shared_ptr<prometheus::Registry> registry,
      SdSource sd_source);
  /// Stops serving (joins the HTTP threads).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound port (the real one when 0 was asked for).
  int port() const { return port_; }
  /// /healthz answers `200 ok` while serving (the default) and `503 draining` after
  /// SetServing(false) (the server's drain, like the gRPC health service's NOT_SERVING).
  /// Any thread.
  void SetServing(bool serving);

 private:
  HttpServer() = default;

  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace rxfleet::server
