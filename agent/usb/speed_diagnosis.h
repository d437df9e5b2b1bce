#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "agent/sysfs/topology.h"
#include "agent/usb/bos.h"
#include "agent/usb/device_source.h"
#include "agent/usb/diagnosis.h"

namespace rxfleet::agent {

/// Diagnosis codes: why a USB 3-capable adapter runs at USB 2, one code per cause, since each
/// needs different advice (field reports: lwfinger/rtw88#275, #422, #270, #262,
/// morrownr/USB-WiFi#214, #458).
inline constexpr std::string_view kDiagnosisUsb2OnlyPort = "usb2_only_port";
inline constexpr std::string_view kDiagnosisHubLimitsSpeed = "hub_limits_speed";
inline constexpr std::string_view kDiagnosisUsb3SwitchPending = "usb3_switch_pending";
inline constexpr std::string_view kDiagnosisUsb3SwitchFailed = "usb3_switch_failed";

/// True if the rtw89 driver switches `chip` from USB 2 to USB 3 itself (a write to PAD_CTRL2
/// 0x00C4 after probe, then the device re-enumerates at SuperSpeed on the controller's other
/// bus): every rtw89 USB chip except the RTL8851BU, a USB 2 chip (rtw89 usb.c
/// rtw89_usb_switch_mode, rtw-next 8368970b6240; data/rtw89-rx-agg.md).
bool DriverSwitchesToUsb3(std::string_view chip);

struct SpeedFacts {
  UsbDeviceInfo device;
  /// Chip name of the adapter ("rtl8922au", "rtl8822bu").
  std::string_view chip;
  /// True for an rtw89 (managed) adapter: its driver switches it to USB 3 (DriverSwitchesToUsb3)
  /// and the agent writes it, so it settles. False for the observe-only families (rtw88, mt76):
  /// USB 3 capability then comes from bcdUSB and the BOS only, and nothing is pending.
  bool managed = true;
  /// The device's BOS, if it could be read. Without it the chip decides (DriverSwitchesToUsb3).
  std::optional<BosSpeeds> bos;
  UsbTopology topology;
  /// How long the adapter has been at its current speed on this connector, as far as the agent
  /// saw (since the agent first saw it there).
  absl::Duration at_speed_for = absl::ZeroDuration();
  /// The settle period (AdapterManagerOptions::settle; zero for observe-only adapters).
  absl::Duration settle = absl::ZeroDuration();
};

/// True when the adapter can run at SuperSpeed: bcdUSB >= 0x0300, or its BOS says so, or,
/// without a BOS, a managed adapter whose chip the driver switches to USB 3.
bool Usb3Capable(const SpeedFacts& facts);

/// True while a managed, USB 3-capable adapter at high-speed on a connector with a USB 3 partner
/// waits for the driver's switch (at_speed_for < settle): no register write until it ends.
bool Usb3SwitchPending(const SpeedFacts& facts);

/// The speed finding for a supported adapter, at most one:
///  - not at high-speed or slower, speed unknown, or not USB 3-capable: none;
///  - its port has a USB 3 partner (peer): "usb3_switch_pending" while settling, then
///    "usb3_switch_failed" (observe-only adapters: "usb3_switch_failed" at once, with advice
///    about the cable and the port instead of the driver's switch);
///  - behind a hub that runs at high-speed or slower whose upstream port has a USB 3 partner or
///    sits on a SuperSpeed root hub: "hub_limits_speed", naming the hub's port path and speed;
///  - otherwise "usb2_only_port" (nothing to fix at the adapter).
/// The hold never depends on this: it follows the speed the adapter has.
std::optional<Diagnosis> DiagnoseSpeed(const SpeedFacts& facts);

}  // namespace rxfleet::agent
