#include "server/experiments/probe_schedule.h"

#include <algorithm>
#include <set>
#include <utility>

#include "common/experiment/experiment.h"

namespace rxfleet::experiments {

uint32_t ProbeSlotsPerWindow(absl::Duration window_length, absl::Duration probe_duration) {
  const absl::Duration slot = probe_duration + kProbeSlotMargin;
  if (slot <= absl::ZeroDuration() || slot > window_length) return 0;
  absl::Duration remainder;  // IDivDuration writes it; it may not be null
  return static_cast<uint32_t>(absl::IDivDuration(window_length, slot, &remainder));
}

ProbePlan::ProbePlan(absl::Duration window_length, absl::Duration probe_duration)
    : window_length_(window_length),
      probe_duration_(probe_duration),
      slot_length_(probe_duration + kProbeSlotMargin),
      slots_(std::max<uint32_t>(1, ProbeSlotsPerWindow(window_length, probe_duration))) {}

bool ProbePlan::Update(std::vector<std::string> members) {
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  const uint32_t rounds_before = rounds_;
  bool changed = false;
  // Adapters that left free their numbers.
  for (auto it = sequence_.begin(); it != sequence_.end();) {
    if (std::binary_search(members.begin(), members.end(), it->first)) {
      ++it;
    } else {
      it = sequence_.erase(it);
      changed = true;
    }
  }
  std::set<uint32_t> taken;
  for (const auto& [key, s] : sequence_) taken.insert(s);
  // Joiners, in key order, take the lowest free numbers.
  uint32_t next = 0;
  for (std::string& key : members) {
    if (sequence_.contains(key)) continue;
    while (taken.contains(next)) ++next;
    taken.insert(next);
    sequence_.emplace(std::move(key), next);
    changed = true;
  }
  uint32_t highest = 0;
  for (const auto& [key, s] : sequence_) highest = std::max(highest, s + 1);
  rounds_ = std::max<uint32_t>(1, (highest + slots_ - 1) / slots_);
  return changed || rounds_ != rounds_before;
}

std::optional<ProbeTurn> ProbePlan::TurnOf(std::string_view adapter_key) const {
  auto it = sequence_.find(adapter_key);
  if (it == sequence_.end()) return std::nullopt;
  const uint32_t s = it->second;
  ProbeTurn turn;
  turn.offset = slot_length_ * static_cast<int64_t>(s % slots_) + kProbeSlotMargin / 2;
  // Never past W - duration, whatever the rounding (slots_ fits by construction).
  turn.offset = std::min(turn.offset, window_length_ - probe_duration_);
  turn.rounds = rounds_;
  turn.round = turn.rounds > 1 ? s / slots_ : 0;
  return turn;
}

}  // namespace rxfleet::experiments
