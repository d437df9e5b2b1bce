#include "agent/status/adapter_proto.h"

#include <string>

#include "absl/strings/ascii.h"
#include "agent/usb/chip_identity.h"
#include "agent/usb/observe.h"
#include "agent/usb/speed_diagnosis.h"
#include "common/chips/rx_agg.h"
#include "google/protobuf/timestamp.pb.h"

namespace rxfleet::agent {
namespace {

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t nanos = absl::ToUnixNanos(t);
  int64_t seconds = nanos / 1'000'000'000;
  int64_t rest = nanos % 1'000'000'000;
  if (rest < 0) {
    rest += 1'000'000'000;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(rest));
}

v1::SettingSource SourceToProto(common::PolicySource source) {
  switch (source) {
    case common::PolicySource::kBuiltinDefault:
      return v1::SETTING_SOURCE_BUILT_IN_DEFAULT;
    case common::PolicySource::kLocalFile:
      return v1::SETTING_SOURCE_LOCAL_FILE;
    case common::PolicySource::kServerPolicy:
      return v1::SETTING_SOURCE_SERVER_POLICY;
    case common::PolicySource::kExperiment:
      return v1::SETTING_SOURCE_EXPERIMENT;
  }
  return v1::SETTING_SOURCE_UNSPECIFIED;
}

// "policies.d/pi.yaml:3" -> "policies.d/pi.yaml".
std::string FileOf(const std::string& location) {
  const size_t colon = location.rfind(':');
  if (colon == std::string::npos || colon + 1 == location.size()) return location;
  for (size_t i = colon + 1; i < location.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(location[i]))) return location;
  }
  return location.substr(0, colon);
}

void FillProvenance(const SettingOrigin& origin, v1::Provenance* out) {
  out->set_source(SourceToProto(origin.provenance.source));
  switch (origin.provenance.source) {
    case common::PolicySource::kBuiltinDefault:
      break;
    case common::PolicySource::kExperiment:
      out->set_name(origin.experiment);
      out->set_arm(origin.arm);
      break;
    default:
      out->set_name(origin.provenance.name);
      break;
  }
  out->set_priority(origin.priority);
  out->set_bundle_version(origin.bundle_version);
  if (origin.provenance.source == common::PolicySource::kLocalFile) {
    out->set_file(FileOf(origin.location));
  }
}

void AddCondition(v1::AdapterStatus* status, const char* type, v1::ConditionStatus value,
                  const AdapterSnapshot& s) {
  v1::Condition* c = status->add_conditions();
  c->set_type(type);
  c->set_status(value);
  c->set_reason(s.reason);
  c->set_message(s.message);
  SetTime(s.phase_since, c->mutable_last_transition_time());
  c->set_observed_generation(static_cast<int64_t>(s.applied_bundle_version));
}

}  // namespace

v1::AdapterState AdapterPhaseToProto(AdapterPhase phase) {
  switch (phase) {
    case AdapterPhase::kPending:
      return v1::ADAPTER_STATE_PENDING;
    case AdapterPhase::kApplied:
      return v1::ADAPTER_STATE_APPLIED;
    case AdapterPhase::kDrifted:
      return v1::ADAPTER_STATE_DRIFTED;
    case AdapterPhase::kAsleep:
      return v1::ADAPTER_STATE_ASLEEP;
    case AdapterPhase::kDisabledByDriver:
      return v1::ADAPTER_STATE_DISABLED_BY_DRIVER;
    case AdapterPhase::kUnsupported:
      return v1::ADAPTER_STATE_UNSUPPORTED;
    case AdapterPhase::kStorageMode:
      return v1::ADAPTER_STATE_STORAGE_MODE;
    case AdapterPhase::kOtherVendor:
      return v1::ADAPTER_STATE_IGNORED_OTHER_VENDOR;
    case AdapterPhase::kGone:
      return v1::ADAPTER_STATE_GONE;
    case AdapterPhase::kError:
      return v1::ADAPTER_STATE_ERROR;
    case AdapterPhase::kInvalidSettings:
      return v1::ADAPTER_STATE_INVALID_SETTINGS;
    case AdapterPhase::kObserved:
      return v1::ADAPTER_STATE_OBSERVED;
  }
  return v1::ADAPTER_STATE_UNSPECIFIED;
}

