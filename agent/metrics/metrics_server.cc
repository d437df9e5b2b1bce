#include "agent/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "civetweb.h"
#include "common/listen_error.h"
#include "common/string_view_compat.h"
#include "prometheus/exposer.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

constexpr char kHealthBody[] = "ok\n";

// civetweb's begin_request hook runs before URI handlers: answer /healthz here and let every
// other request through to the Exposer's handlers (returning 0 = not handled).
int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr ||
      std::strcmp(info->local_uri, "/healthz") != 0) {
    return 0;
  }
  const bool head =
      info->request_method != nullptr && std::strcmp(info->request_method, "HEAD") == 0;
  mg_send_http_ok(conn, "text/plain; charset=utf-8", sizeof(kHealthBody) - 1);
  if (!head) mg_write(conn, kHealthBody, sizeof(kHealthBody) - 1);
  return 200;  // handled; the value is the status for civetweb's access log
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  auto invalid = [text](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address \"", ToAbslView(text),
                                                   "\": ", ToAbslView(why),
                                                   " (expected HOST:PORT, [IPv6]:PORT or :PORT)"));
  };
  ListenAddress out;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalid("unterminated IPv6 literal or missing port");
    }
    out.host = std::string(text.substr(1, close - 1));
    in6_addr v6{};
    if (inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) return invalid("bad IPv6 address");
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return invalid("missing port");
    out.host = std::string(text.substr(0, colon));
    if (out.host.empty()) out.host = "0.0.0.0";
    in_addr v4{};
    if (inet_pton(AF_INET, out.host.c_str(), &v4) != 1) {
      return invalid("host must be an IPv4 literal, or an IPv6 literal in brackets");
    }
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty() || !absl::SimpleAtoi(ToAbslView(port_text), &out.port) || out.port < 0 ||
      out.port > 65535 || port_text.front() == '+' || port_text.front() == '-') {
    return invalid("port must be 0..65535");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const MetricsServerOptions& options, std::shared_ptr<prometheus::Registry> registry) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(options.address);
  if (!address.ok()) return address.status();
  if (options.threads < 1 || options.threads > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics server threads ", options.threads, " out of range 1..16"));
  }
  if (registry == nullptr) return absl::InvalidArgumentError("metrics server needs a registry");

  const bool v6 = address->host.find(':') != std::string::npos;
  const std::string listening = v6 ? absl::StrCat("[", address->host, "]:", address->port)
                                   : absl::StrCat(address->host, ":", address->port);

  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->registry_ = std::move(registry);
  server->host_ = address->host;
  CivetCallbacks callbacks;
  callbacks.begin_request = &BeginRequest;
  try {
    // The callbacks are copied by civetweb when the server starts.
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listening, "num_threads",
                                 std::to_string(options.threads),
                                 // An idle or slow client holds a worker only this long
                                 // (civetweb's default is 30 s).
                                 "request_timeout_ms", std::to_string(kHttpRequestTimeoutMs)},
        &callbacks);
  } catch (const std::exception& e) {
    return common::ListenError("--metrics-address", listening, e.what());
  }
  server->exposer_->RegisterCollectable(server->registry_);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics server on ", options.address, " reports no listening port"));
  }
  server->port_ = ports.front();
  return server;
}

namespace {

// Opens and closes one TCP connection to host:port (wildcard hosts via loopback).
void Knock(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (v6) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    if (host == "::" || inet_pton(AF_INET6, host.c_str(), &addr.sin6_addr) != 1) {
      addr.sin6_addr = in6addr_loopback;
    }
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (host == "0.0.0.0" || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ::close(fd);
}

}  // namespace

MetricsServer::~MetricsServer() {
  if (exposer_ == nullptr) return;
  // civetweb's accept loop polls its listening socket in 2 s quanta and only then notices the
  // stop flag; knocking on the port while the Exposer shuts down makes shutdown take
  // milliseconds instead of up to 2 s.
  absl::Mutex mu;
  bool done = false;
  std::thread knocker([&] {
    absl::MutexLock lock(&mu);
    while (!done) {
      mu.Unlock();
      Knock(host_, port_);
      mu.Lock();
      mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(20));
    }
  });
  exposer_.reset();
  {
    absl::MutexLock lock(&mu);
    done = true;
  }
  knocker.join();
}

}  // namespace rxfleet::agent
