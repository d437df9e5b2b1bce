#include "server/experiments/assignment.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/policy/selectors.h"
#include "common/string_view_compat.h"

namespace rxfleet::experiments {
namespace {

using common::ToAbslView;

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// MurmurHash3 fmix64.
uint64_t Fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// The hash input: fields separated by NUL so ("ab", "c") and ("a", "bc") differ.
std::string HashInput(std::string_view design, const Experiment& e, std::string_view key) {
  std::string input;
  input.reserve(design.size() + e.name.size() + key.size() + 24);
  input.append(design);
  input.push_back('\0');
  input.append(e.name);
  input.push_back('\0');
  input.append(std::to_string(e.seed));
  input.push_back('\0');
  input.append(key);
  return input;
}

}  // namespace

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = kFnvOffsetBasis;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t StableHash64(std::string_view bytes) { return Fmix64(Fnv1a64(bytes)); }

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::Below(uint64_t bound) {
  if (bound <= 1) return 0;
  // Reject the lowest (2^64 mod bound) values so every residue is equally likely.
  const uint64_t threshold = (0 - bound) % bound;
  while (true) {
    const uint64_t r = Next();
    if (r >= threshold) return r % bound;
  }
}

std::string AdapterKey(std::string_view host_id, std::string_view adapter_id) {
  return absl::StrCat(ToAbslView(host_id), "/", ToAbslView(adapter_id));
}

bool IsStopped(std::span<const StoppedArm> stopped, std::string_view arm,
               const std::vector<std::string>& segment) {
  for (const StoppedArm& s : stopped) {
    if (s.arm == arm && (s.segment.empty() || s.segment == segment)) return true;
  }
  return false;
}

Assigner::Assigner(Experiment experiment, absl::Time start)
    : experiment_(std::move(experiment)), start_(start) {
  total_weight_ = 0;
  for (const Arm& arm : experiment_.arms) {
    total_weight_ += arm.weight;
    cumulative_weights_.push_back(total_weight_);
  }
  period_count_ = experiment_.PeriodCount();
}

absl::StatusOr<Assigner> Assigner::Create(Experiment experiment, absl::Time start) {
  if (absl::Status s = ValidateExperiment(experiment); !s.ok()) return s;
  if (start == absl::InfinitePast() || start == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError("experiment start time must be finite");
  }
  return Assigner(std::move(experiment), start);
}

absl::StatusOr<uint32_t> Assigner::PeriodIndexAt(absl::Time time) const {
  if (time < start_ || time >= end()) {
    return absl::OutOfRangeError(absl::StrCat("time ", absl::FormatTime(time, absl::UTCTimeZone()),
                                              " is outside experiment '", experiment_.name, "' [",
                                              absl::FormatTime(start_, absl::UTCTimeZone()), ", ",
                                              absl::FormatTime(end(), absl::UTCTimeZone()), ")"));
  }
  if (experiment_.design != Design::kSwitchback) return 0;
  absl::Duration remainder;
  return static_cast<uint32_t>(
      absl::IDivDuration(time - start_, experiment_.period_length, &remainder));
}

absl::Time Assigner::PeriodStart(uint32_t period_index) const {
  if (experiment_.design != Design::kSwitchback) return start_;
  return start_ + experiment_.period_length * static_cast<int64_t>(period_index);
}

absl::Time Assigner::PeriodEnd(uint32_t period_index) const {
  if (experiment_.design != Design::kSwitchback) return end();
  return std::min(end(), PeriodStart(period_index) + experiment_.period_length);
}

size_t Assigner::ScheduledArm(std::string_view adapter_key, uint32_t period_index) const {
  if (experiment_.design == Design::kParallel) {
    const uint64_t slot = StableHash64(HashInput("parallel", experiment_, adapter_key)) %
                          static_cast<uint64_t>(total_weight_);
    return static_cast<size_t>(
        std::upper_bound(cumulative_weights_.begin(), cumulative_weights_.end(), slot) -
        cumulative_weights_.begin());
  }
  const uint32_t block = period_index / total_weight_;
  const uint32_t position = period_index % total_weight_;
  std::string input = HashInput("switchback", experiment_, adapter_key);
  input.push_back('\0');
  input.append(std::to_string(block));
  SplitMix64 rng(StableHash64(input));
  std::vector<size_t> order;
  order.reserve(total_weight_);
  for (size_t arm = 0; arm < experiment_.arms.size(); ++arm) {
    order.insert(order.end(), experiment_.arms[arm].weight, arm);
  }
  // Fisher–Yates: for i from n-1 down to 1, swap order[i] with order[j], j uniform in [0, i].
  for (size_t i = order.size() - 1; i > 0; --i) {
    std::swap(order[i], order[rng.Below(i + 1)]);
  }
  return order[position];
}

absl::StatusOr<Assignment> Assigner::Assign(std::string_view adapter_key,
                                            const std::vector<std::string>& segment,
                                            absl::Time time,
                                            std::span<const StoppedArm> stopped) const {
  if (segment.size() != experiment_.segment_keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter '", ToAbslView(adapter_key), "' has ", segment.size(),
                     " segment values; experiment '", experiment_.name, "' has ",
                     experiment_.segment_keys.size(), " segment keys"));
  }
  absl::StatusOr<uint32_t> period = PeriodIndexAt(time);
  if (!period.ok()) return period.status();
  Assignment a;
  a.period_index = *period;
  a.period_start = PeriodStart(*period);
  a.period_end = PeriodEnd(*period);
  a.burn_in_end = std::min(a.period_end, a.period_start + experiment_.burn_in);
  a.in_burn_in = time < a.burn_in_end;
  a.scheduled_arm_index = ScheduledArm(adapter_key, *period);
  a.arm_index = a.scheduled_arm_index;
  const size_t control = experiment_.ControlIndex();
  if (a.arm_index != control && IsStopped(stopped, experiment_.arms[a.arm_index].name, segment)) {
    a.arm_index = control;
    a.sent_to_control = true;
  }
  a.arm = experiment_.arms[a.arm_index].name;
  return a;
}

absl::StatusOr<std::optional<Assignment>> Assigner::AssignAdapter(
    const common::AdapterAttributes& adapter, absl::Time time,
    std::span<const StoppedArm> stopped) const {
  if (!common::Matches(experiment_.selector, adapter)) return std::nullopt;
  absl::StatusOr<Assignment> a = Assign(AdapterKey(adapter.host, adapter.adapter_id),
                                        SegmentValuesFor(experiment_, adapter), time, stopped);
  if (!a.ok()) return a.status();
  return std::optional<Assignment>(*std::move(a));
}

}  // namespace rxfleet::experiments
