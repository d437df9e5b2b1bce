// libFuzzer target: the list-filter selector parsers (common/policy/selectors.h), label and
// field selectors as rxfleetctl sends them and the server parses them, then matching against a
// fixed adapter. Any input must parse or fail with a status; nothing may crash.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/policy/selectors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rxfleet::common::AdapterAttributes adapter;
  adapter.adapter_id = "port-2-2";
  adapter.chip = "rtl8852bu";
  adapter.vid = 0x0bda;
  adapter.pid = 0xb832;
  adapter.usb_speed = rxfleet::common::UsbSpeed::kSuper;
  adapter.host_labels = {{"board", "pi1"}, {"arch", "arm64"}};
  adapter.host = "pi1";
  if (auto labels = rxfleet::common::ParseLabelSelector(text); labels.ok()) {
    (void)labels->Matches(adapter.host_labels);
  }
  if (auto fields = rxfleet::common::ParseFieldSelector(text); fields.ok()) {
    (void)fields->Matches(adapter);
  }
  return 0;
}
