#include "common/experiment/metric.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/string_view_compat.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

struct MetricInfo {
  Metric metric;
  std::string_view name;
  MetricUnit unit;
  bool higher_is_better;
};

constexpr MetricInfo kCatalogue[kMetricCount] = {
    {Metric::kRxThroughputBps, "rx_throughput_bps", MetricUnit::kBitsPerSecond, true},
    {Metric::kTxThroughputBps, "tx_throughput_bps", MetricUnit::kBitsPerSecond, true},
    {Metric::kRttMeanSeconds, "rtt_mean_seconds", MetricUnit::kSeconds, false},
    {Metric::kRttP99Seconds, "rtt_p99_seconds", MetricUnit::kSeconds, false},
    {Metric::kRxDropRatio, "rx_drop_ratio", MetricUnit::kRatio, false},
    {Metric::kProbeLossRatio, "probe_loss_ratio", MetricUnit::kRatio, false},
    {Metric::kBusiestCoreRatio, "busiest_core_ratio", MetricUnit::kRatio, false},
    {Metric::kHostCpuRatio, "host_cpu_ratio", MetricUnit::kRatio, false},
    {Metric::kProbeRxThroughputBps, "probe_rx_throughput_bps", MetricUnit::kBitsPerSecond, true},
    {Metric::kProbeTxThroughputBps, "probe_tx_throughput_bps", MetricUnit::kBitsPerSecond, true},
    {Metric::kProbeUdpLossRatio, "probe_udp_loss_ratio", MetricUnit::kRatio, false},
    {Metric::kProbeUdpJitterSeconds, "probe_udp_jitter_seconds", MetricUnit::kSeconds, false},
    {Metric::kProbeTcpRetransmits, "probe_tcp_retransmits", MetricUnit::kCount, false},
};

const MetricInfo& Info(Metric metric) { return kCatalogue[static_cast<size_t>(metric)]; }

struct UnitSuffix {
  absl::string_view suffix;
  double factor;
};

// Longest suffixes first so "ms" is not read as "s".
constexpr UnitSuffix kSecondSuffixes[] = {
    {"ns", 1e-9}, {"us", 1e-6}, {"\xC2\xB5s", 1e-6}, {"\xCE\xBCs", 1e-6}, {"ms", 1e-3}, {"s", 1.0},
};
constexpr UnitSuffix kBitRateSuffixes[] = {
    {"Gbit/s", 1e9},
    {"Mbit/s", 1e6},
    {"kbit/s", 1e3},
    {"bit/s", 1.0},
};

std::string UnitHint(MetricUnit unit) {
  switch (unit) {
    case MetricUnit::kBitsPerSecond:
      return "a number of bit/s, optionally with bit/s, kbit/s, Mbit/s or Gbit/s";
    case MetricUnit::kSeconds:
      return "a number of seconds, optionally with ns, us, ms or s";
    case MetricUnit::kRatio:
      return "a ratio in [0, 1] or a percentage such as 5%";
    case MetricUnit::kCount:
      return "a plain number (a count per probe)";
  }
  return "";
}

// Scales `value` to a readable unit; returns (scaled value, unit text).
std::pair<double, std::string_view> Scale(MetricUnit unit, double value) {
  const double magnitude = std::fabs(value);
  switch (unit) {
    case MetricUnit::kBitsPerSecond:
      if (magnitude >= 1e9) return {value / 1e9, "Gbit/s"};
      if (magnitude >= 1e6) return {value / 1e6, "Mbit/s"};
      if (magnitude >= 1e3) return {value / 1e3, "kbit/s"};
      return {value, "bit/s"};
    case MetricUnit::kSeconds:
      if (magnitude >= 1.0) return {value, "s"};
      if (magnitude >= 1e-3 || magnitude == 0) return {value * 1e3, "ms"};
      return {value * 1e6, "\xC2\xB5s"};
    case MetricUnit::kRatio:
      return {value * 100, "%"};
    case MetricUnit::kCount:
      return {value, ""};
  }
  return {value, ""};
}

// Four significant digits without exponent notation.
std::string FourDigits(double value) {
  const double magnitude = std::fabs(value);
  int decimals = 3;
  if (magnitude >= 1000) {
    decimals = 0;
  } else if (magnitude >= 100) {
    decimals = 1;
  } else if (magnitude >= 10) {
    decimals = 2;
  }
  return absl::StrFormat("%.*f", decimals, value);
}

}  // namespace

