#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/usb/device_source.h"
#include "common/chips/chip_table.h"
#include "common/chips/family.h"

namespace rxfleet::agent {

/// What a USB device is, as far as rxfleet is concerned.
enum class DeviceClass {
  kSupported,       ///< An upstream rtw89 USB ID (common::LookupChip finds it).
  kObserved,        ///< An rtw88 or mt76 USB ID (common::LookupObservedChip): read, never written.
  kStorageMode,     ///< Realtek virtual CD-ROM 0bda:1a2b, waiting for a mode switch.
  kUnknownRealtek,  ///< Realtek vendor ID 0bda, not in the chip table.
  kOtherVendor,     ///< Anything else: not touched.
};

/// "supported", "observed", "storage_mode", "unknown_realtek", "other_vendor".
std::string_view DeviceClassName(DeviceClass device_class);

/// One finding about a device: a stable machine code (metrics label, status reason) and a
/// human message.
struct Diagnosis {
  std::string code;
  std::string message;

  friend bool operator==(const Diagnosis&, const Diagnosis&) = default;
};

/// Diagnosis codes.
inline constexpr std::string_view kDiagnosisStorageMode = "storage_mode";
inline constexpr std::string_view kDiagnosisUnsupportedRealtek = "unsupported_realtek";
inline constexpr std::string_view kDiagnosisOtherVendor = "other_vendor";

/// Realtek's USB vendor ID.
inline constexpr uint16_t kRealtekVid = 0x0bda;

struct DeviceAssessment {
  DeviceClass device_class = DeviceClass::kOtherVendor;
  /// The chip table entry for kSupported, nullptr otherwise (static storage).
  const common::ChipId* chip = nullptr;
  /// The observe-only family entry for kObserved, nullptr otherwise (static storage).
  const common::ObservedChip* observed = nullptr;
  /// Zero or more findings, most important first.
  std::vector<Diagnosis> diagnoses;
};

/// Classifies a device and lists what is wrong with it. Pure: uses only `device` and the chip
/// table. Rules:
///  - 0bda:1a2b (common::IsRealtekStorageMode) -> kStorageMode, diagnosis "storage_mode".
///  - an upstream rtw89 ID -> kSupported, no finding (why a USB 3 adapter runs at USB 2 needs
///    the BOS and the port topology: DiagnoseSpeed in agent/usb/speed_diagnosis.h).
///  - an rtw88 or mt76 ID -> kObserved (family diagnoses come from the register reads,
///    agent/usb/observe.h; speed findings from DiagnoseSpeed as for rtw89).
///  - other 0bda IDs -> kUnknownRealtek, "unsupported_realtek".
///  - other vendors -> kOtherVendor, "other_vendor" (left alone).
DeviceAssessment AssessDevice(const UsbDeviceInfo& device);

}  // namespace rxfleet::agent
