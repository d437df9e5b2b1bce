// The metrics endpoint over real HTTP on loopback (port 0), checked by promtool.
#include "agent/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/metrics/populated_registry.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::agent::testing::PopulatedRegistry;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct HttpResponse {
  int status = 0;
  std::string headers;
  std::string body;
};

// A minimal HTTP/1.0 GET against 127.0.0.1:port (the server closes after the response).
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     const std::string& method = "GET") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError("connect: " + err);
  }
  const std::string request =
      method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::InternalError("send failed");
  }
  std::string raw;
  char buf[8192];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      return absl::DeadlineExceededError("recv: " + err);
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t split = raw.find("\r\n\r\n");
  if (split == std::string::npos || raw.rfind("HTTP/1.", 0) != 0) {
    return absl::DataLossError("malformed response: " + raw.substr(0, 200));
  }
  HttpResponse response;
  response.status = std::stoi(raw.substr(9, 3));
  response.headers = raw.substr(0, split);
  response.body = raw.substr(split + 4);
  return response;
}

std::unique_ptr<MetricsServer> StartOnAnyPort(std::shared_ptr<prometheus::Registry> registry) {
  MetricsServerOptions options;
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(options, std::move(registry));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(MetricsServerTest, ServesMetricsAndHealthOnAnEphemeralPort) {
  PopulatedRegistry populated;
  std::unique_ptr<MetricsServer> server = StartOnAnyPort(populated.registry());
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->host(), "127.0.0.1");

  absl::StatusOr<HttpResponse> metrics = HttpGet(server->port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->headers, HasSubstr("Content-Type: text/plain"));
  EXPECT_THAT(metrics->body, HasSubstr("# HELP rxfleet_adapter_info "));
  EXPECT_THAT(metrics->body, HasSubstr("rxfleet_adapter_receive_bytes_total{adapter=\"port-2-2\"} "
                                       "125000000"));
  EXPECT_THAT(metrics->body, HasSubstr("rxfleet_host_busiest_core_ratio 0.65"));

  absl::StatusOr<HttpResponse> health = HttpGet(server->port(), "/healthz");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  EXPECT_THAT(health->headers, HasSubstr("text/plain"));

  absl::StatusOr<HttpResponse> head = HttpGet(server->port(), "/healthz", "HEAD");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");

  absl::StatusOr<HttpResponse> missing = HttpGet(server->port(), "/nope");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->status, 404);
}

// civetweb ran with 2 workers and a 30 s request timeout: two TCP connections that never send
// a request held both, and Prometheus' scrape timed out for as long as they were renewed.
TEST(MetricsServerTest, IdleConnectionsDoNotStopAScrape) {
  PopulatedRegistry populated;
  std::unique_ptr<MetricsServer> server = StartOnAnyPort(populated.registry());
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(fd);
  }
  absl::StatusOr<HttpResponse> metrics = HttpGet(server->port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("rxfleet_adapter_info"));
  absl::StatusOr<HttpResponse> health = HttpGet(server->port(), "/healthz");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  for (int fd : idle) ::close(fd);
}

TEST(MetricsServerTest, PromtoolAcceptsTheExposition) {
  const std::string promtool = "/usr/bin/promtool";
  if (::access(promtool.c_str(), X_OK) != 0) {
    GTEST_SKIP() << promtool << " not installed (Debian package prometheus)";
  }
  PopulatedRegistry populated;
  std::unique_ptr<MetricsServer> server = StartOnAnyPort(populated.registry());
  ASSERT_NE(server, nullptr);
  absl::StatusOr<HttpResponse> metrics = HttpGet(server->port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ::rxfleet::testing::TempDir dir;
  const std::string file = dir.File("exposition.txt");
  ASSERT_TRUE(::rxfleet::testing::WriteTextFile(file, metrics->body).ok());
  const ::rxfleet::testing::ProcessResult result = ::rxfleet::testing::RunProcess(
      {"/bin/sh", "-c", promtool + " check metrics < '" + file + "'"}, absl::Seconds(60));
  EXPECT_EQ(result.exit_code, 0) << "promtool check metrics:\n"
                                 << result.stdout_text << result.stderr_text;
}

TEST(MetricsServerTest, ReportsBindFailuresAndBadOptions) {
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> first = StartOnAnyPort(registry);
  ASSERT_NE(first, nullptr);
  MetricsServerOptions options;
  options.address = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<MetricsServer>> second = MetricsServer::Start(options, registry);
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  // Said in plain words, not civetweb's "null context when constructing CivetServer".
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr(
                  absl::StrCat("--metrics-address: ", options.address, " is already in use")));
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::Not(::testing::HasSubstr("null context")));

  options.address = "localhost:9477";
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsServer::Start(options, registry).status()));
  options.address = "127.0.0.1:0";
  options.threads = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsServer::Start(options, registry).status()));
  options.threads = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsServer::Start(options, nullptr).status()));
}

TEST(MetricsServerTest, StopsWhenDestroyed) {
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> server = StartOnAnyPort(registry);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  ASSERT_TRUE(HttpGet(port, "/healthz").ok());
  server.reset();
  EXPECT_FALSE(HttpGet(port, "/healthz").ok());
}

}  // namespace
}  // namespace rxfleet::agent
