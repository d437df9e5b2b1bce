#include "server/registry/probe_slots.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/experiment/experiment.h"
#include "common/policy/resolver.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::server {
namespace {

// The greatest common divisor of two positive durations, to the nanosecond.
absl::Duration Gcd(absl::Duration a, absl::Duration b) {
  return absl::Nanoseconds(std::gcd(absl::ToInt64Nanoseconds(a), absl::ToInt64Nanoseconds(b)));
}

}  // namespace

uint32_t ProbeSlotPlan::Group::Join() {
  ++members;
  if (!holes.empty()) {
    const uint32_t number = *holes.begin();
    holes.erase(holes.begin());
    return number;
  }
  return end++;
}

void ProbeSlotPlan::Group::Leave(uint32_t number) {
  --members;
  if (number + 1 != end) {
    holes.insert(number);
    return;
  }
  --end;
  // Trailing free numbers are no longer slots in use.
  while (!holes.empty() && *holes.rbegin() + 1 == end) {
    holes.erase(std::prev(holes.end()));
    --end;
  }
}

std::vector<common::Policy> ProbeSlotPlan::ProbePolicies(
    const std::vector<common::Policy>& policies) {
  std::vector<common::Policy> out;
  for (const common::Policy& policy : policies) {
    if (policy.probe.has_value()) out.push_back(policy);
  }
  return out;
}

std::optional<ProbeSlotPlan::Want> ProbeSlotPlan::Resolve(
    const common::AdapterAttributes& adapter) const {
  if (probe_policies_.empty()) return std::nullopt;
  const common::PolicyLayer layers[] = {{common::PolicySource::kServerPolicy, &probe_policies_}};
  std::optional<common::Resolved<common::ProbeSpec>> probe = common::ResolveProbe(adapter, layers);
  if (!probe.has_value()) return std::nullopt;
  return Want{common::ProbeServerAddress(probe->value), probe->provenance.name,
              probe->value.interval};
}

void ProbeSlotPlan::Reset(const std::vector<common::Policy>& policies,
                          const std::vector<common::AdapterAttributes>& adapters) {
  probe_policies_ = ProbePolicies(policies);
  // L and C of every server some policy probes against.
  std::map<std::string, std::pair<absl::Duration, absl::Duration>, std::less<>> params;
  for (const common::Policy& policy : probe_policies_) {
    const common::ProbeSpec& probe = *policy.probe;
    const absl::Duration slot = probe.duration + experiments::kProbeSlotMargin;
    auto [it, added] = params.try_emplace(common::ProbeServerAddress(probe), slot, probe.interval);
    if (!added) {
      it->second.first = std::max(it->second.first, slot);
      it->second.second = Gcd(it->second.second, probe.interval);
    }
  }
  for (const auto& [server, lc] : params) {
    Group& group = groups_[server];
    group.slot_length = lc.first;
    group.cycle = lc.second;
  }
  Wants wants;
  for (const common::AdapterAttributes& adapter : adapters) {
    std::map<std::string, Want>& host = wants[adapter.host];
    if (host.contains(adapter.adapter_id)) continue;
    if (std::optional<Want> want = Resolve(adapter)) host.emplace(adapter.adapter_id, *want);
  }
  Apply(wants, /*all=*/true);
  // Groups of servers no policy probes against any more are empty now.
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (params.contains(it->first)) {
      Note(it->first, it->second);
      ++it;
    } else {
      if (it->second.noted.has_value() && std::get<0>(*it->second.noted)) {
        notes_.push_back({false, absl::StrCat("probe slots against ", it->first,
                                              " fit again: no policy probes against it")});
      }
      it = groups_.erase(it);
    }
  }
}

void ProbeSlotPlan::SetHost(std::string_view host,
                            const std::vector<common::AdapterAttributes>& adapters) {
  Wants wants;
  std::map<std::string, Want>& mine = wants[std::string(host)];
  for (const common::AdapterAttributes& adapter : adapters) {
    if (adapter.host != host || mine.contains(adapter.adapter_id)) continue;
    if (std::optional<Want> want = Resolve(adapter)) mine.emplace(adapter.adapter_id, *want);
  }
  std::set<std::string> touched;
  if (auto it = hosts_.find(host); it != hosts_.end()) {
    for (const auto& [id, member] : it->second) touched.insert(member.want.server);
  }
  for (const auto& [id, want] : mine) touched.insert(want.server);
  Apply(wants, /*all=*/false);
  for (const std::string& server : touched) {
    if (auto it = groups_.find(server); it != groups_.end()) Note(server, it->second);
  }
}

