#pragma once

#include <map>
#include <optional>
#include <string>

#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace rxfleet::agent::testing {

/// The value of one series in `registry`: counter/gauge/untyped value, or a histogram's sample
/// count. `labels` must match the series' labels exactly. nullopt if there is no such series.
inline std::optional<double> SeriesValue(const prometheus::Registry& registry,
                                         const std::string& name,
                                         const std::map<std::string, std::string>& labels = {}) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : metric.label) have[label.name] = label.value;
      if (have != labels) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return metric.counter.value;
        case prometheus::MetricType::Gauge:
          return metric.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(metric.histogram.sample_count);
        case prometheus::MetricType::Untyped:
          return metric.untyped.value;
        default:
          return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

/// Number of series of family `name` whose labels include all of `subset`.
inline size_t SeriesCount(const prometheus::Registry& registry, const std::string& name,
                          const std::map<std::string, std::string>& subset = {}) {
  size_t count = 0;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      size_t matched = 0;
      for (const auto& label : metric.label) {
        auto it = subset.find(label.name);
        if (it != subset.end() && it->second == label.value) ++matched;
      }
      if (matched == subset.size()) ++count;
    }
  }
  return count;
}

/// The registry in the Prometheus text format.
inline std::string Exposition(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace rxfleet::agent::testing
