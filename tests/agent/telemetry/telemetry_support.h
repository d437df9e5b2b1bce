#pragma once

// What the agent telemetry tests share: plain HTTP on loopback, the Prometheus text exposition
// read back into samples, the operator queries listed in docs/METRICS.md, and free ports.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/process.h"

namespace rxfleet::agent::telemetry {

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// GET http://127.0.0.1:port<target> (HTTP/1.0: the server closes after answering; no chunked
/// body). Errors: Unavailable if nothing accepts the connection, DeadlineExceeded if no answer
/// within 10 s, DataLoss for a malformed answer.
absl::StatusOr<HttpResponse> HttpGet(int port, std::string_view target);

/// One sample of a text exposition: `name{labels} value`.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// Parses the Prometheus text exposition format (comments skipped, label values unescaped,
/// NaN/+Inf accepted, a trailing timestamp ignored). InvalidArgument names the bad line.
absl::StatusOr<std::vector<Sample>> ParseExposition(std::string_view text);

/// The value of the first sample called `name` whose labels include all of `labels`.
std::optional<double> FindValue(const std::vector<Sample>& samples, std::string_view name,
                                const std::map<std::string, std::string>& labels = {});

/// The labels of the first sample called `name` whose labels include all of `labels`.
std::optional<std::map<std::string, std::string>> FindLabels(
    const std::vector<Sample>& samples, std::string_view name,
    const std::map<std::string, std::string>& labels);

/// One PromQL query of the "PromQL for operators" section of docs/METRICS.md.
struct DocQuery {
  /// The text before the query's ```promql block (its description line).
  std::string description;
  /// The query, lines joined with single spaces.
  std::string promql;
  /// What the query needs to return data beyond a running agent with adapters, from a
  /// "[needs: WHAT]" marker in the description; empty when unmarked.
  std::string needs;
};

/// Every ```promql block of the "## PromQL for operators" section, in order. InvalidArgument if
/// the section is missing, has no query, or a block is not closed.
absl::StatusOr<std::vector<DocQuery>> ParseOperatorQueries(std::string_view markdown);

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed), for
/// programs that cannot report the port they bound.
absl::StatusOr<int> PickFreePort();

/// Waits for the agent's "metrics endpoint on http://HOST:PORT/metrics" log line on `child`'s
/// stderr and returns PORT.
absl::StatusOr<int> WaitForMetricsPort(testing::ChildProcess& child, absl::Duration timeout);

/// Percent-encodes everything but RFC 3986 unreserved characters (for query strings).
std::string UrlEncode(std::string_view text);

}  // namespace rxfleet::agent::telemetry
