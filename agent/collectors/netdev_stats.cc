#include "agent/collectors/netdev_stats.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/collectors/text.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

namespace txt = ::rxfleet::agent::text;
using common::ToAbslView;

constexpr size_t kFieldCount = std::size(kNetdevStatisticsFiles);

uint64_t* FieldByIndex(NetdevCounters& c, size_t index) {
  uint64_t* fields[kFieldCount] = {&c.rx_bytes,   &c.tx_bytes,  &c.rx_packets, &c.tx_packets,
                                   &c.rx_dropped, &c.rx_errors, &c.tx_dropped, &c.tx_errors};
  return fields[index];
}

uint64_t FieldValue(const NetdevCounters& c, size_t index) {
  return *FieldByIndex(const_cast<NetdevCounters&>(c), index);
}

double Ratio(uint64_t part, uint64_t rest) {
  const uint64_t whole = part + rest;
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// The ifindex of the netdev owning `statistics_dir` (<netdev>/ifindex), if readable.
std::optional<uint64_t> ReadIfindex(const std::string& statistics_dir) {
  absl::StatusOr<std::string> text =
      txt::ReadSmallFile(absl::StrCat(statistics_dir, "/../ifindex"));
  if (!text.ok()) return std::nullopt;
  absl::StatusOr<uint64_t> value = ParseStatisticsValue(*text);
  if (!value.ok()) return std::nullopt;
  return *value;
}

}  // namespace

absl::StatusOr<uint64_t> ParseStatisticsValue(std::string_view text) {
  const std::string_view trimmed = txt::Trim(text);
  uint64_t value = 0;
  if (!txt::ParseDecimal(trimmed, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("statistics value \"",
                                                   absl::CEscape(ToAbslView(trimmed)),
                                                   "\" is not an unsigned 64-bit decimal integer"));
  }
  return value;
}

absl::Status SetNetdevCounter(std::string_view file, std::string_view contents,
                              NetdevCounters& counters) {
  for (size_t i = 0; i < kFieldCount; ++i) {
    if (kNetdevStatisticsFiles[i] != file) continue;
    absl::StatusOr<uint64_t> value = ParseStatisticsValue(contents);
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbslView(file), ": ", value.status().message()));
    }
    *FieldByIndex(counters, i) = *value;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown statistics attribute \"", ToAbslView(file), "\""));
}

absl::StatusOr<NetdevCounters> ReadNetdevStatistics(const std::string& statistics_dir) {
  NetdevCounters counters;
  for (std::string_view file : kNetdevStatisticsFiles) {
    absl::StatusOr<std::string> contents =
        txt::ReadSmallFile(absl::StrCat(statistics_dir, "/", ToAbslView(file)));
    if (!contents.ok()) return contents.status();
    if (absl::Status s = SetNetdevCounter(file, *contents, counters); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(statistics_dir, "/", s.message()));
    }
  }
  return counters;
}

uint64_t MonotonicCounter::Update(uint64_t raw) {
  uint64_t delta = 0;
  if (last_.has_value()) {
    if (raw >= *last_) {
      delta = raw - *last_;
    } else {
      // The kernel counter went backwards: a reset (or a 32-bit wrap, which cannot be told
      // apart). Count what the new counter has seen since it restarted from 0.
      delta = raw;
      ++resets_;
    }
  }
  last_ = raw;
  total_ += delta;
  return delta;
}

void MonotonicCounter::Rebase() {
  // With the baseline at 0, the next reading is added in full.
  last_ = 0;
}

NetdevCollector::NetdevCollector(prometheus::Registry& registry, NetdevCollectorOptions options)
    : options_(std::move(options)),
      rx_bytes_(prometheus::BuildCounter()
                    .Name("rxfleet_adapter_receive_bytes_total")
                    .Help("Bytes received by the adapter's netdev (sysfs statistics/rx_bytes, "
                          "reset-corrected).")
                    .Register(registry)),
      tx_bytes_(prometheus::BuildCounter()
                    .Name("rxfleet_adapter_transmit_bytes_total")
                    .Help("Bytes transmitted by the adapter's netdev (sysfs statistics/tx_bytes, "
                          "reset-corrected).")
                    .Register(registry)),
      rx_packets_(prometheus::BuildCounter()
                      .Name("rxfleet_adapter_receive_packets_total")
                      .Help("Packets received by the adapter's netdev (sysfs "
                            "statistics/rx_packets, reset-corrected).")
                      .Register(registry)),
      tx_packets_(prometheus::BuildCounter()
                      .Name("rxfleet_adapter_transmit_packets_total")
                      .Help("Packets transmitted by the adapter's netdev (sysfs "
                            "statistics/tx_packets, reset-corrected).")
                      .Register(registry)),
      rx_dropped_(prometheus::BuildCounter()
                      .Name("rxfleet_adapter_receive_drops_total")
                      .Help("Received packets dropped by the netdev or stack (sysfs "
                            "statistics/rx_dropped, reset-corrected).")
                      .Register(registry)),
      rx_errors_(prometheus::BuildCounter()
                     .Name("rxfleet_adapter_receive_errors_total")
                     .Help("Receive errors of the adapter's netdev (sysfs statistics/rx_errors, "
                           "reset-corrected).")
                     .Register(registry)),
      tx_dropped_(prometheus::BuildCounter()
                      .Name("rxfleet_adapter_transmit_drops_total")
                      .Help("Packets dropped on transmit (sysfs statistics/tx_dropped, "
                            "reset-corrected).")
                      .Register(registry)),
      tx_errors_(prometheus::BuildCounter()
                     .Name("rxfleet_adapter_transmit_errors_total")
                     .Help("Transmit errors of the adapter's netdev (sysfs statistics/tx_errors, "
                           "reset-corrected).")
                     .Register(registry)),
      resets_(prometheus::BuildCounter()
                  .Name("rxfleet_adapter_netdev_resets_total")
                  .Help("Times a netdev statistics counter went backwards (driver reload, "
                        "netdev re-created, 32-bit wrap) and was treated as restarting from 0.")
                  .Register(registry)),
      present_(prometheus::BuildGauge()
                   .Name("rxfleet_adapter_netdev_present")
                   .Help("1 if the adapter's netdev statistics were readable at the last sample, "
                         "0 if the netdev is missing or the adapter has none.")
                   .Register(registry)) {
  if (!options_.log) options_.log = LogToStderr;
}