v1::UsbSpeed UsbSpeedToProto(common::UsbSpeed speed) {
  switch (speed) {
    case common::UsbSpeed::kUnknown:
      return v1::USB_SPEED_UNSPECIFIED;
    case common::UsbSpeed::kLow:
      return v1::USB_SPEED_LOW;
    case common::UsbSpeed::kFull:
      return v1::USB_SPEED_FULL;
    case common::UsbSpeed::kHigh:
      return v1::USB_SPEED_HIGH;
    case common::UsbSpeed::kSuper:
      return v1::USB_SPEED_SUPER;
    case common::UsbSpeed::kSuperPlus:
      return v1::USB_SPEED_SUPER_PLUS;
  }
  return v1::USB_SPEED_UNSPECIFIED;
}

void AdapterSnapshotToProto(const AdapterSnapshot& s, std::string_view host_id,
                            absl::Time report_time, v1::Adapter* out) {
  out->Clear();
  out->mutable_metadata()->set_name(s.id);
  out->set_host_id(std::string(host_id));
  v1::AdapterStatus* st = out->mutable_status();
  st->set_vid(s.device.vid);
  st->set_pid(s.device.pid);
  st->set_chip(s.chip);
  if (s.layout) st->set_layout(static_cast<v1::RxAggLayout>(static_cast<int>(*s.layout)));
  st->set_usb_speed(UsbSpeedToProto(s.device.speed));
  st->set_port_path(s.device.port_path);
  st->set_peer_port_path(s.peer_port_path);
  st->set_bus(s.device.bus);
  st->set_devnum(s.device.devnum);
  st->set_netdev(s.netdev);
  st->set_driver(s.driver);
  st->set_serial(s.device.serial);
  st->set_manufacturer(s.device.manufacturer);
  st->set_product(s.device.product);
  st->set_bcd_usb(s.device.bcd_usb);

  if (s.desired) {
    v1::EffectiveSettings* desired = st->mutable_desired();
    v1::RxAggSettings* settings = desired->mutable_settings();
    const common::ResolvedSettings& r = s.desired->resolved;
    if (r.hold_us) settings->set_hold_us(r.hold_us->value);
    if (r.count_threshold) settings->set_count_threshold(r.count_threshold->value);
    if (r.buffer_kib) settings->set_buffer_kib(r.buffer_kib->value);
    if (r.enable) {
      settings->set_enable(r.enable->value);
      if (r.enable->value && r.force_enable) settings->set_force_enable(true);
    }
    auto& provenance = *desired->mutable_provenance();
    for (const auto& [field, origin] : s.desired->origins) {
      FillProvenance(origin, &provenance[field]);
      if (field == "enable" && settings->has_force_enable()) {
        FillProvenance(origin, &provenance["force_enable"]);
      }
    }
  }

  if (s.observed_reg0 && s.layout) {
    v1::ObservedRxAgg* observed = st->mutable_observed();
    v1::RegisterWord* word = observed->add_registers();
    word->set_address(common::GetRxAggLayoutSpec(*s.layout).reg0_address);
    word->set_value(*s.observed_reg0);
    const common::RxAggFields f = common::DecodeRxAgg(*s.layout, *s.observed_reg0);
    v1::DecodedRxAgg* decoded = observed->mutable_decoded();
    decoded->set_enable(f.enable);
    decoded->set_dma_store((f.other_bits & (1u << 30)) != 0);
    decoded->set_count_threshold(f.count_threshold);
    decoded->set_hold_us(f.hold_us);
    decoded->set_buffer_kib(f.buffer_kib);
    SetTime(s.observed_time, observed->mutable_read_time());
  }

  st->set_family(s.family);
  st->set_managed(s.family == common::ChipFamilyName(common::ChipFamily::kRtw89));
  if (!s.observed_words.empty()) {
    v1::ObservedRxAgg* observed = st->mutable_observed();
    for (const auto& [address, value] : s.observed_words) {
      v1::RegisterWord* word = observed->add_registers();
      word->set_address(address);
      word->set_value(value);
    }
    SetTime(s.observed_time, observed->mutable_read_time());
    for (const common::FieldValue& f : s.observed_fields) {
      v1::ObservedField* field = st->add_observed_fields();
      field->set_name(f.name);
      field->set_value(f.value);
    }
  }

  st->set_state(AdapterPhaseToProto(s.phase));
  using v1::CONDITION_STATUS_FALSE;
  using v1::CONDITION_STATUS_TRUE;
  using v1::CONDITION_STATUS_UNKNOWN;
  if (s.device_class == DeviceClass::kSupported) {
    v1::ConditionStatus reachable = CONDITION_STATUS_TRUE;
    v1::ConditionStatus applied = CONDITION_STATUS_FALSE;
    v1::ConditionStatus in_sync = CONDITION_STATUS_FALSE;
    switch (s.phase) {
      case AdapterPhase::kApplied:
        applied = CONDITION_STATUS_TRUE;
        in_sync = CONDITION_STATUS_TRUE;
        break;
      case AdapterPhase::kPending:
      case AdapterPhase::kInvalidSettings:
        reachable = CONDITION_STATUS_UNKNOWN;
        in_sync = CONDITION_STATUS_UNKNOWN;
        break;
      case AdapterPhase::kAsleep:
        in_sync = CONDITION_STATUS_UNKNOWN;
        break;
      case AdapterPhase::kError:
      case AdapterPhase::kGone:
        reachable = CONDITION_STATUS_FALSE;
        in_sync = CONDITION_STATUS_UNKNOWN;
        break;
      default:
        break;
    }
    AddCondition(st, "Reachable", reachable, s);
    AddCondition(st, "Applied", applied, s);
    AddCondition(st, "InSync", in_sync, s);
  }

  for (const Diagnosis& d : s.diagnoses) {
    v1::Diagnosis* diagnosis = st->add_diagnoses();
    diagnosis->set_code(d.code);
    diagnosis->set_message(d.message);
    const bool warning = d.code == kDiagnosisUsb3SwitchFailed ||
                         d.code == kDiagnosisHubLimitsSpeed || d.code == kDiagnosisStorageMode ||
                         d.code == "reenumeration_loop" || d.code == kDiagnosisUnknownIdUnbound ||
                         d.code == kDiagnosisRxAggOffOldKernel ||
                         d.code == kDiagnosisRtw88PreCalcUsb3;
    diagnosis->set_severity(warning ? v1::DIAGNOSIS_SEVERITY_WARNING : v1::DIAGNOSIS_SEVERITY_INFO);
  }
  v1::AdapterCounters* counters = st->mutable_counters();
  counters->set_applies_total(s.counters.applies);
  counters->set_verifications_total(s.counters.verifies);
  counters->set_drift_repairs_total(s.counters.drift_repairs);
  counters->set_failures_total(s.counters.failures);
  counters->set_io_error_bursts_total(s.counters.io_error_bursts);
  counters->set_reenumeration_loops_total(s.counters.reenumeration_loops);
  st->set_chip_source(s.chip_source);
  st->set_chip_origin(s.chip_origin);
  st->set_quarantined(s.quarantined);
  v1::UsbTopology* topology = st->mutable_topology();
  topology->set_root_hub_speed(UsbSpeedToProto(s.topology.root_speed));
  topology->set_usb3_partner(s.topology.Usb3Partner());
  for (const HubHop& hop : s.topology.hubs) {
    v1::UsbHubHop* h = topology->add_hubs();
    h->set_port_path(hop.port_path);
    h->set_usb_speed(UsbSpeedToProto(hop.speed));
    h->set_upstream_peer(hop.upstream_peer);
  }
  for (const Appearance& a : s.appearances) {
    v1::UsbAppearance* p = topology->add_appearances();
    p->set_bus(a.bus);
    p->set_devnum(a.devnum);
    p->set_port_path(a.port_path);
    p->set_usb_speed(UsbSpeedToProto(a.speed));
    SetTime(a.at, p->mutable_time());
  }
  if (s.last_io_burst) {
    v1::IoErrorBurst* b = st->mutable_last_io_burst();
    b->set_reason(s.last_io_burst->reason);
    b->set_errno_name(s.last_io_burst->errno_name);
    b->set_errno_value(s.last_io_burst->errno_value);
    b->set_count(static_cast<uint32_t>(s.last_io_burst->count));
    SetTime(s.last_io_burst->ended, b->mutable_end_time());
  }
  st->set_last_applied_bundle_version(s.applied_bundle_version);
  if (s.last_apply_time) SetTime(*s.last_apply_time, st->mutable_last_apply_time());
  SetTime(report_time, st->mutable_report_time());
}

}  // namespace rxfleet::agent
