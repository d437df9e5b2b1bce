#include "server/experiments/promotion.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "common/usb_speed.h"

namespace rxfleet::experiments {

absl::StatusOr<common::Policy> BuildPromotionPolicy(const Experiment& e,
                                                    const PromotionRequest& request) {
  const std::optional<size_t> arm = e.ArmIndex(request.arm);
  if (!arm) {
    return absl::InvalidArgumentError(
        absl::StrCat("experiment '", e.name, "' has no arm '", request.arm, "'"));
  }
  if (!request.segment.empty() && request.segment.size() != e.segment_keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat("segment has ", request.segment.size(),
                                                   " values; experiment '", e.name, "' has ",
                                                   e.segment_keys.size(), " segment keys"));
  }
  common::Policy policy;
  policy.name =
      request.policy_name.empty() ? absl::StrCat(e.name, "-", request.arm) : request.policy_name;
  policy.labels[std::string(kPromotedFromExperimentLabel)] = e.name;
  policy.labels[std::string(kPromotedFromArmLabel)] = request.arm;
  policy.priority = request.priority.value_or(e.priority);
  policy.selector = e.selector;
  policy.settings = e.arms[*arm].settings;
  policy.source = absl::StrCat("experiment ", e.name, " arm ", request.arm);
  common::Selector& selector = policy.selector;
  for (size_t i = 0; i < request.segment.size(); ++i) {
    if (!request.segment[i].has_value()) continue;  // not named: no narrowing by this key
    const std::string& key = e.segment_keys[i];
    const std::string& value = *request.segment[i];
    const std::string term = absl::StrCat(key, "=", value.empty() ? "(none)" : value);
    auto outside = [&]() {
      return absl::InvalidArgumentError(absl::StrCat("segment ", term,
                                                     " lies outside the selector "
                                                     "of experiment '",
                                                     e.name, "'"));
    };
    if (key == kSegmentHost) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment ", term,
                       " cannot be promoted: policies select adapters by host "
                       "labels, USB speed, chip, USB id and adapter id, not by host; give the "
                       "hosts a label and segment by it"));
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment ", term,
                       " cannot be promoted: a policy cannot select adapters without a value"));
    }
    if (key == kSegmentUsbSpeed) {
      absl::StatusOr<common::UsbSpeed> speed = common::ParseUsbSpeed(value);
      if (!speed.ok() || *speed == common::UsbSpeed::kUnknown) {
        return absl::InvalidArgumentError(
            absl::StrCat("segment ", term, " is not a USB speed a policy can select"));
      }
      if (!selector.usb_speeds.empty() &&
          std::find(selector.usb_speeds.begin(), selector.usb_speeds.end(), *speed) ==
              selector.usb_speeds.end()) {
        return outside();
      }
      selector.usb_speeds = {*speed};
    } else if (key == kSegmentChip) {
      if (!selector.chips.empty() &&
          std::find(selector.chips.begin(), selector.chips.end(), value) == selector.chips.end()) {
        return outside();
      }
      selector.chips = {value};
    } else {
      auto it = selector.match_labels.find(key);
      if (it != selector.match_labels.end() && it->second != value) return outside();
      selector.match_labels[key] = value;
    }
  }
  if (absl::Status s = common::ValidatePolicy(policy); !s.ok()) return s;
  return policy;
}

}  // namespace rxfleet::experiments
