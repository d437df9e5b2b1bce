// Segment values of adapters (Experiment::segment_keys): how an experiment's report splits
// the fleet.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/experiment/experiment.h"
#include "common/usb_speed.h"

namespace rxfleet::experiments {

std::vector<std::string> SegmentValuesFor(const Experiment& experiment,
                                          const common::AdapterAttributes& adapter) {
  std::vector<std::string> values;
  values.reserve(experiment.segment_keys.size());
  for (const std::string& key : experiment.segment_keys) {
    if (key == kSegmentUsbSpeed) {
      values.emplace_back(common::UsbSpeedName(adapter.usb_speed));
    } else if (key == kSegmentChip) {
      values.push_back(adapter.chip);
    } else if (key == kSegmentHost) {
      values.push_back(adapter.host);
    } else if (auto it = adapter.host_labels.find(key); it != adapter.host_labels.end()) {
      values.push_back(it->second);
    } else {
      values.emplace_back();
    }
  }
  return values;
}

std::map<std::string, std::string> SegmentMap(const std::vector<std::string>& keys,
                                              const std::vector<std::string>& values) {
  std::map<std::string, std::string> map;
  for (size_t i = 0; i < keys.size(); ++i) {
    map[keys[i]] = i < values.size() ? values[i] : std::string();
  }
  return map;
}

std::string FormatSegment(const std::vector<std::string>& keys,
                          const std::vector<std::string>& values) {
  if (keys.empty()) return "all adapters";
  std::vector<std::string> parts;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string value = i < values.size() && !values[i].empty() ? values[i] : "(none)";
    parts.push_back(absl::StrCat(keys[i], "=", value));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace rxfleet::experiments
