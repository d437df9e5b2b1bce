#pragma once

// Conversions between the v1 API messages (proto/rxfleet/v1) and the common value types.
// Every program (server, agent link, CLI) converts through these functions, so a policy means
// the same thing wherever it is read. Conversions *from* proto validate what the value type
// cannot represent; PolicyFromProto additionally runs ValidatePolicy, the same rules the
// agent's policy file parser applies.

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/chips/chip_table.h"
#include "common/chips/rx_agg.h"
#include "common/policy/policy.h"
#include "common/policy/resolver.h"
#include "common/policy/selectors.h"
#include "common/usb_speed.h"
#include "google/protobuf/map.h"
#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/common.pb.h"
#include "rxfleet/v1/policy.pb.h"

namespace rxfleet::common {

/// UsbSpeed -> v1::UsbSpeed (kUnknown -> USB_SPEED_UNSPECIFIED).
v1::UsbSpeed UsbSpeedToProto(UsbSpeed speed);

/// v1::UsbSpeed -> UsbSpeed. USB_SPEED_UNSPECIFIED and values outside the enum (e.g. a future
/// speed) map to kUnknown.
UsbSpeed UsbSpeedFromProto(int speed);

/// RxAggLayout -> v1::RxAggLayout.
v1::RxAggLayout RxAggLayoutToProto(RxAggLayout layout);

/// v1::RxAggLayout -> RxAggLayout; nullopt for RX_AGG_LAYOUT_UNSPECIFIED and unknown values.
std::optional<RxAggLayout> RxAggLayoutFromProto(int layout);

/// RxAggSettings -> v1::RxAggSettings. Unset optionals stay unset; force_enable is set only
/// when true (false and unset mean the same).
v1::RxAggSettings RxAggSettingsToProto(const RxAggSettings& settings);

/// v1::RxAggSettings -> RxAggSettings, values copied as they are (no range checks: use
/// ValidateRxAggSettings or PolicyFromProto).
RxAggSettings RxAggSettingsFromProto(const v1::RxAggSettings& settings);

/// Selector -> v1::AdapterSelector (vid_pids formatted as lower-case "vvvv:pppp").
v1::AdapterSelector SelectorToProto(const Selector& selector);

/// v1::AdapterSelector -> Selector. Errors (InvalidArgument, naming the field and index):
/// a usb_speeds entry that is USB_SPEED_UNSPECIFIED or not a UsbSpeed value; a vid_pids entry
/// that is not "xxxx:xxxx". Chip names and adapter ids are checked by ValidatePolicy.
absl::StatusOr<Selector> SelectorFromProto(const v1::AdapterSelector& selector);

/// Policy -> v1::Policy: metadata.name, metadata.labels, metadata.resource_version,
/// spec.priority, spec.selector, spec.settings, spec.probe (when set). Nothing else is set.
v1::Policy PolicyToProto(const Policy& policy);

/// v1::Policy -> validated Policy (metadata.name, labels, resource_version; spec.priority,
/// selector, settings, probe (ProbeSpecFromProto); description, annotations and status are not part
/// of the value type). `source` becomes Policy::source ("server", "bundle 12"). Errors:
/// InvalidArgument starting with "policy 'NAME': " for SelectorFromProto failures and every
/// ValidatePolicy failure.
absl::StatusOr<Policy> PolicyFromProto(const v1::Policy& policy, std::string_view source);

/// The selector-visible attributes of a reported adapter: id = metadata.name, host = host_id,
/// chip, vid/pid (16 bits each; larger values are truncated, agents never send them) and
/// usb_speed from status; host labels are the caller's (the host's labels).
AdapterAttributes AdapterAttributesFromProto(const v1::Adapter& adapter,
                                             const std::map<std::string, std::string>& host_labels);

/// PolicySource -> v1::SettingSource.
v1::SettingSource PolicySourceToProto(PolicySource source);

/// Provenance -> v1::Provenance: source and name; for experiments named "experiment X arm Y"
/// (see resolver.h) name = X and arm = Y. priority, generation, bundle_version and file are
/// left for the caller, who knows the policy objects.
v1::Provenance ProvenanceToProto(const Provenance& provenance);

/// ResolvedSettings -> v1::EffectiveSettings: settings = ToSettings(); provenance keyed by
/// field name (`hold_us`, `count_threshold`, `buffer_kib`, `enable`, and `force_enable` when
/// it is set, with the provenance of `enable`).
v1::EffectiveSettings EffectiveSettingsToProto(const ResolvedSettings& resolved);

/// Labels map conversions (no validation).
std::map<std::string, std::string> LabelsFromProto(
    const google::protobuf::Map<std::string, std::string>& labels);
void LabelsToProto(const std::map<std::string, std::string>& labels,
                   google::protobuf::Map<std::string, std::string>* out);

}  // namespace rxfleet::common
