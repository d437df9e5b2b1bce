#include "agent/usb/diagnosis.h"

#include "absl/strings/str_format.h"

namespace rxfleet::agent {
namespace {

// bcdUSB of a device that implements USB 3.0 or later.
constexpr uint16_t kBcdUsb3 = 0x0300;

bool IsUsb2OrSlower(common::UsbSpeed speed) {
  return speed == common::UsbSpeed::kLow || speed == common::UsbSpeed::kFull ||
         speed == common::UsbSpeed::kHigh;
}

std::string FormatBcd(uint16_t bcd) { return absl::StrFormat("%x.%02x", bcd >> 8, bcd & 0xFF); }

// usb3_capable_at_usb2 when a USB 3 device (bcdUSB >= 3.0) runs at high-speed or slower.
void AddUsb3AtUsb2(const UsbDeviceInfo& device, const std::string& id, std::string_view chip,
                   std::string_view cost, DeviceAssessment& assessment) {
  if (device.bcd_usb < kBcdUsb3 || !IsUsb2OrSlower(device.speed)) return;
  assessment.diagnoses.push_back(
      {std::string(kDiagnosisUsb3CapableAtUsb2),
       absl::StrFormat("%s (%s) supports USB %s but runs at %s: running at USB 2%s (use a USB 3 "
                       "port, cable or hub)",
                       id, chip, FormatBcd(device.bcd_usb),
                       common::UsbSpeedDisplayName(device.speed), cost)});
}

}  // namespace

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
    AddUsb3AtUsb2(device, id, chip->chip, "; throughput capped near 300 Mbit/s", assessment);
    return assessment;
  }
  if (const common::ObservedChip* chip = common::LookupObservedChip(device.vid, device.pid);
      chip != nullptr) {
    assessment.device_class = DeviceClass::kObserved;
    assessment.observed = chip;
    AddUsb3AtUsb2(device, id, chip->names, " caps its throughput", assessment);
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
