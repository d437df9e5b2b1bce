#include "agent/collectors/cpu_stat.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/collectors/text.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

namespace txt = ::rxfleet::agent::text;
using common::ToAbslView;
using txt::Fields;
using txt::ReadSmallFile;

uint64_t Delta(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

// Δbusy and Δtotal with per-field clamping (fields such as iowait can go backwards).
std::pair<uint64_t, uint64_t> BusyAndTotal(const CpuTimes& a, const CpuTimes& b) {
  const uint64_t idle = Delta(a.idle, b.idle) + Delta(a.iowait, b.iowait);
  const uint64_t busy = Delta(a.user, b.user) + Delta(a.nice, b.nice) + Delta(a.system, b.system) +
                        Delta(a.irq, b.irq) + Delta(a.softirq, b.softirq) + Delta(a.steal, b.steal);
  return {busy, busy + idle};
}

}  // namespace

absl::StatusOr<ProcStat> ParseProcStat(std::string_view text) {
  ProcStat stat;
  bool have_total = false;
  for (std::string_view line : txt::Lines(text)) {
    if (line.substr(0, 3) != "cpu") continue;
    const std::vector<std::string_view> fields = Fields(line);
    if (fields.empty()) continue;
    const std::string_view name = fields[0];
    int core = -1;
    if (name != "cpu") {
      uint64_t n = 0;
      if (!txt::ParseDecimal(name.substr(3), &n) || n > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("/proc/stat: unexpected CPU line name \"", ToAbslView(name), "\""));
      }
      core = static_cast<int>(n);
    }
    if (fields.size() < 5) {
      return absl::InvalidArgumentError(absl::StrCat("/proc/stat: line \"", ToAbslView(name),
                                                     "\" has ", fields.size() - 1,
                                                     " numbers, need at least 4"));
    }
    uint64_t values[10] = {};
    for (size_t i = 1; i < fields.size() && i <= 10; ++i) {
      if (!txt::ParseDecimal(fields[i], &values[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat("/proc/stat: line \"", ToAbslView(name),
                                                       "\" field ", i, " \"", ToAbslView(fields[i]),
                                                       "\" is not a number"));
      }
    }
    const CpuTimes times{values[0], values[1], values[2], values[3], values[4],
                         values[5], values[6], values[7], values[8], values[9]};
    if (core < 0) {
      stat.total = times;
      have_total = true;
    } else {
      stat.cores[core] = times;
    }
  }
  if (!have_total) return absl::InvalidArgumentError("/proc/stat: no aggregate \"cpu\" line");
  return stat;
}

absl::StatusOr<CpuUsage> ComputeCpuUsage(const ProcStat& before, const ProcStat& after) {
  const auto [host_busy, host_total] = BusyAndTotal(before.total, after.total);
  if (host_total == 0) {
    return absl::FailedPreconditionError("no CPU time elapsed between the two /proc/stat samples");
  }
  CpuUsage usage;
  usage.host_ratio = static_cast<double>(host_busy) / static_cast<double>(host_total);
  bool any_core = false;
  for (const auto& [core, after_times] : after.cores) {
    auto it = before.cores.find(core);
    if (it == before.cores.end()) continue;
    const auto [busy, total] = BusyAndTotal(it->second, after_times);
    if (total == 0) continue;
    const double ratio = static_cast<double>(busy) / static_cast<double>(total);
    if (!any_core || ratio > usage.busiest_core_ratio) {
      usage.busiest_core_ratio = ratio;
      usage.busiest_core = core;
      any_core = true;
    }
  }
  if (!any_core) {
    // No per-core lines (unusual kernels/containers): the aggregate is the best estimate.
    usage.busiest_core_ratio = usage.host_ratio;
  }
  return usage;
}

absl::StatusOr<ProcessCpuTicks> ParseProcPidStat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) {
    return absl::InvalidArgumentError("/proc/<pid>/stat: no \")\" after the command name");
  }
  // After ")": field 3 (state) is the first; utime and stime are fields 14 and 15.
  const std::vector<std::string_view> fields = Fields(txt::Trim(text.substr(close + 1)));
  constexpr size_t kUtime = 14 - 3;
  constexpr size_t kStime = 15 - 3;
  if (fields.size() <= kStime) {
    return absl::InvalidArgumentError(
        absl::StrCat("/proc/<pid>/stat: ", fields.size() + 2, " fields, need at least 15"));
  }
  ProcessCpuTicks ticks;
  if (!txt::ParseDecimal(fields[kUtime], &ticks.utime) ||
      !txt::ParseDecimal(fields[kStime], &ticks.stime)) {
    return absl::InvalidArgumentError("/proc/<pid>/stat: utime/stime are not numbers");
  }
  return ticks;
}

