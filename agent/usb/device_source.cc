#include "agent/usb/device_source.h"

namespace rxfleet::agent {

std::string_view HotplugEventName(HotplugEvent event) {
  switch (event) {
    case HotplugEvent::kArrived:
      return "arrived";
    case HotplugEvent::kLeft:
      return "left";
  }
  return "unknown";
}

DeviceSource::~DeviceSource() = default;

absl::StatusOr<std::unique_ptr<RegisterIo>> DeviceSource::OpenFamilyRegisterIo(
    const UsbDeviceInfo&, std::vector<uint32_t>, const common::RegisterProtocol&) {
  return absl::UnimplementedError("this device source has no register access for other families");
}

absl::StatusOr<BosSpeeds> DeviceSource::ReadBos(const UsbDeviceInfo& /*device*/) {
  return absl::UnimplementedError("this device source cannot read BOS descriptors");
}

}  // namespace rxfleet::agent