std::string NetdevCollector::ResolveDir(const NetdevSource& source) const {
  if (source.netdev.empty()) return "";
  if (!source.statistics_dir.empty()) return source.statistics_dir;
  return absl::StrCat(options_.sysfs_root, "/class/net/", source.netdev, "/statistics");
}

void NetdevCollector::AddSeries(Adapter& adapter) {
  if (adapter.series.has_value()) return;
  const std::map<std::string, std::string> labels = {{"adapter", adapter.source.adapter_id}};
  Series s;
  s.rx_bytes = &rx_bytes_.Add(labels);
  s.tx_bytes = &tx_bytes_.Add(labels);
  s.rx_packets = &rx_packets_.Add(labels);
  s.tx_packets = &tx_packets_.Add(labels);
  s.rx_dropped = &rx_dropped_.Add(labels);
  s.rx_errors = &rx_errors_.Add(labels);
  s.tx_dropped = &tx_dropped_.Add(labels);
  s.tx_errors = &tx_errors_.Add(labels);
  s.resets = &resets_.Add(labels);
  adapter.series = s;
}

void NetdevCollector::RemoveSeries(Adapter& adapter) {
  if (adapter.series.has_value()) {
    const Series& s = *adapter.series;
    rx_bytes_.Remove(s.rx_bytes);
    tx_bytes_.Remove(s.tx_bytes);
    rx_packets_.Remove(s.rx_packets);
    tx_packets_.Remove(s.tx_packets);
    rx_dropped_.Remove(s.rx_dropped);
    rx_errors_.Remove(s.rx_errors);
    tx_dropped_.Remove(s.tx_dropped);
    tx_errors_.Remove(s.tx_errors);
    resets_.Remove(s.resets);
    adapter.series.reset();
  }
  if (adapter.present != nullptr) {
    present_.Remove(adapter.present);
    adapter.present = nullptr;
  }
}

void NetdevCollector::UpsertLocked(const NetdevSource& source) {
  auto it = adapters_.find(source.adapter_id);
  if (it == adapters_.end()) {
    Adapter adapter;
    adapter.source = source;
    adapter.dir = ResolveDir(source);
    adapter.present = &present_.Add({{"adapter", source.adapter_id}});
    adapter.present->Set(0);
    adapters_.emplace(source.adapter_id, std::move(adapter));
    return;
  }
  Adapter& adapter = it->second;
  const std::string dir = ResolveDir(source);
  adapter.source = source;
  if (dir != adapter.dir) {
    // A new location (netdev renamed or re-created after re-enumeration). Whether its counters
    // continue the old ones is decided on the next read by ifindex (see Collect).
    adapter.dir = dir;
    adapter.rates.reset();
    adapter.totals.present = false;
    adapter.reported_missing = false;
  }
}

void NetdevCollector::SetAdapters(const std::vector<NetdevSource>& sources) {
  absl::MutexLock lock(&mu_);
  for (auto it = adapters_.begin(); it != adapters_.end();) {
    bool keep = false;
    for (const NetdevSource& s : sources) keep = keep || s.adapter_id == it->first;
    if (keep) {
      ++it;
    } else {
      RemoveSeries(it->second);
      it = adapters_.erase(it);
    }
  }
  for (const NetdevSource& s : sources) {
    if (!s.adapter_id.empty()) UpsertLocked(s);
  }
}

void NetdevCollector::UpsertAdapter(const NetdevSource& source) {
  if (source.adapter_id.empty()) return;
  absl::MutexLock lock(&mu_);
  UpsertLocked(source);
}

void NetdevCollector::RemoveAdapter(std::string_view adapter_id) {
  absl::MutexLock lock(&mu_);
  auto it = adapters_.find(adapter_id);
  if (it == adapters_.end()) return;
  RemoveSeries(it->second);
  adapters_.erase(it);
}

