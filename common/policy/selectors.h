#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/policy/policy.h"
#include "common/usb_speed.h"

namespace rxfleet::common {

/// What a selector can see of an adapter.
struct AdapterAttributes {
  std::string adapter_id;
  std::string chip;    ///< chip table name ("rtl8922au"), empty if unknown
  std::string family;  ///< chip family ("rtw89", "rtw88", "mt76"), empty if in no family table
  uint16_t vid = 0, pid = 0;
  UsbSpeed usb_speed = UsbSpeed::kUnknown;
  std::map<std::string, std::string> host_labels;
  std::string host;  ///< host name, matched by the field selector's host=
};

/// True if every non-empty term of `selector` matches `adapter` (see Selector).
bool Matches(const Selector& selector, const AdapterAttributes& adapter);

/// A label selector for list filters, Kubernetes syntax: comma-separated requirements
/// "key=value" (or "key==value"), "key!=value", "key" (exists), "!key" (does not exist).
/// All requirements must hold; an empty selector matches everything.
struct LabelSelector {
  enum class Op : uint8_t { kEquals, kNotEquals, kExists, kNotExists };
  struct Requirement {
    std::string key;
    Op op;
    std::string value;  ///< empty for kExists/kNotExists
  };
  std::vector<Requirement> requirements;

  bool Matches(const std::map<std::string, std::string>& labels) const;
};

/// Parses a label selector ("board=pi1,arch=arm64"). Keys and values are validated with
/// ValidateLabelKey/ValidateLabelValue; whitespace around terms is ignored.
/// Returns InvalidArgument naming the bad term.
absl::StatusOr<LabelSelector> ParseLabelSelector(std::string_view text);

/// A field selector over adapter attributes for list filters: comma-separated
/// "field=value" or "field!=value" with fields usb_speed (a UsbSpeedName), chip, vid_pid
/// ("xxxx:xxxx"), host and adapter. All terms must hold; empty matches everything.
struct FieldSelector {
  enum class Field : uint8_t { kUsbSpeed, kChip, kVidPid, kHost, kAdapter };
  struct Term {
    Field field;
    bool negated = false;
    std::string value;                        ///< normalised: speed name, lower-case chip/vid_pid
    UsbSpeed usb_speed = UsbSpeed::kUnknown;  ///< for kUsbSpeed
    VidPid vid_pid;                           ///< for kVidPid
  };
  std::vector<Term> terms;

  bool Matches(const AdapterAttributes& adapter) const;
};

/// Parses "usb_speed=super,chip=rtl8922au,vid_pid=0bda:8912,host=h1".
/// Returns InvalidArgument naming an unknown field or an unparsable value.
absl::StatusOr<FieldSelector> ParseFieldSelector(std::string_view text);

}  // namespace rxfleet::common
