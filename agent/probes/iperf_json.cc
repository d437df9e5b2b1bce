#include "agent/probes/iperf_json.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "nlohmann/json.hpp"

namespace rxfleet::agent {
namespace {

using nlohmann::json;

// A number field of `object` (absent: `fallback`); InvalidArgument if present and not a
// finite number.
absl::StatusOr<double> Number(const json& object, std::string_view path, const char* key,
                              double fallback = 0) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("iperf3 report: ", common::ToAbslView(path), ".", key, " is not a number"));
  }
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("iperf3 report: ", common::ToAbslView(path), ".",
                                                   key, " is not a finite number >= 0"));
  }
  return value;
}

const json* Object(const json& parent, const char* key) {
  auto it = parent.find(key);
  if (it == parent.end() || !it->is_object()) return nullptr;
  return &*it;
}

}  // namespace

absl::StatusOr<IperfReport> ParseIperfReport(std::string_view text,
                                             common::ProbeProtocol protocol) {
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("iperf3 report is not JSON");
  if (!root.is_object()) return absl::InvalidArgumentError("iperf3 report is not an object");
  IperfReport report;
  if (auto it = root.find("error"); it != root.end() && it->is_string()) {
    report.error = it->get<std::string>();
  }
  const json* end = Object(root, "end");
  const json* received = end != nullptr ? Object(*end, "sum_received") : nullptr;
  const json* sent = end != nullptr ? Object(*end, "sum_sent") : nullptr;
  const json* sum = end != nullptr ? Object(*end, "sum") : nullptr;
  if (report.error.has_value() && received == nullptr && sum == nullptr) return report;

  if (protocol == common::ProbeProtocol::kTcp) {
    if (received == nullptr) {
      return absl::InvalidArgumentError("iperf3 report has no end.sum_received");
    }
    absl::StatusOr<double> bps = Number(*received, "end.sum_received", "bits_per_second");
    absl::StatusOr<double> bytes = Number(*received, "end.sum_received", "bytes");
    absl::StatusOr<double> seconds = Number(*received, "end.sum_received", "seconds");
    absl::StatusOr<double> retransmits =
        sent != nullptr ? Number(*sent, "end.sum_sent", "retransmits") : 0.0;
    for (const absl::StatusOr<double>* value : {&bps, &bytes, &seconds, &retransmits}) {
      if (!value->ok()) return value->status();
    }
    report.throughput_bps = *bps;
    report.bytes = static_cast<uint64_t>(*bytes);
    report.seconds = *seconds;
    report.retransmits = static_cast<uint64_t>(*retransmits);
    return report;
  }

  // UDP: throughput and bytes from the receiver's sum (sum is the sender's in 3.12), loss and
  // jitter from sum, which carries the receiver's counts over the sender's datagrams.
  const json* rate_source = received != nullptr ? received : sum;
  const json* loss_source = sum != nullptr ? sum : received;
  if (rate_source == nullptr) {
    return absl::InvalidArgumentError("iperf3 report has neither end.sum_received nor end.sum");
  }
  const char* rate_path = received != nullptr ? "end.sum_received" : "end.sum";
  const char* loss_path = sum != nullptr ? "end.sum" : "end.sum_received";
  absl::StatusOr<double> bps = Number(*rate_source, rate_path, "bits_per_second");
  absl::StatusOr<double> bytes = Number(*rate_source, rate_path, "bytes");
  absl::StatusOr<double> seconds = Number(*rate_source, rate_path, "seconds");
  absl::StatusOr<double> lost_percent = Number(*loss_source, loss_path, "lost_percent");
  absl::StatusOr<double> jitter_ms = Number(*loss_source, loss_path, "jitter_ms");
  for (const absl::StatusOr<double>* value : {&bps, &bytes, &seconds, &lost_percent, &jitter_ms}) {
    if (!value->ok()) return value->status();
  }
  report.throughput_bps = *bps;
  report.bytes = static_cast<uint64_t>(*bytes);
  report.seconds = *seconds;
  report.udp_loss_ratio = std::min(1.0, *lost_percent / 100.0);
  report.udp_jitter_seconds = *jitter_ms / 1000.0;
  return report;
}

}  // namespace rxfleet::agent