absl::Status NetdevCollector::Collect(SteadyTime now) {
  // Read the files without holding the lock, then apply to adapters whose source is unchanged.
  std::vector<std::pair<std::string, std::string>> to_read;  // adapter id, dir
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, adapter] : adapters_) to_read.emplace_back(id, adapter.dir);
  }
  std::vector<absl::StatusOr<NetdevCounters>> readings;
  std::vector<std::optional<uint64_t>> ifindexes;
  readings.reserve(to_read.size());
  for (const auto& [id, dir] : to_read) {
    if (dir.empty()) {
      readings.emplace_back(absl::NotFoundError("no netdev"));
      ifindexes.emplace_back();
    } else {
      readings.push_back(ReadNetdevStatistics(dir));
      ifindexes.push_back(ReadIfindex(dir));
    }
  }

  absl::Status first_error;
  std::vector<std::string> log_lines;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < to_read.size(); ++i) {
      auto it = adapters_.find(to_read[i].first);
      if (it == adapters_.end() || it->second.dir != to_read[i].second) continue;
      Adapter& adapter = it->second;
      const absl::StatusOr<NetdevCounters>& reading = readings[i];
      if (!reading.ok()) {
        adapter.totals.present = false;
        adapter.rates.reset();
        if (adapter.present != nullptr) adapter.present->Set(0);
        if (adapter.dir.empty()) continue;  // no netdev: no traffic series, not an error
        ++adapter.totals.missing_samples;
        if (!adapter.reported_missing) {
          adapter.reported_missing = true;
          log_lines.push_back(absl::StrCat(
              "adapter ", adapter.source.adapter_id, ": netdev ", adapter.source.netdev,
              " statistics unreadable (", reading.status().message(),
              "); traffic counters hold their values until it returns"));
        }
        if (!absl::IsNotFound(reading.status()) && first_error.ok()) {
          first_error = reading.status();
        }
        continue;
      }
      if (adapter.reported_missing) {
        adapter.reported_missing = false;
        log_lines.push_back(absl::StrCat("adapter ", adapter.source.adapter_id, ": netdev ",
                                         adapter.source.netdev, " statistics readable again"));
      }
      if (ifindexes[i].has_value()) {
        if (adapter.ifindex.has_value() && *adapter.ifindex != *ifindexes[i]) {
          // A different netdev (the kernel never reuses an ifindex soon): its counters started
          // at 0 when it was created, so its first reading is added in full.
          for (MonotonicCounter& c : adapter.counters) c.Rebase();
        }
        adapter.ifindex = ifindexes[i];
      }
      AddSeries(adapter);
      const Series& s = *adapter.series;
      prometheus::Counter* counters[kFieldCount] = {s.rx_bytes,   s.tx_bytes,   s.rx_packets,
                                                    s.tx_packets, s.rx_dropped, s.rx_errors,
                                                    s.tx_dropped, s.tx_errors};
      NetdevCounters delta;
      bool had_baseline = adapter.totals.sampled_at.has_value() && adapter.totals.present;
      for (size_t f = 0; f < kFieldCount; ++f) {
        MonotonicCounter& mc = adapter.counters[f];
        const uint64_t resets_before = mc.resets();
        const uint64_t d = mc.Update(FieldValue(*reading, f));
        *FieldByIndex(delta, f) = d;
        *FieldByIndex(adapter.totals.counters, f) = mc.total();
        if (d > 0) counters[f]->Increment(static_cast<double>(d));
        if (mc.resets() > resets_before) {
          s.resets->Increment();
          ++adapter.totals.resets;
        }
      }
      if (had_baseline) {
        const std::chrono::duration<double> dt = now - *adapter.totals.sampled_at;
        if (dt.count() > 0) {
          TrafficRates rates;
          rates.interval_seconds = dt.count();
          rates.rx_bits_per_second = static_cast<double>(delta.rx_bytes) * 8.0 / dt.count();
          rates.tx_bits_per_second = static_cast<double>(delta.tx_bytes) * 8.0 / dt.count();
          rates.rx_drop_ratio = Ratio(delta.rx_dropped, delta.rx_packets);
          rates.tx_drop_ratio = Ratio(delta.tx_dropped, delta.tx_packets);
          adapter.rates = rates;
        }
      }
      adapter.totals.present = true;
      adapter.totals.sampled_at = now;
      adapter.present->Set(1);
    }
  }
  for (const std::string& line : log_lines) options_.log(line);
  return first_error;
}

std::map<std::string, NetdevTotals> NetdevCollector::Totals() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, NetdevTotals> out;
  for (const auto& [id, adapter] : adapters_) out.emplace(id, adapter.totals);
  return out;
}

std::optional<TrafficRates> NetdevCollector::LastRates(std::string_view adapter_id) const {
  absl::MutexLock lock(&mu_);
  auto it = adapters_.find(adapter_id);
  if (it == adapters_.end()) return std::nullopt;
  return it->second.rates;
}

}  // namespace rxfleet::agent
