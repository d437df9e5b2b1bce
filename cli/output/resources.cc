#include "cli/output/resources.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/output/events.h"
#include "cli/output/format.h"
#include "cli/output/table.h"
#include "common/units.h"

namespace rxfleet::cli {
namespace {

template <typename T, typename Key>
std::vector<const T*> SortedBy(const std::vector<T>& items, Key key) {
  std::vector<const T*> sorted;
  sorted.reserve(items.size());
  for (const auto& item : items) sorted.push_back(&item);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&key](const T* a, const T* b) { return key(*a) < key(*b); });
  return sorted;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// Free text in a table cell: first line only, at most kMaxCell characters.
std::string OneLine(const std::string& text) {
  constexpr size_t kMaxCell = 48;
  std::string line = text.substr(0, text.find('\n'));
  if (DisplayWidth(line) <= kMaxCell) return OrDash(line);
  std::string cut;
  size_t width = 0;
  for (char c : line) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 && ++width > kMaxCell - 3) break;
    cut += c;
  }
  return cut + "...";
}

std::string LastAck(const v1::Host* host, absl::Time now) {
  if (host == nullptr || host->status().last_acked_version() == 0) return "-";
  const absl::Time at = AsTime(host->status().last_ack_time());
  if (at == absl::InfinitePast()) return absl::StrCat("v", host->status().last_acked_version());
  return absl::StrCat("v", host->status().last_acked_version(), " (", FormatAge(at, now), ")");
}

}  // namespace

std::string HostStatusWords(const v1::HostStatus& status) {
  std::string words = status.connected() ? "Connected" : "Disconnected";
  if (status.stale()) words += ",Stale";
  if (status.has_last_nack() && status.last_nack().version() > status.last_acked_version()) {
    words += ",Nacked";
  }
  return words;
}

std::string FormatAdapterHold(const v1::Adapter& adapter) {
  const auto& status = adapter.status();
  std::string desired = "-";
  if (status.desired().settings().has_hold_us()) {
    desired = common::FormatHoldUs(status.desired().settings().hold_us());
  }
  std::string observed = "-";
  if (status.has_observed() && status.observed().registers_size() > 0) {
    observed = common::FormatHoldUs(status.observed().decoded().hold_us());
  }
  return absl::StrCat(desired, "/", observed);
}

void PrintHostTable(const std::vector<v1::Host>& hosts, bool wide, absl::Time now,
                    std::ostream& out) {
  std::vector<std::string> header = {"NAME",   "STATUS",    "ADAPTERS", "AGENT",
                                     "BUNDLE", "LAST-SEEN", "AGE"};
  if (wide) header.insert(header.end(), {"ARCH", "KERNEL", "BOARD", "PEER", "LABELS"});
  Table table(std::move(header));
  for (const v1::Host* host :
       SortedBy(hosts, [](const v1::Host& h) { return h.metadata().name(); })) {
    const auto& status = host->status();
    std::string bundle = "-";
    if (status.last_acked_version() != 0 || status.last_sent_version() != 0) {
      bundle = absl::StrCat(status.last_acked_version(), "/", status.last_sent_version());
    }
    std::vector<std::string> row = {host->metadata().name(),
                                    HostStatusWords(status),
                                    absl::StrCat(status.adapter_count()),
                                    OrDash(status.agent_version()),
                                    bundle,
                                    FormatAge(AsTime(status.last_seen_time()), now),
                                    FormatAge(AsTime(host->metadata().create_time()), now)};
    if (wide) {
      const auto& info = status.host_info();
      row.insert(row.end(),
                 {OrDash(info.arch()), OrDash(info.kernel_release()), OrDash(info.board_model()),
                  OrDash(status.peer_address()), FormatLabels(host->metadata().labels())});
    }
    table.AddRow(std::move(row));
  }
  table.Print(out);
}