absl::StatusOr<uint64_t> ParseStatmResidentPages(std::string_view text) {
  const std::vector<std::string_view> fields = Fields(txt::Trim(text));
  uint64_t pages = 0;
  if (fields.size() < 2 || !txt::ParseDecimal(fields[1], &pages)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "/proc/<pid>/statm: \"", ToAbslView(txt::Trim(text)), "\" has no resident page count"));
  }
  return pages;
}

CpuCollector::CpuCollector(prometheus::Registry& registry, CpuCollectorOptions options)
    : options_(std::move(options)),
      host_ratio_family_(prometheus::BuildGauge()
                             .Name("rxfleet_host_cpu_ratio")
                             .Help("Busy share of all online CPU cores over the last sampling "
                                   "interval, 0-1 (/proc/stat; iowait counts as idle).")
                             .Register(registry)),
      busiest_core_ratio_family_(
          prometheus::BuildGauge()
              .Name("rxfleet_host_busiest_core_ratio")
              .Help("Busy share of the busiest single CPU core over the last "
                    "sampling interval, 0-1 (/proc/stat; iowait counts as idle).")
              .Register(registry)),
      process_cpu_seconds_(prometheus::BuildCounter()
                               .Name("process_cpu_seconds_total")
                               .Help("Total user and system CPU time spent by the agent in "
                                     "seconds (/proc/self/stat).")
                               .Register(registry)
                               .Add({})),
      process_rss_bytes_(prometheus::BuildGauge()
                             .Name("process_resident_memory_bytes")
                             .Help("Resident memory size of the agent in bytes "
                                   "(/proc/self/statm).")
                             .Register(registry)
                             .Add({})) {
  if (!options_.log) options_.log = LogToStderr;
  ticks_per_second_ = options_.clock_ticks_per_second.value_or(::sysconf(_SC_CLK_TCK));
  if (ticks_per_second_ <= 0) ticks_per_second_ = 100;
  page_size_ = options_.page_size_bytes.value_or(::sysconf(_SC_PAGESIZE));
  if (page_size_ <= 0) page_size_ = 4096;
}

absl::Status CpuCollector::Collect(SteadyTime /*now*/) {
  absl::Status first_error;
  auto note = [&first_error](const absl::Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
  };

  absl::StatusOr<ProcStat> stat = [&]() -> absl::StatusOr<ProcStat> {
    absl::StatusOr<std::string> text = ReadSmallFile(options_.procfs_root + "/stat");
    if (!text.ok()) return text.status();
    return ParseProcStat(*text);
  }();
  if (stat.ok()) {
    absl::MutexLock lock(&mu_);
    if (last_stat_.has_value()) {
      absl::StatusOr<CpuUsage> usage = ComputeCpuUsage(*last_stat_, *stat);
      if (usage.ok()) {
        last_usage_ = *usage;
        if (host_ratio_ == nullptr) host_ratio_ = &host_ratio_family_.Add({});
        if (busiest_core_ratio_ == nullptr) {
          busiest_core_ratio_ = &busiest_core_ratio_family_.Add({});
        }
        host_ratio_->Set(usage->host_ratio);
        busiest_core_ratio_->Set(usage->busiest_core_ratio);
      }
    }
    last_stat_ = *std::move(stat);
  } else {
    note(stat.status());
  }

  absl::StatusOr<std::string> self_stat = ReadSmallFile(options_.procfs_root + "/self/stat");
  if (self_stat.ok()) {
    absl::StatusOr<ProcessCpuTicks> ticks = ParseProcPidStat(*self_stat);
    if (ticks.ok()) {
      const uint64_t total = ticks->utime + ticks->stime;
      absl::MutexLock lock(&mu_);
      const uint64_t previous = last_process_ticks_.value_or(0);
      if (total > previous) {
        process_cpu_seconds_.Increment(static_cast<double>(total - previous) /
                                       static_cast<double>(ticks_per_second_));
      }
      if (!last_process_ticks_.has_value() || total > *last_process_ticks_) {
        last_process_ticks_ = total;
      }
    } else {
      note(ticks.status());
    }
  } else {
    note(self_stat.status());
  }

  absl::StatusOr<std::string> statm = ReadSmallFile(options_.procfs_root + "/self/statm");
  if (statm.ok()) {
    absl::StatusOr<uint64_t> pages = ParseStatmResidentPages(*statm);
    if (pages.ok()) {
      process_rss_bytes_.Set(static_cast<double>(*pages) * static_cast<double>(page_size_));
    } else {
      note(pages.status());
    }
  } else {
    note(statm.status());
  }
  return first_error;
}

std::optional<ProcStat> CpuCollector::LastProcStat() const {
  absl::MutexLock lock(&mu_);
  return last_stat_;
}

std::optional<CpuUsage> CpuCollector::LastUsage() const {
  absl::MutexLock lock(&mu_);
  return last_usage_;
}

}  // namespace rxfleet::agent