std::string_view MetricName(Metric metric) { return Info(metric).name; }

MetricUnit UnitOf(Metric metric) { return Info(metric).unit; }

bool HigherIsBetter(Metric metric) { return Info(metric).higher_is_better; }

bool IsProbeMetric(Metric metric) {
  switch (metric) {
    case Metric::kProbeRxThroughputBps:
    case Metric::kProbeTxThroughputBps:
    case Metric::kProbeUdpLossRatio:
    case Metric::kProbeUdpJitterSeconds:
    case Metric::kProbeTcpRetransmits:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<Metric> ParseMetric(std::string_view name) {
  for (const MetricInfo& info : kCatalogue) {
    if (info.name == name) return info.metric;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown metric '", ToAbslView(name), "' (known metrics: ",
      absl::StrJoin(kCatalogue, ", ",
                    [](std::string* out, const MetricInfo& info) { out->append(info.name); }),
      ")"));
}

absl::StatusOr<double> ParseMetricValue(Metric metric, std::string_view text) {
  const MetricUnit unit = UnitOf(metric);
  absl::string_view s = absl::StripAsciiWhitespace(ToAbslView(text));
  double factor = 1.0;
  bool has_suffix = false;
  auto try_suffixes = [&](const auto& suffixes) {
    for (const UnitSuffix& suffix : suffixes) {
      if (absl::ConsumeSuffix(&s, suffix.suffix)) {
        factor = suffix.factor;
        has_suffix = true;
        return;
      }
    }
  };
  switch (unit) {
    case MetricUnit::kSeconds:
      try_suffixes(kSecondSuffixes);
      break;
    case MetricUnit::kBitsPerSecond:
      try_suffixes(kBitRateSuffixes);
      break;
    case MetricUnit::kRatio:
      if (absl::ConsumeSuffix(&s, "%")) {
        factor = 0.01;
        has_suffix = true;
      }
      break;
    case MetricUnit::kCount:
      break;
  }
  if (has_suffix) s = absl::StripTrailingAsciiWhitespace(s);
  double number = 0;
  const bool plain = !s.empty() && (absl::ascii_isdigit(static_cast<unsigned char>(s[0])) ||
                                    s[0] == '.' || s[0] == '-' || s[0] == '+');
  if (!plain || !absl::SimpleAtod(s, &number) || !std::isfinite(number)) {
    return absl::InvalidArgumentError(absl::StrCat("value '", ToAbslView(text), "' of ",
                                                   ToAbslView(MetricName(metric)), " must be ",
                                                   UnitHint(unit)));
  }
  const double value = number * factor;
  if (value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("value '", ToAbslView(text), "' of ",
                                                   ToAbslView(MetricName(metric)),
                                                   " must not be negative"));
  }
  if (unit == MetricUnit::kRatio && value > 1) {
    return absl::InvalidArgumentError(absl::StrCat("value '", ToAbslView(text), "' of ",
                                                   ToAbslView(MetricName(metric)),
                                                   " is a ratio and must lie in [0, 1] (0..100%)"));
  }
  return value;
}

std::string FormatPValue(double p) {
  if (!std::isfinite(p)) return "n/a";
  if (p < 1e-4) return "<0.0001";
  return absl::StrFormat("%.4f", p);
}

std::string FormatMetricValue(Metric metric, double value) {
  if (!std::isfinite(value)) return "n/a";
  const auto [scaled, unit] = Scale(UnitOf(metric), value);
  if (unit.empty()) return FourDigits(scaled);
  return absl::StrCat(FourDigits(scaled), " ", ToAbslView(unit));
}

std::string FormatMetricDelta(Metric metric, double delta) {
  if (!std::isfinite(delta)) return "n/a";
  const MetricUnit unit = UnitOf(metric);
  if (unit == MetricUnit::kRatio) {
    return absl::StrCat(delta >= 0 ? "+" : "", FourDigits(delta * 100), " pp");
  }
  const auto [scaled, unit_text] = Scale(unit, delta);
  if (unit_text.empty()) return absl::StrCat(delta >= 0 ? "+" : "", FourDigits(scaled));
  return absl::StrCat(delta >= 0 ? "+" : "", FourDigits(scaled), " ", ToAbslView(unit_text));
}

}  // namespace rxfleet::experiments