void ProbeSlotPlan::Apply(const Wants& wants, bool all) {
  // Leavers first, so that joiners can take their numbers. Only the hosts of `wants` are
  // visited unless `all`: one host's change costs that host, not the fleet.
  const auto leave = [&](std::map<std::string, HostMembers, std::less<>>::iterator host) {
    auto wanted = wants.find(host->first);
    for (auto member = host->second.begin(); member != host->second.end();) {
      const Want* want = nullptr;
      if (wanted != wants.end()) {
        auto it = wanted->second.find(member->first);
        if (it != wanted->second.end()) want = &it->second;
      }
      if (want != nullptr && want->server == member->second.want.server) {
        member->second.want = *want;  // same group: keeps its number
        ++member;
        continue;
      }
      groups_.at(member->second.want.server).Leave(member->second.number);
      member = host->second.erase(member);
    }
    return host->second.empty() ? hosts_.erase(host) : std::next(host);
  };
  if (all) {
    for (auto host = hosts_.begin(); host != hosts_.end();) host = leave(host);
  } else {
    for (const auto& [host_id, host_wants] : wants) {
      if (auto host = hosts_.find(host_id); host != hosts_.end()) leave(host);
    }
  }
  // Joiners in (host, adapter) order (both maps are ordered).
  for (const auto& [host_id, host_wants] : wants) {
    for (const auto& [adapter_id, want] : host_wants) {
      auto group = groups_.find(want.server);
      if (group == groups_.end()) continue;  // not a server of the policies (cannot happen)
      HostMembers& members = hosts_[host_id];
      if (members.contains(adapter_id)) continue;
      members.emplace(adapter_id, Member{want, group->second.Join()});
    }
  }
}

void ProbeSlotPlan::Note(const std::string& server, Group& group) {
  const ProbeSlotGroup view{server, group.slot_length, group.cycle, group.members, group.end};
  const bool over = view.overcommitted();
  const auto state = std::make_tuple(over, group.end, group.slot_length, group.cycle);
  const bool was_over = group.noted.has_value() && std::get<0>(*group.noted);
  if (!over && !was_over) return;
  if (group.noted == state) return;
  group.noted = state;
  if (over) {
    notes_.push_back(
        {true,
         absl::StrCat("probe slots against ", server, " overlap: ", group.end, " slots of ",
                      absl::FormatDuration(group.slot_length), " need ",
                      absl::FormatDuration(group.slot_length * static_cast<int64_t>(group.end)),
                      ", more than the ", absl::FormatDuration(group.cycle),
                      " cycle of the group's probe intervals; some runs overlap")});
  } else {
    notes_.push_back(
        {false, absl::StrCat("probe slots against ", server, " fit again: ", group.end,
                             " slots of ", absl::FormatDuration(group.slot_length), " in the ",
                             absl::FormatDuration(group.cycle), " cycle")});
  }
}

std::vector<ProbeSlotEntry> ProbeSlotPlan::HostSlots(std::string_view host) const {
  std::vector<ProbeSlotEntry> out;
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return out;
  for (const auto& [adapter_id, member] : it->second) {
    const Group& group = groups_.at(member.want.server);
    const absl::Duration start =
        group.slot_length * static_cast<int64_t>(member.number) + experiments::kProbeSlotMargin / 2;
    out.push_back({adapter_id, member.want.policy, start % member.want.interval});
  }
  return out;
}

std::vector<ProbeSlotGroup> ProbeSlotPlan::Groups() const {
  std::vector<ProbeSlotGroup> out;
  for (const auto& [server, group] : groups_) {
    out.push_back({server, group.slot_length, group.cycle, group.members, group.end});
  }
  return out;
}

std::vector<ProbeSlotNote> ProbeSlotPlan::TakeNotes() { return std::exchange(notes_, {}); }

}  // namespace rxfleet::server
