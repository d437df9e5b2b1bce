#include "agent/usb/diagnosis.h"

#include "absl/strings/str_format.h"

namespace rxfleet::agent {

std::string_view DeviceClassName(DeviceClass device_class) {
  switch (device_class) {
    case DeviceClass::kSupported:
      return "supported";
    case DeviceClass::kObserved:
      return "observed";
    case DeviceClass::kStorageMode:
      return "storage_mode";
    case DeviceClass::kUnknownRealtek:
      return "unknown_realtek";
    case DeviceClass::kOtherVendor:
      return "other_vendor";
  }
  return "other_vendor";
}

DeviceAssessment AssessDevice(const UsbDeviceInfo& device) {
  DeviceAssessment assessment;
  const std::string id = common::FormatVidPid(device.vid, device.pid);
  if (common::IsRealtekStorageMode(device.vid, device.pid)) {
    assessment.device_class = DeviceClass::kStorageMode;
    assessment.diagnoses.push_back(
        {std::string(kDiagnosisStorageMode),
         absl::StrFormat("%s: Realtek adapter in USB storage (virtual CD-ROM) mode; it needs a "
                         "mode switch (usb_modeswitch) before the Wi-Fi driver can bind",
                         id)});
    return assessment;
  }
  if (const common::ChipId* chip = common::LookupChip(device.vid, device.pid); chip != nullptr) {
    assessment.device_class = DeviceClass::kSupported;
    assessment.chip = chip;
    return assessment;
  }
  if (const common::ObservedChip* chip = common::LookupObservedChip(device.vid, device.pid);
      chip != nullptr) {
    assessment.device_class = DeviceClass::kObserved;
    assessment.observed = chip;
    return assessment;
  }
  if (device.vid == kRealtekVid) {
    assessment.device_class = DeviceClass::kUnknownRealtek;
    assessment.diagnoses.push_back(
        {std::string(kDiagnosisUnsupportedRealtek),
         absl::StrFormat("%s: Realtek device not in the rtw89 USB chip table; left alone", id)});
    return assessment;
  }
  assessment.device_class = DeviceClass::kOtherVendor;
  assessment.diagnoses.push_back({std::string(kDiagnosisOtherVendor),
                                  absl::StrFormat("%s: not an rtw89 adapter; left alone", id)});
  return assessment;
}

}  // namespace rxfleet::agent
