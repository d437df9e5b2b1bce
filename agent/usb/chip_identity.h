#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/usb/device_source.h"
#include "agent/usb/diagnosis.h"
#include "common/chips/chip_table.h"

namespace rxfleet::agent {

/// Where the agent learnt which chip an adapter carries.
enum class ChipSource : uint8_t {
  kNone,       ///< not identified (unsupported, storage mode, other vendor)
  kTable,      ///< the chip tables shipped with this release (LookupChip, LookupObservedChip)
  kExtension,  ///< a runtime chip-table extension file (ChipCatalog::Load, chips.d/*.tsv)
  kDriver,     ///< the driver bound to the device (sysfs `driver`: ChipFromDriverName for
               ///< rtw89, common::LookupObservedChipByDriver for rtw88 and mt76)
};

/// "", "table", "chips.d", "driver" (metric label values and JSON).
std::string_view ChipSourceName(ChipSource source);

/// The chip an rtw89 driver module name stands for: "rtw89_8922au" -> rtl8922au,
/// "rtw89_8852au_git" (the out-of-tree morrownr/rtw89 build) -> rtl8852au. Only chips of the
/// shipped table are returned (their layout is known); the bus module "rtw89_usb", other
/// drivers and unknown chips give nullopt.
std::optional<std::string_view> ChipFromDriverName(std::string_view driver);

/// The shipped chip table plus runtime extensions. Immutable after Load; thread-safe to read.
class ChipCatalog {
 public:
  /// Only the shipped table.
  ChipCatalog() = default;
  // Entries point into their own storage: movable (a deque keeps elements in place), never
  // copied.
  ChipCatalog(const ChipCatalog&) = delete;
  ChipCatalog& operator=(const ChipCatalog&) = delete;
  ChipCatalog(ChipCatalog&&) = default;
  ChipCatalog& operator=(ChipCatalog&&) = default;

  /// Loads every "*.tsv" file of `directory` (sorted by name) in the shipped TSV's format: a
  /// header line "vid\tpid\tchip\trx_agg_layout\tsource", then one id per line (4 hex digits
  /// each, a chip of the shipped table, its layout v1..v3, a free-text source). Blank lines and
  /// lines starting with "#" are skipped. A missing directory is an empty extension; a path
  /// that is not a directory or cannot be listed gives an empty extension and one line in
  /// `errors`. A file with a bad line is refused as a whole and named in `errors`
  /// ("FILE:LINE: problem"); so is a "*.tsv" that is not a regular file (FIFO, directory),
  /// is larger than 64 KiB or cannot be read (with the OS reason); the other files still
  /// load. Ids already in the shipped table keep the shipped entry (noted in `errors`).
  /// Bounds: 64 KiB per file, 256 files (the first by name), 4096 ids.
  static ChipCatalog Load(const std::string& directory, std::vector<std::string>* errors);

  struct Entry {
    common::ChipId id;  ///< id.chip points into `chip` below (stable: entries never move)
    std::string chip;
    std::string origin;  ///< "FILE:LINE"
  };
  /// The extension entry for vid:pid, nullptr if none.
  const Entry* FindExtension(uint16_t vid, uint16_t pid) const;
  size_t extension_count() const { return entries_.size(); }

 private:
  std::deque<Entry> entries_;
  std::map<std::pair<uint16_t, uint16_t>, size_t> index_;
};

/// AssessDevice plus the identification sources the chip table alone does not have.
struct IdentifiedDevice {
  DeviceAssessment assessment;
  ChipSource source = ChipSource::kNone;
  /// Human origin of the identification: "rtw89-usb-devices.tsv", "FILE:LINE", or the driver
  /// name; empty for kNone.
  std::string origin;
};

/// Diagnosis codes of identification.
inline constexpr std::string_view kDiagnosisChipFromDriver = "chip_from_driver";
inline constexpr std::string_view kDiagnosisChipFromExtension = "chip_from_extension";
inline constexpr std::string_view kDiagnosisUnknownIdUnbound = "unknown_id_unbound";

/// Identifies `device`: the shipped table first (AssessDevice), then `catalog`'s extensions
/// (kSupported, diagnosis "chip_from_extension"), then `bound_driver`, the driver bound to the
/// device's first interface (kSupported with the driver's chip and layout, diagnosis
/// "chip_from_driver"; field case: TP-Link TBE400U 37ad:0104 bound to rtw89_8922au before the
/// id reached any release, morrownr/rtw89 PR#123), or an rtw88/mt76 driver (kObserved with that
/// driver's layout, "chip_from_driver": read, never written). A device in neither with no driver
/// bound keeps its class and gets "unknown_id_unbound" (left alone: nothing says which registers it
/// has). Storage-mode devices are never re-identified.
IdentifiedDevice IdentifyDevice(const UsbDeviceInfo& device, const ChipCatalog& catalog,
                                std::string_view bound_driver);

}  // namespace rxfleet::agent
