#include "agent/probes/iperf_probe.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// iperf_api.h needs uint64_t declared first.
#include <iperf_api.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/probes/iperf_errors.h"
#include "agent/probes/iperf_json.h"

namespace rxfleet::agent {
namespace {

// One libiperf test at a time in the process (i_errno, timers and getopt are globals).
absl::Mutex& IperfMutex() {
  static absl::Mutex* const mutex = new absl::Mutex();
  return *mutex;
}

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// True if `fd` is a TCP socket connected to `port` on the server: the watchdog checks this
// before shutting the control connection down, so a descriptor libiperf closed and the process
// reused for something else is never touched.
bool IsControlConnection(int fd, uint16_t port) {
  if (fd < 0) return false;
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return false;
  int type = 0;
  socklen_t type_length = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM) {
    return false;
  }
  if (peer.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&peer)->sin_port) == port;
  }
  if (peer.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_port) == port;
  }
  return false;
}

ProbeResult Failed(ProbeResult result, ProbeFailure failure, std::string_view message) {
  result.ok = false;
  result.failure = failure;
  result.failure_message = BoundedFailureMessage(message);
  return result;
}

}  // namespace

std::vector<std::string> IperfClientArguments(const common::ProbeSpec& spec,
                                              const std::string& bind_address,
                                              const std::string& netdev,
                                              const IperfProbeOptions& options) {
  std::vector<std::string> args = {
      "rxfleet-agent",
      "-c",
      spec.server_host,
      "-p",
      std::to_string(spec.server_port),
      "-4",
      "-B",
      absl::StrCat(bind_address, "%", netdev),
      "-t",
      std::to_string(absl::ToInt64Seconds(spec.duration)),
      "-P",
      std::to_string(spec.parallel_streams),
  };
  if (spec.direction == common::ProbeDirection::kReverse) args.push_back("-R");
  if (spec.protocol == common::ProbeProtocol::kUdp) {
    args.insert(args.end(), {"-u", "-b", std::to_string(spec.udp_rate_bps)});
  }
  args.insert(args.end(), {"-J", "--logfile", "/dev/null", "--connect-timeout",
                           std::to_string(Millis(options.connect_timeout))});
  // libiperf accepts a receive timeout only for a receiving client (IERVRSONLYRCVTIMEOUT).
  if (spec.direction == common::ProbeDirection::kReverse) {
    args.insert(args.end(), {"--rcv-timeout", std::to_string(Millis(options.receive_timeout))});
  }
  return args;
}

IperfProbeRunner::IperfProbeRunner(IperfProbeOptions options) : options_(std::move(options)) {}

