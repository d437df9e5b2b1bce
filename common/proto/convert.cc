#include "common/proto/convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/chips/family.h"
#include "common/proto/probe.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {

v1::UsbSpeed UsbSpeedToProto(UsbSpeed speed) {
  switch (speed) {
    case UsbSpeed::kUnknown:
      return v1::USB_SPEED_UNSPECIFIED;
    case UsbSpeed::kLow:
      return v1::USB_SPEED_LOW;
    case UsbSpeed::kFull:
      return v1::USB_SPEED_FULL;
    case UsbSpeed::kHigh:
      return v1::USB_SPEED_HIGH;
    case UsbSpeed::kSuper:
      return v1::USB_SPEED_SUPER;
    case UsbSpeed::kSuperPlus:
      return v1::USB_SPEED_SUPER_PLUS;
  }
  return v1::USB_SPEED_UNSPECIFIED;
}

UsbSpeed UsbSpeedFromProto(int speed) {
  switch (speed) {
    case v1::USB_SPEED_LOW:
      return UsbSpeed::kLow;
    case v1::USB_SPEED_FULL:
      return UsbSpeed::kFull;
    case v1::USB_SPEED_HIGH:
      return UsbSpeed::kHigh;
    case v1::USB_SPEED_SUPER:
      return UsbSpeed::kSuper;
    case v1::USB_SPEED_SUPER_PLUS:
      return UsbSpeed::kSuperPlus;
    default:
      return UsbSpeed::kUnknown;
  }
}

v1::RxAggLayout RxAggLayoutToProto(RxAggLayout layout) {
  switch (layout) {
    case RxAggLayout::kV1:
      return v1::RX_AGG_LAYOUT_V1;
    case RxAggLayout::kV2:
      return v1::RX_AGG_LAYOUT_V2;
    case RxAggLayout::kV3:
      return v1::RX_AGG_LAYOUT_V3;
  }
  return v1::RX_AGG_LAYOUT_UNSPECIFIED;
}

std::optional<RxAggLayout> RxAggLayoutFromProto(int layout) {
  switch (layout) {
    case v1::RX_AGG_LAYOUT_V1:
      return RxAggLayout::kV1;
    case v1::RX_AGG_LAYOUT_V2:
      return RxAggLayout::kV2;
    case v1::RX_AGG_LAYOUT_V3:
      return RxAggLayout::kV3;
    default:
      return std::nullopt;
  }
}

v1::RxAggSettings RxAggSettingsToProto(const RxAggSettings& settings) {
  v1::RxAggSettings out;
  if (settings.hold_us) out.set_hold_us(*settings.hold_us);
  if (settings.count_threshold) out.set_count_threshold(*settings.count_threshold);
  if (settings.buffer_kib) out.set_buffer_kib(*settings.buffer_kib);
  if (settings.enable) out.set_enable(*settings.enable);
  if (settings.force_enable) out.set_force_enable(true);
  return out;
}

RxAggSettings RxAggSettingsFromProto(const v1::RxAggSettings& settings) {
  RxAggSettings out;
  if (settings.has_hold_us()) out.hold_us = settings.hold_us();
  if (settings.has_count_threshold()) out.count_threshold = settings.count_threshold();
  if (settings.has_buffer_kib()) out.buffer_kib = settings.buffer_kib();
  if (settings.has_enable()) out.enable = settings.enable();
  out.force_enable = settings.has_force_enable() && settings.force_enable();
  return out;
}

v1::AdapterSelector SelectorToProto(const Selector& selector) {
  v1::AdapterSelector out;
  LabelsToProto(selector.match_labels, out.mutable_match_labels());
  for (UsbSpeed speed : selector.usb_speeds) out.add_usb_speeds(UsbSpeedToProto(speed));
  for (const std::string& chip : selector.chips) out.add_chips(chip);
  for (const std::string& adapter : selector.adapters) out.add_adapters(adapter);
  for (const VidPid& id : selector.vid_pids) out.add_vid_pids(FormatVidPid(id.vid, id.pid));
  for (const std::string& family : selector.families) out.add_families(family);
  return out;
}

absl::StatusOr<Selector> SelectorFromProto(const v1::AdapterSelector& selector) {
  Selector out;
  out.match_labels = LabelsFromProto(selector.match_labels());
  for (int i = 0; i < selector.usb_speeds_size(); ++i) {
    const int value = selector.usb_speeds(i);
    const UsbSpeed speed = UsbSpeedFromProto(value);
    if (speed == UsbSpeed::kUnknown) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.selector.usb_speeds[", i, "]: ",
                       value == v1::USB_SPEED_UNSPECIFIED ? std::string("USB_SPEED_UNSPECIFIED")
                                                          : absl::StrCat("unknown value ", value),
                       " cannot be selected (expected LOW, FULL, HIGH, SUPER or SUPER_PLUS)"));
    }
    out.usb_speeds.push_back(speed);
  }
  out.chips.assign(selector.chips().begin(), selector.chips().end());
  out.adapters.assign(selector.adapters().begin(), selector.adapters().end());
  for (int i = 0; i < selector.vid_pids_size(); ++i) {
    absl::StatusOr<VidPid> id = ParseVidPid(selector.vid_pids(i));
    if (!id.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.selector.vid_pids[", i, "]: ", id.status().message()));
    }
    out.vid_pids.push_back(*id);
  }
  for (int i = 0; i < selector.families_size(); ++i) {
    if (absl::StatusOr<ChipFamily> f = ParseChipFamily(selector.families(i)); !f.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.selector.families[", i, "]: ", f.status().message()));
    }
    out.families.push_back(selector.families(i));
  }
  return out;
}

