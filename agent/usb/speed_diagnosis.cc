#include "agent/usb/speed_diagnosis.h"

#include <string>

#include "absl/strings/str_format.h"
#include "common/chips/chip_table.h"
#include "common/string_view_compat.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {
namespace {

bool IsUsb2OrSlower(common::UsbSpeed speed) {
  return speed == common::UsbSpeed::kLow || speed == common::UsbSpeed::kFull ||
         speed == common::UsbSpeed::kHigh;
}

std::string Describe(const SpeedFacts& f) {
  return absl::StrFormat("%s (%s) on %s runs at %s",
                         common::FormatVidPid(f.device.vid, f.device.pid), f.chip,
                         f.device.port_path, common::UsbSpeedDisplayName(f.device.speed));
}

}  // namespace

bool DriverSwitchesToUsb3(std::string_view chip) { return !chip.empty() && chip != "rtl8851bu"; }

bool Usb3Capable(const SpeedFacts& facts) {
  // A device that declares USB 3.0 or later in its device descriptor is one, whatever the link.
  if (facts.device.bcd_usb >= 0x0300) return true;
  if (facts.bos) return facts.bos->superspeed || facts.bos->superspeed_plus;
  return facts.managed && DriverSwitchesToUsb3(facts.chip);
}

bool Usb3SwitchPending(const SpeedFacts& facts) {
  return facts.managed && IsUsb2OrSlower(facts.device.speed) && Usb3Capable(facts) &&
         DriverSwitchesToUsb3(facts.chip) && !facts.topology.peer_port_path.empty() &&
         facts.at_speed_for < facts.settle;
}

std::optional<Diagnosis> DiagnoseSpeed(const SpeedFacts& f) {
  if (!IsUsb2OrSlower(f.device.speed) || !Usb3Capable(f)) return std::nullopt;
  const std::string what = Describe(f);
  if (!f.topology.peer_port_path.empty()) {
    if (Usb3SwitchPending(f)) {
      return Diagnosis{
          std::string(kDiagnosisUsb3SwitchPending),
          absl::StrFormat("%s on a connector with a USB 3 partner (%s); the driver "
                          "switches it to USB 3, so the agent waits %s before "
                          "writing. Nothing to do yet",
                          what, f.topology.peer_port_path, absl::FormatDuration(f.settle))};
    }
    if (!f.managed) {
      return Diagnosis{
          std::string(kDiagnosisUsb3SwitchFailed),
          absl::StrFormat("%s although the connector has a USB 3 partner (%s) and the adapter "
                          "supports SuperSpeed: the link came up at USB 2, which caps its "
                          "throughput. Check the cable or extension (USB 2 ones carry no "
                          "SuperSpeed lanes) and replug the adapter, or keep it at USB 2 on "
                          "purpose (2.4 GHz interference) and ignore this",
                          what, f.topology.peer_port_path)};
    }
    return Diagnosis{
        std::string(kDiagnosisUsb3SwitchFailed),
        absl::StrFormat("%s although the connector has a USB 3 partner (%s) and the adapter "
                        "supports SuperSpeed; the switch to USB 3 did not happen within %s. "
                        "Throughput is capped near 300 Mbit/s: check the cable and the "
                        "driver's log (usb write32 0xc4), replug the adapter, or keep it at "
                        "USB 2 on purpose (2.4 GHz interference) and ignore this",
                        what, f.topology.peer_port_path, absl::FormatDuration(f.settle))};
  }
  for (const HubHop& hub : f.topology.hubs) {
    if (IsUsb2OrSlower(hub.speed) && !hub.upstream_peer.empty()) {
      return Diagnosis{std::string(kDiagnosisHubLimitsSpeed),
                       absl::StrFormat("%s behind hub %s, which runs at %s on a port with a USB "
                                       "3 partner (%s): the hub, not the adapter, limits the "
                                       "speed. Plug the adapter into the host directly or use a "
                                       "USB 3 hub",
                                       what, hub.port_path, common::UsbSpeedDisplayName(hub.speed),
                                       hub.upstream_peer)};
    }
  }
  return Diagnosis{std::string(kDiagnosisUsb2OnlyPort),
                   absl::StrFormat("%s on a port without a USB 3 partner (a USB 2-only "
                                   "controller or hub): nothing to fix at the adapter; for "
                                   "SuperSpeed it needs a USB 3 port. The hold follows the "
                                   "USB 2 speed",
                                   what)};
}

}  // namespace rxfleet::agent
