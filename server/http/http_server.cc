#include "server/http/http_server.h"

#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "CivetServer.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "civetweb.h"
#include "common/listen_error.h"
#include "nlohmann/json.hpp"
#include "prometheus/exposer.h"

namespace rxfleet::server {
namespace {

constexpr char kHealthBody[] = "ok\n";
constexpr char kDrainingBody[] = "draining\n";

// civetweb's begin_request hook is a plain function and the Exposer does not expose its
// civetweb context, so the hook finds the service discovery source by the port the request
// arrived on. Each HttpServer registers its port after binding and removes it on destruction.
absl::Mutex sources_mu(absl::kConstInit);
std::map<int, HttpServer::SdSource>& Sources() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sources_mu) {
  static auto* sources = new std::map<int, HttpServer::SdSource>();
  return *sources;
}

// Ports of HttpServers whose process is draining (SetServing(false)): their /healthz says so.
std::set<int>& DrainingPorts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sources_mu) {
  static auto* ports = new std::set<int>();
  return *ports;
}

void Reply(mg_connection* conn, bool head, const char* type, const std::string& body) {
  mg_send_http_ok(conn, type, static_cast<long long>(body.size()));
  if (!head) mg_write(conn, body.data(), body.size());
}

// Answers /healthz and /sd/agents; returns 0 to let the Exposer handle everything else.
int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr) return 0;
  const bool head =
      info->request_method != nullptr && std::strcmp(info->request_method, "HEAD") == 0;
  if (std::strcmp(info->local_uri, "/healthz") == 0) {
    bool draining = false;
    {
      absl::MutexLock lock(&sources_mu);
      draining = DrainingPorts().count(info->server_port) > 0;
    }
    if (!draining) {
      Reply(conn, head, "text/plain; charset=utf-8", kHealthBody);
      return 200;
    }
    // 503 while draining, so HTTP health checks take the replica out before it stops.
    mg_response_header_start(conn, 503);
    mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
    mg_response_header_add(conn, "Content-Length",
                           std::to_string(sizeof(kDrainingBody) - 1).c_str(), -1);
    mg_response_header_add(conn, "Connection", "close", -1);
    mg_response_header_send(conn);
    if (!head) mg_write(conn, kDrainingBody, sizeof(kDrainingBody) - 1);
    return 503;
  }
  if (std::strcmp(info->local_uri, "/sd/agents") == 0) {
    HttpServer::SdSource source;
    {
      absl::MutexLock lock(&sources_mu);
      auto it = Sources().find(info->server_port);
      if (it != Sources().end()) source = it->second;
    }
    if (!source) return 0;  // not ours (yet): 404 from the Exposer
    Reply(conn, head, "application/json", source());
    return 200;
  }
  return 0;
}

std::string SanitiseLabelName(const std::string& key) {
  std::string out;
  for (char c : key) {
    out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_');
  }
  if (out.empty() || absl::ascii_isdigit(static_cast<unsigned char>(out.front()))) {
    out.insert(out.begin(), '_');
  }
  return out;
}

// Labels Prometheus or rxfleet set themselves; a host label must not override them.
bool IsReservedLabel(const std::string& name) {
  return name == "job" || name == "instance" || name == "host" || absl::StartsWith(name, "__");
}

}  // namespace

std::string ServiceDiscoveryJson(const std::vector<Registry::MetricsTarget>& targets,
                                 const SdTargetPolicy& policy, std::vector<std::string>* refused) {
  nlohmann::json groups = nlohmann::json::array();
  for (const Registry::MetricsTarget& target : targets) {
    if (absl::Status allowed = CheckSdTarget(target.address, target.peer_address, policy);
        !allowed.ok()) {
      if (refused != nullptr) {
        refused->push_back(absl::StrCat("host ", target.host_id, ": ", allowed.message()));
      }
      continue;
    }
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [key, value] : target.labels) {
      const std::string name = SanitiseLabelName(key);
      if (IsReservedLabel(name)) continue;
      labels[name] = value;
    }
    labels["host"] = target.host_id;
    labels["__meta_rxfleet_connected"] = target.connected ? "true" : "false";
    labels["__meta_rxfleet_stale"] = target.stale ? "true" : "false";
    groups.push_back({{"targets", {target.address}}, {"labels", std::move(labels)}});
  }
  return groups.dump();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, std::shared_ptr<prometheus::Registry> registry,
    SdSource sd_source) {
  const size_t colon = options.address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listen address '", options.address,
                                                   "' is not HOST:PORT (port 0..65535)"));
  }
  if (options.threads < 1 || options.threads > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP threads ", options.threads, " out of range 1..16"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  CivetCallbacks callbacks;
  callbacks.begin_request = &BeginRequest;
  try {
    // civetweb copies the callbacks when it starts.
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", options.address, "num_threads",
                                 std::to_string(options.threads),
                                 // An idle or slow client holds a worker only this long
                                 // (civetweb's default is 30 s).
                                 "request_timeout_ms", std::to_string(kHttpRequestTimeoutMs)},
        &callbacks);
  } catch (const std::exception& e) {
    return common::ListenError("--http-listen", options.address, e.what());
  }
  server->exposer_->RegisterCollectable(registry);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("HTTP server on ", options.address, " reports no listening port"));
  }
  server->port_ = ports.front();
  absl::MutexLock lock(&sources_mu);
  Sources()[server->port_] = std::move(sd_source);
  return server;
}

void HttpServer::SetServing(bool serving) {
  absl::MutexLock lock(&sources_mu);
  if (serving) {
    DrainingPorts().erase(port_);
  } else {
    DrainingPorts().insert(port_);
  }
}

HttpServer::~HttpServer() {
  {
    absl::MutexLock lock(&sources_mu);
    Sources().erase(port_);
    DrainingPorts().erase(port_);
  }
  exposer_.reset();
}

}  // namespace rxfleet::server