v1::Policy PolicyToProto(const Policy& policy) {
  v1::Policy out;
  out.mutable_metadata()->set_name(policy.name);
  LabelsToProto(policy.labels, out.mutable_metadata()->mutable_labels());
  out.mutable_metadata()->set_resource_version(policy.resource_version);
  v1::PolicySpec* spec = out.mutable_spec();
  spec->set_priority(policy.priority);
  *spec->mutable_selector() = SelectorToProto(policy.selector);
  *spec->mutable_settings() = RxAggSettingsToProto(policy.settings);
  if (policy.probe.has_value()) *spec->mutable_probe() = ProbeSpecToProto(*policy.probe);
  return out;
}

absl::StatusOr<Policy> PolicyFromProto(const v1::Policy& policy, std::string_view source) {
  const std::string& name = policy.metadata().name();
  Policy out;
  out.name = name;
  out.labels = LabelsFromProto(policy.metadata().labels());
  out.resource_version = policy.metadata().resource_version();
  out.priority = policy.spec().priority();
  out.source = std::string(source);
  absl::StatusOr<Selector> selector = SelectorFromProto(policy.spec().selector());
  if (!selector.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy '", name, "': ", selector.status().message()));
  }
  out.selector = *std::move(selector);
  out.settings = RxAggSettingsFromProto(policy.spec().settings());
  if (policy.spec().has_probe()) {
    absl::StatusOr<ProbeSpec> probe = ProbeSpecFromProto(policy.spec().probe(), "spec.probe");
    if (!probe.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy '", name, "': ", probe.status().message()));
    }
    out.probe = *std::move(probe);
  }
  // ValidatePolicy's messages start with "policy 'NAME': ".
  if (absl::Status s = ValidatePolicy(out); !s.ok()) return s;
  return out;
}

AdapterAttributes AdapterAttributesFromProto(
    const v1::Adapter& adapter, const std::map<std::string, std::string>& host_labels) {
  AdapterAttributes out;
  out.adapter_id = adapter.metadata().name();
  out.host = adapter.host_id();
  out.chip = adapter.status().chip();
  out.family = adapter.status().family();
  out.vid = static_cast<uint16_t>(adapter.status().vid());
  out.pid = static_cast<uint16_t>(adapter.status().pid());
  out.usb_speed = UsbSpeedFromProto(adapter.status().usb_speed());
  out.host_labels = host_labels;
  return out;
}

v1::SettingSource PolicySourceToProto(PolicySource source) {
  switch (source) {
    case PolicySource::kBuiltinDefault:
      return v1::SETTING_SOURCE_BUILT_IN_DEFAULT;
    case PolicySource::kLocalFile:
      return v1::SETTING_SOURCE_LOCAL_FILE;
    case PolicySource::kServerPolicy:
      return v1::SETTING_SOURCE_SERVER_POLICY;
    case PolicySource::kExperiment:
      return v1::SETTING_SOURCE_EXPERIMENT;
  }
  return v1::SETTING_SOURCE_UNSPECIFIED;
}

v1::Provenance ProvenanceToProto(const Provenance& provenance) {
  v1::Provenance out;
  out.set_source(PolicySourceToProto(provenance.source));
  if (provenance.source == PolicySource::kBuiltinDefault) return out;
  std::string_view name = provenance.name;
  if (provenance.source == PolicySource::kExperiment && name.starts_with("experiment ")) {
    name.remove_prefix(std::string_view("experiment ").size());
    const size_t arm = name.find(" arm ");
    if (arm != std::string_view::npos) {
      out.set_arm(std::string(name.substr(arm + std::string_view(" arm ").size())));
      name = name.substr(0, arm);
    }
  }
  out.set_name(std::string(name));
  return out;
}

v1::EffectiveSettings EffectiveSettingsToProto(const ResolvedSettings& resolved) {
  v1::EffectiveSettings out;
  *out.mutable_settings() = RxAggSettingsToProto(resolved.ToSettings());
  auto& provenance = *out.mutable_provenance();
  if (resolved.hold_us) provenance["hold_us"] = ProvenanceToProto(resolved.hold_us->provenance);
  if (resolved.count_threshold) {
    provenance["count_threshold"] = ProvenanceToProto(resolved.count_threshold->provenance);
  }
  if (resolved.buffer_kib) {
    provenance["buffer_kib"] = ProvenanceToProto(resolved.buffer_kib->provenance);
  }
  if (resolved.enable) {
    provenance["enable"] = ProvenanceToProto(resolved.enable->provenance);
    if (out.settings().has_force_enable()) provenance["force_enable"] = provenance["enable"];
  }
  return out;
}

std::map<std::string, std::string> LabelsFromProto(
    const google::protobuf::Map<std::string, std::string>& labels) {
  return {labels.begin(), labels.end()};
}

void LabelsToProto(const std::map<std::string, std::string>& labels,
                   google::protobuf::Map<std::string, std::string>* out) {
  out->clear();
  for (const auto& [key, value] : labels) (*out)[key] = value;
}

}  // namespace rxfleet::common