void PrintAdapterTable(const std::vector<v1::Adapter>& adapters,
                       const std::map<std::string, v1::Host>& hosts, bool wide, absl::Time now,
                       std::ostream& out) {
  std::vector<std::string> header = {"HOST", "ADAPTER", "CHIP", "USB", "HOLD", "STATE", "AGE"};
  if (wide) header.insert(header.end(), {"PORT", "NETDEV", "POLICY", "LAST-ACK"});
  Table table(std::move(header));
  for (const v1::Adapter* adapter : SortedBy(adapters, [](const v1::Adapter& a) {
         return std::make_tuple(a.host_id(), a.metadata().name());
       })) {
    const auto& status = adapter->status();
    std::string chip =
        status.chip().empty() ? FormatVidPid(status.vid(), status.pid()) : status.chip();
    std::vector<std::string> row = {adapter->host_id(),
                                    adapter->metadata().name(),
                                    chip,
                                    UsbSpeedWord(status.usb_speed()),
                                    FormatAdapterHold(*adapter),
                                    AdapterStateWord(status.state()),
                                    FormatAge(AsTime(adapter->metadata().create_time()), now)};
    if (wide) {
      std::string policy = "-";
      if (auto it = status.desired().provenance().find("hold_us");
          it != status.desired().provenance().end()) {
        policy = ProvenanceShort(it->second);
      }
      auto host = hosts.find(adapter->host_id());
      row.insert(row.end(), {OrDash(status.port_path()), OrDash(status.netdev()), policy,
                             LastAck(host == hosts.end() ? nullptr : &host->second, now)});
    }
    table.AddRow(std::move(row));
  }
  table.Print(out);
}

void PrintPolicyTable(const std::vector<v1::Policy>& policies, bool wide, absl::Time now,
                      std::ostream& out) {
  std::vector<std::string> header = {"NAME",    "PRIORITY",  "SELECTOR", "SETTINGS",
                                     "MATCHED", "EFFECTIVE", "AGE"};
  if (wide) header.insert(header.end(), {"GENERATION", "VERSION", "DESCRIPTION"});
  Table table(std::move(header));
  for (const v1::Policy* policy :
       SortedBy(policies, [](const v1::Policy& p) { return p.metadata().name(); })) {
    std::vector<std::string> row = {policy->metadata().name(),
                                    absl::StrCat(policy->spec().priority()),
                                    FormatSelector(policy->spec().selector()),
                                    FormatSettingsAndProbe(policy->spec()),
                                    absl::StrCat(policy->status().matched_adapters()),
                                    absl::StrCat(policy->status().effective_adapters()),
                                    FormatAge(AsTime(policy->metadata().create_time()), now)};
    if (wide) {
      row.insert(row.end(), {absl::StrCat(policy->metadata().generation()),
                             OrDash(policy->metadata().resource_version()),
                             OneLine(policy->spec().description())});
    }
    table.AddRow(std::move(row));
  }
  table.Print(out);
}

void PrintExperimentTable(const std::vector<v1::Experiment>& experiments, bool wide, absl::Time now,
                          std::ostream& out) {
  std::vector<std::string> header = {"NAME",     "PHASE",   "DESIGN", "ARMS",
                                     "ADAPTERS", "WINDOWS", "AGE"};
  if (wide) header.insert(header.end(), {"PRIMARY", "STARTED", "ENDS"});
  Table table(std::move(header));
  for (const v1::Experiment* experiment :
       SortedBy(experiments, [](const v1::Experiment& e) { return e.metadata().name(); })) {
    const auto& spec = experiment->spec();
    const auto& status = experiment->status();
    std::vector<std::string> arms;
    for (const auto& arm : spec.arms()) {
      if (arm.name() == spec.control_arm())
        arms.insert(arms.begin(), arm.name());
      else
        arms.push_back(arm.name());
    }
    std::vector<std::string> row = {experiment->metadata().name(),
                                    ExperimentPhaseWord(status.phase()),
                                    ExperimentDesignWord(spec.design()),
                                    arms.empty() ? "-" : absl::StrJoin(arms, ","),
                                    absl::StrCat(status.assigned_adapters()),
                                    absl::StrCat(status.valid_windows()),
                                    FormatAge(AsTime(experiment->metadata().create_time()), now)};
    if (wide) {
      const absl::Time start = AsTime(status.start_time());
      const absl::Time end = AsTime(status.end_time());
      std::string ends = "-";
      if (end != absl::InfinitePast()) {
        ends = absl::StrCat(FormatAge(end, now), " ago");
      } else if (start != absl::InfinitePast()) {
        const absl::Time planned = start + absl::Seconds(spec.duration().seconds()) +
                                   absl::Nanoseconds(spec.duration().nanos());
        ends = planned > now ? absl::StrCat("in ", FormatAge(now, planned))
                             : absl::StrCat(FormatAge(planned, now), " ago");
      }
      row.insert(row.end(),
                 {OrDash(spec.primary_metric()),
                  start == absl::InfinitePast() ? "-" : absl::StrCat(FormatAge(start, now), " ago"),
                  ends});
    }
    table.AddRow(std::move(row));
  }
  table.Print(out);
}

