#include "agent/usb/observe.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rxfleet::agent {
namespace {

// REG_SYS_CFG2+3 (0x00FF) reads 0x20 when the chip runs in USB 3 mode (rtw88 P usb.c
// rtw_usb_switch_mode_new).
constexpr uint32_t kRtw88Usb3ModeByte = 0x20;

std::optional<uint32_t> FieldOf(const std::vector<common::FieldValue>& fields,
                                std::string_view name) {
  for (const common::FieldValue& f : fields) {
    if (f.name == name) return f.value;
  }
  return std::nullopt;
}

bool AtUsb3(common::UsbSpeed speed) {
  return speed == common::UsbSpeed::kSuper || speed == common::UsbSpeed::kSuperPlus;
}

std::string Name(const common::ObservedChip& chip) {
  return absl::StrFormat("%s (%s)", chip.names, chip.layout->driver);
}

Diagnosis HoldNotControllable(const common::ObservedChip& chip) {
  return {std::string(kDiagnosisHoldNotControllable),
          absl::StrFormat(
              "%s: the RX aggregation hold is not controllable: the mt76 driver keeps hardware RX "
              "aggregation off on purpose because its USB RX path takes one frame per URB, so "
              "aggregated transfers would lose frames; rxfleet only reads this adapter. Action: "
              "none on the adapter (a hold needs an mt76 driver change); for a tunable hold use an "
              "rtw89 adapter",
              Name(chip))};
}

}  // namespace

Observation AssessObservation(const ObservationInput& input) {
  Observation out;
  const common::ObservedChip& chip = *input.chip;
  const common::DriverLayout& layout = *chip.layout;
  if (layout.family == common::ChipFamily::kMt76)
    out.diagnoses.push_back(HoldNotControllable(chip));

  std::vector<std::string> problems = input.read_errors;
  for (uint32_t address : common::ReadAddresses(layout)) {
    auto it = input.words.find(address);
    if (it == input.words.end()) {
      if (input.read_errors.empty())
        problems.push_back(absl::StrFormat("0x%04x not read", address));
    } else if (common::IsImplausibleWord(it->second)) {
      problems.push_back(absl::StrFormat("0x%04x read 0x%08x, a failed or asleep read, not a value",
                                         address, it->second));
    }
  }
  if (!input.netdev_up) problems.insert(problems.begin(), "netdev down or absent");
  if (!problems.empty()) {
    out.not_judged_reason = absl::StrJoin(problems, "; ");
    return out;
  }
  out.judged = true;
  out.fields = common::DecodeFields(layout, input.words);
  if (layout.family != common::ChipFamily::kRtw88) return out;

  const uint32_t size = FieldOf(out.fields, "rx_agg_size").value_or(0);
  const uint32_t timeout = FieldOf(out.fields, "rx_agg_timeout").value_or(0);
  const bool enabled = FieldOf(out.fields, "rx_agg_en").value_or(0) != 0;
  const std::optional<common::KernelVersion> kernel =
      common::ParseKernelVersion(input.kernel_release);
  if ((size == 0 || !enabled) && layout.rx_agg_since && kernel && *kernel < *layout.rx_agg_since) {
    out.diagnoses.push_back(
        {std::string(kDiagnosisRxAggOffOldKernel),
         absl::StrFormat(
             "%s: USB RX aggregation is off (0x0280 size %d, timeout %d; 0x010C BIT_RXDMA_AGG_EN "
             "%d) and kernel %s predates %d.%d, the first whose rtw88 enables it for this chip "
             "(%s; RTL8811CU measured 28 -> 231 Mbit/s with it). Action: upgrade the kernel to "
             "%d.%d or later",
             Name(chip), size, timeout, enabled ? 1 : 0, input.kernel_release,
             layout.rx_agg_since->major, layout.rx_agg_since->minor, layout.rx_agg_commit,
             layout.rx_agg_since->major, layout.rx_agg_since->minor)});
  }
  const bool usb3_mode =
      AtUsb3(input.speed) || FieldOf(out.fields, "sys_cfg2_byte3") == kRtw88Usb3ModeByte;
  if (layout.driver == "rtw_8822bu" && usb3_mode && FieldOf(out.fields, "en_pre_calc") == 1u) {
    out.diagnoses.push_back(
        {std::string(kDiagnosisRtw88PreCalcUsb3),
         absl::StrFormat(
             "%s: BIT_EN_PRE_CALC (bit 29 of 0x0280) is set at USB 3: RTL8822BU then does not "
             "pass all frames to the driver (82.7 against 599 Mbit/s), fixed by 4aefde403da7 in "
             "Linux 6.12-rc5. Action: upgrade the kernel to 6.12 or later; until then keep the "
             "adapter at USB 2 (rtw88_usb module parameter switch_usb_mode=N, or a USB 2 port)",
             Name(chip))});
  }
  return out;
}

}  // namespace rxfleet::agent