ProbeResult IperfProbeRunner::Run(const ProbeRequest& request) {
  ProbeResult result;
  result.spec = request.spec;
  result.attempts = 1;
  result.start_time = absl::Now();
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&](ProbeResult r) {
    r.duration = absl::FromChrono(std::chrono::steady_clock::now() - started);
    return r;
  };

  absl::StatusOr<std::vector<InterfaceAddress>> interfaces = options_.interfaces();
  if (!interfaces.ok()) {
    return finish(Failed(std::move(result), ProbeFailure::kError,
                         std::string(interfaces.status().message())));
  }
  absl::StatusOr<std::string> address = PickNetdevIpv4(*interfaces, request.netdev);
  if (!address.ok()) {
    return finish(Failed(std::move(result), ProbeFailure::kInterfaceDown,
                         std::string(address.status().message())));
  }

  std::vector<std::string> args =
      IperfClientArguments(request.spec, *address, request.netdev, options_);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  absl::MutexLock lock(&IperfMutex());
  iperf_test* test = iperf_new_test();
  if (test == nullptr) {
    return finish(Failed(std::move(result), ProbeFailure::kError, "iperf_new_test failed"));
  }
  i_errno = IENONE;
  iperf_defaults(test);
  optind = 0;  // getopt: start over (glibc re-initialises on 0)
  if (iperf_parse_arguments(test, static_cast<int>(args.size()), argv.data()) < 0) {
    const int code = i_errno;
    iperf_free_test(test);
    return finish(Failed(std::move(result), ProbeFailure::kError,
                         absl::StrCat("iperf3 options: ", IperfErrorText(code))));
  }

  // The watchdog: at the hard limit, or when the agent stops (Cancel), shut the control
  // connection down. libiperf's select loop then sees it closed and ends the test (and a
  // blocking read on it returns 0). Repeated every 100 ms until the attempt ends: a test still
  // connecting has no control socket yet.
  {
    absl::MutexLock state(&mu_);
    if (cancelled_) {
      iperf_free_test(test);
      return finish(
          Failed(std::move(result), ProbeFailure::kError, "cancelled: the agent is stopping"));
    }
    finished_ = false;
  }
  std::atomic<bool> timed_out{false};
  const absl::Duration limit = request.spec.duration + options_.timeout_margin;
  const uint16_t port = request.spec.server_port;
  std::thread watchdog([this, &timed_out, test, limit, port] {
    absl::MutexLock state(&mu_);
    auto finished_or_cancelled = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return finished_ || cancelled_;
    };
    auto finished = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return finished_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&finished_or_cancelled), limit)) timed_out = true;
    while (!finished_) {
      // A plain int read of libiperf's state while the test thread runs: set once at connect,
      // and checked to be the connection to the server before use.
      const int fd = iperf_get_control_socket(test);
      if (IsControlConnection(fd, port)) ::shutdown(fd, SHUT_RDWR);
      mu_.AwaitWithTimeout(absl::Condition(&finished), absl::Milliseconds(100));
    }
  });
  const int rc = iperf_run_client(test);
  const int code = i_errno;
  {
    absl::MutexLock state(&mu_);
    finished_ = true;
  }
  watchdog.join();

  const char* json = iperf_get_test_json_output_string(test);
  const std::string text = json != nullptr ? std::string(json) : std::string();
  const std::string error_text = code != IENONE ? IperfErrorText(code) : std::string();
  iperf_free_test(test);

  bool cancelled = false;
  {
    absl::MutexLock state(&mu_);
    cancelled = cancelled_;
  }
  if (cancelled) {
    return finish(
        Failed(std::move(result), ProbeFailure::kError, "cancelled: the agent is stopping"));
  }
  if (timed_out) {
    return finish(Failed(std::move(result), ProbeFailure::kTimeout,
                         absl::StrCat("no result within ", absl::FormatDuration(limit))));
  }
  absl::StatusOr<IperfReport> report = ParseIperfReport(text, request.spec.protocol);
  // libiperf 3.12 with JSON output returns 0 after a failure and records it in i_errno and the
  // report's "error"; a -1 comes from failures before the report started.
  if (rc < 0 || code != IENONE || (report.ok() && report->error.has_value())) {
    ProbeFailure failure = ClassifyIperfError(code);
    if (failure == ProbeFailure::kNone) failure = ProbeFailure::kError;
    std::string message = report.ok() && report->error.has_value() ? *report->error : error_text;
    if (message.empty()) message = "iperf3 test failed";
    return finish(Failed(std::move(result), failure, message));
  }
  if (!report.ok()) {
    return finish(
        Failed(std::move(result), ProbeFailure::kError, std::string(report.status().message())));
  }
  result.ok = true;
  result.throughput_bps = report->throughput_bps;
  result.retransmits = report->retransmits;
  result.udp_loss_ratio = report->udp_loss_ratio;
  result.udp_jitter_seconds = report->udp_jitter_seconds;
  result.bytes = report->bytes;
  return finish(std::move(result));
}

void IperfProbeRunner::Cancel() {
  absl::MutexLock state(&mu_);
  cancelled_ = true;
}

}  // namespace rxfleet::agent