void PrintHoldTuningTable(const std::vector<v1::HoldTuning>& tunings, bool wide, absl::Time now,
                          std::ostream& out) {
  std::vector<std::string> header = {"NAME", "PHASE", "SEGMENTS", "PROPOSED", "ADAPTERS", "AGE"};
  if (wide) header.insert(header.end(), {"OBJECTIVE", "CANDIDATES", "WINDOWS", "STARTED"});
  Table table(std::move(header));
  for (const v1::HoldTuning* tuning :
       SortedBy(tunings, [](const v1::HoldTuning& t) { return t.metadata().name(); })) {
    const auto& status = tuning->status();
    const auto proposed =
        std::count_if(status.segments().begin(), status.segments().end(),
                      [](const v1::HoldTuningSegment& s) { return s.phase() == "proposed"; });
    std::vector<std::string> row = {tuning->metadata().name(),
                                    HoldTuningPhaseWord(status.phase()),
                                    absl::StrCat(status.segments_size()),
                                    absl::StrCat(proposed),
                                    absl::StrCat(status.assigned_adapters()),
                                    FormatAge(AsTime(tuning->metadata().create_time()), now)};
    if (wide) {
      const absl::Time start = AsTime(status.start_time());
      row.insert(
          row.end(),
          {FormatObjective(tuning->spec()), FormatHolds(tuning->spec().candidate_hold_us()),
           absl::StrCat(status.valid_windows()),
           start == absl::InfinitePast() ? "-" : absl::StrCat(FormatAge(start, now), " ago")});
    }
    table.AddRow(std::move(row));
  }
  table.Print(out);
}

void PrintEventTable(const std::vector<v1::Event>& events, absl::Time now, std::ostream& out) {
  Table table({"LAST-SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"});
  for (const v1::Event& event : events) {
    table.AddRow({FormatAge(AsTime(event.last_time()), now), EventTypeWord(event.type()),
                  OrDash(event.reason()), EventObject(event),
                  absl::StrCat(std::max<uint32_t>(event.count(), 1)),
                  // The message is what an operator reads events for: never cut, one line.
                  absl::StrReplaceAll(event.message(), {{"\r\n", " "}, {"\n", " "}, {"\t", " "}})});
  }
  table.Print(out);
}

std::string ResourceName(const v1::Host& host) {
  return absl::StrCat("host/", host.metadata().name());
}

std::string ResourceName(const v1::Adapter& adapter) {
  return absl::StrCat("adapter/", adapter.host_id(), "/", adapter.metadata().name());
}

std::string ResourceName(const v1::Policy& policy) {
  return absl::StrCat("policy/", policy.metadata().name());
}

}  // namespace rxfleet::cli

namespace rxfleet::cli {

std::string ResourceName(const v1::HoldTuning& tuning) {
  return absl::StrCat("holdtuning/", tuning.metadata().name());
}

std::string ResourceName(const v1::Experiment& experiment) {
  return absl::StrCat("experiment/", experiment.metadata().name());
}

std::string ResourceName(const v1::Event& event) {
  return absl::StrCat("event/", event.metadata().name());
}

}  // namespace rxfleet::cli
