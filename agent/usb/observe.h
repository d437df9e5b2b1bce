#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/usb/diagnosis.h"
#include "common/chips/family.h"
#include "common/usb_speed.h"

namespace rxfleet::agent {

/// Diagnosis codes of the observe-only families (docs/AGENT.md "Chip families").
inline constexpr std::string_view kDiagnosisRxAggOffOldKernel = "rx_agg_off_old_kernel";
inline constexpr std::string_view kDiagnosisRtw88PreCalcUsb3 = "rtw88_pre_calc_usb3";
inline constexpr std::string_view kDiagnosisHoldNotControllable = "hold_not_controllable";

/// What one read-only pass of an observe-only adapter saw.
struct ObservationInput {
  const common::ObservedChip* chip = nullptr;  ///< must not be null
  common::UsbSpeed speed = common::UsbSpeed::kUnknown;
  /// The adapter's netdev exists and its operstate is "up" (rtw88 keeps 0x0280/0x010C in its
  /// "off" power section, which may read garbage while the chip is in IPS/LPS).
  bool netdev_up = false;
  /// Kernel release the driver runs on (uname -r or the host's `kernel` label), e.g.
  /// "6.6.31-v8+"; empty when unknown.
  std::string kernel_release;
  /// Words read successfully, by address (the layout's ReadAddresses).
  std::map<uint32_t, uint32_t> words;
  /// One text per failed read ("read of register 0x0280: timeout"); any makes the pass unjudged.
  std::vector<std::string> read_errors;
};

struct Observation {
  /// True when every register of the layout was read, the values are plausible and the netdev is
  /// up: only then are fields reported and register-based diagnoses made.
  bool judged = false;
  /// Why not, for the status message ("netdev down", "0x74000018 read 0xffffffff ..."); empty
  /// when judged.
  std::string not_judged_reason;
  /// Decoded fields (common::DecodeFields), empty unless judged.
  std::vector<common::FieldValue> fields;
  /// Family diagnoses, each with the operator's action:
  ///  - hold_not_controllable (mt76, always, judged or not): the driver keeps hardware RX
  ///    aggregation off because its RX path takes one frame per URB (mt76 usb.c:511-553).
  ///  - rx_agg_off_old_kernel (rtw88, judged): size 0 or BIT_RXDMA_AGG_EN clear on a kernel
  ///    older than the layout's rx_agg_since; names both versions.
  ///  - rtw88_pre_calc_usb3 (rtw_8822bu, judged): bit 29 of 0x0280 set while at USB 3
  ///    (SuperSpeed link or 0x00FF == 0x20), the RX loss fixed by 4aefde403da7.
  std::vector<Diagnosis> diagnoses;
};

/// Pure: judges one pass. Never looks at anything but `input`.
Observation AssessObservation(const ObservationInput& input);

}  // namespace rxfleet::agent
