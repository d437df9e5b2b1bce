#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace rxfleet::common {

// Chip families as data. A family is a set of USB IDs (one TSV in common/chips, turned into a
// table at build time) and, per driver module, one layout description: the vendor-request
// protocol of its registers, whether rxfleet may write them, and the RX aggregation fields it
// reads. Facts and sources: docs/AGENT.md "Chip families"; the driver-code citations are next
// to each entry in family.cc (rtw88: lwfinger/rtw88 @4ef9d99; mt76: openwrt/mt76 @5967691).
//
// Write permission is part of the protocol entry (RegisterProtocol::writable): only rtw89 has
// it. rtw88 rewrites its RX aggregation registers from its 2 s watchdog; mt76 keeps hardware
// RX aggregation off because its RX path takes one frame per URB, so a write would lose frames.
// The register I/O layer (agent/usb/libusb_register_io.h) refuses every write on a protocol
// without it, before any bus traffic.

/// "rtw89" (managed: the agent holds RX aggregation), "rtw88" and "mt76" (observe-only).
enum class ChipFamily : uint8_t { kRtw89, kRtw88, kMt76 };

/// "rtw89", "rtw88", "mt76".
std::string_view ChipFamilyName(ChipFamily family);

/// Parses one of the names above; InvalidArgument naming the accepted ones otherwise.
absl::StatusOr<ChipFamily> ParseChipFamily(std::string_view name);

/// True only for rtw89: the agent writes RX aggregation registers (its hold) on this family.
bool FamilyManaged(ChipFamily family);

/// How a register address is carried in the SETUP packet.
enum class AddressEncoding : uint8_t {
  /// rtw89: wValue = addr[15:0], wIndex = addr[23:16] (rtw89 usb.c rtw89_usb_vendorreq).
  kRtw89,
  /// rtw88: wValue = addr[15:0], wIndex = 0 (RTW_USB_VENQT_CMD_IDX; rtw88 usb.c:90-92).
  kRtw88,
  /// mt76: wValue = addr[31:16], wIndex = addr[15:0] (mt76 usb.c:65-79).
  kMt76,
};

/// wValue / wIndex of one register access.
struct WireAddress {
  uint16_t value = 0;
  uint16_t index = 0;
  friend bool operator==(const WireAddress&, const WireAddress&) = default;
};

/// Splits `address` per `encoding`. The caller checks the address against the protocol's
/// max_address first (bits above it are dropped here).
WireAddress EncodeAddress(AddressEncoding encoding, uint32_t address);

/// The inverse, as an emulator decodes a SETUP packet.
uint32_t DecodeAddress(AddressEncoding encoding, uint16_t value, uint16_t index);

/// The vendor-request protocol of one driver's registers (32-bit accesses, little-endian data).
struct RegisterProtocol {
  uint8_t read_request;        ///< bRequest of a read
  uint8_t read_request_type;   ///< bmRequestType of a read (IN | vendor | recipient)
  uint8_t write_request;       ///< bRequest of a write (only used where writable)
  uint8_t write_request_type;  ///< bmRequestType of a write
  AddressEncoding encoding;
  uint32_t max_address;     ///< largest encodable address
  unsigned int timeout_ms;  ///< per transfer
  /// The family's write permission: false means no code path may write (the register I/O
  /// layer refuses Write32 without sending anything).
  bool writable;
};

/// The rtw89 protocol: 0x05, 0xC0/0x40, kRtw89 encoding, addresses up to 0xFFFFFF, 500 ms,
/// writable.
const RegisterProtocol& Rtw89Protocol();

/// One field of a register word: value = (word & mask) >> shift.
struct RegisterField {
  std::string_view name;  ///< snake_case, unique per layout (metrics label value)
  uint32_t address;       ///< 32-bit aligned register address of the word holding the field
  uint32_t mask;
  uint32_t shift;
};

/// What a kernel release must be for the driver to aggregate USB RX (rtw88).
struct KernelVersion {
  int major = 0;
  int minor = 0;
  friend auto operator<=>(const KernelVersion&, const KernelVersion&) = default;
};

/// Parses the leading "MAJOR.MINOR" of a kernel release ("6.6.31-v8+" -> 6.6); nullopt when it
/// does not start that way.
std::optional<KernelVersion> ParseKernelVersion(std::string_view release);

/// The layout description of one driver module of an observe-only family.
struct DriverLayout {
  std::string_view driver;  ///< module name as in the TSV ("rtw_8822bu", "mt7921u")
  ChipFamily family;
  RegisterProtocol protocol;
  absl::Span<const RegisterField> fields;
  /// rtw88: first kernel whose driver turns USB RX aggregation on, and the commit; nullopt when
  /// the driver never aggregates (8723du) or the family has no such notion (mt76).
  std::optional<KernelVersion> rx_agg_since;
  std::string_view rx_agg_commit;
};

/// One USB ID of an observe-only family (generated from its TSV).
struct ObservedChip {
  uint16_t vid;
  uint16_t pid;
  std::string_view names;  ///< marketing names, e.g. "RTL8822BU/RTL8812BU"
  const DriverLayout* layout;
};

/// The entry for vid:pid in the rtw88 or mt76 table, or nullptr. rtw89 IDs are in
/// chip_table.h (LookupChip).
const ObservedChip* LookupObservedChip(uint16_t vid, uint16_t pid);

/// The first entry (TSV order) whose driver module is `driver`, for an id in no table that a
/// bound driver identifies: "rtw_8822bu" (out-of-tree lwfinger/rtw88, the TSV's name) or
/// "rtw88_8822bu" (the in-kernel module), "mt7921u", ... Only its names and layout describe the
/// device (its vid:pid is the entry's). nullptr for other drivers and "".
const ObservedChip* LookupObservedChipByDriver(std::string_view driver);

/// All IDs of an observe-only family in TSV order, first row of a duplicated ID only
/// (rtw88: 133, mt76: 50). Empty for rtw89.
std::vector<const ObservedChip*> ObservedChips(ChipFamily family);

/// The distinct aligned register addresses a layout reads, sorted: the allow-list of its
/// register I/O.
std::vector<uint32_t> ReadAddresses(const DriverLayout& layout);

/// A decoded field value.
struct FieldValue {
  std::string name;
  uint32_t value = 0;
  friend bool operator==(const FieldValue&, const FieldValue&) = default;
};

/// Decodes every field whose word is in `words` (address -> word), in the layout's order.
std::vector<FieldValue> DecodeFields(const DriverLayout& layout,
                                     const std::map<uint32_t, uint32_t>& words);

/// True for words that are not register values: 0xFFFFFFFF (mt76's failed read, usb.c:65-79,
/// and what a dead bus returns) and the rtw89 sleep patterns 0xDEADBEEF / 0xEAEAEAEA.
bool IsImplausibleWord(uint32_t word);

}  // namespace rxfleet::common
