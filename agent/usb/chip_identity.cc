#include "agent/usb/chip_identity.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/regular_file.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

using common::ToAbslView;

constexpr size_t kMaxFileBytes = 64 * 1024;
constexpr size_t kMaxFiles = 256;
constexpr size_t kMaxEntries = 4096;
constexpr absl::string_view kHeader = "vid\tpid\tchip\trx_agg_layout\tsource";

// Parses one data line; the entry's origin is set by the caller.
absl::StatusOr<ChipCatalog::Entry> ParseLine(absl::string_view line) {
  const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  if (fields.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 5 tab-separated columns (", kHeader, "), got ", fields.size()));
  }
  absl::StatusOr<common::VidPid> id = common::ParseVidPid(absl::StrCat(fields[0], ":", fields[1]));
  if (!id.ok()) return id.status();
  const std::string chip = absl::AsciiStrToLower(fields[2]);
  const std::optional<common::RxAggLayout> known = common::LayoutForChip(chip);
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("chip \"", fields[2], "\" is not a chip of this release's table"));
  }
  absl::StatusOr<common::RxAggLayout> layout = common::ParseRxAggLayout(std::string(fields[3]));
  if (!layout.ok()) return layout.status();
  if (*layout != *known) {
    return absl::InvalidArgumentError(absl::StrCat("layout ", fields[3], " does not match ", chip,
                                                   ", which has layout ",
                                                   ToAbslView(common::RxAggLayoutName(*known))));
  }
  ChipCatalog::Entry entry;
  entry.chip = chip;
  entry.id = common::ChipId{id->vid, id->pid, {}, *layout};
  return entry;
}

}  // namespace

std::string_view ChipSourceName(ChipSource source) {
  switch (source) {
    case ChipSource::kNone:
      return "";
    case ChipSource::kTable:
      return "table";
    case ChipSource::kExtension:
      return "chips.d";
    case ChipSource::kDriver:
      return "driver";
  }
  return "";
}

std::optional<std::string_view> ChipFromDriverName(std::string_view driver) {
  absl::string_view stem = ToAbslView(driver);
  if (!absl::ConsumePrefix(&stem, "rtw89_")) return std::nullopt;
  absl::ConsumeSuffix(&stem, "_git");
  const std::string chip = absl::StrCat("rtl", stem);
  for (std::string_view known : common::KnownChipNames()) {
    if (known == chip) return known;
  }
  return std::nullopt;
}

ChipCatalog ChipCatalog::Load(const std::string& directory, std::vector<std::string>* errors) {
  namespace fs = std::filesystem;
  ChipCatalog catalog;
  std::error_code ec;
  const fs::file_status status = fs::status(directory, ec);
  if (status.type() == fs::file_type::not_found) return catalog;  // no extensions
  if (ec) {
    errors->push_back(absl::StrCat(directory, ": cannot read: ", ec.message()));
    return catalog;
  }
  if (!fs::is_directory(status)) {
    errors->push_back(absl::StrCat(directory, ": not a directory; no chip-table extensions read"));
    return catalog;
  }
  std::vector<fs::path> files;
  fs::directory_iterator it(directory, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".tsv") files.push_back(it->path());
  }
  if (ec) {
    errors->push_back(absl::StrCat(directory, ": cannot list: ", ec.message()));
    return catalog;
  }
  std::sort(files.begin(), files.end());
  if (files.size() > kMaxFiles) {
    errors->push_back(absl::StrCat(directory, ": ", files.size(), " files; only the first ",
                                   kMaxFiles, " are read"));
    files.resize(kMaxFiles);
  }
  for (const fs::path& file : files) {
    const std::string name = file.string();
    // Not a regular file (a FIFO, a directory named *.tsv), too large, unreadable: each is named
    // with its reason, and the file is skipped.
    absl::StatusOr<std::string> text = common::ReadRegularFile(name, kMaxFileBytes);
    if (!text.ok()) {
      errors->push_back(absl::StrCat(text.status().message(), "; ignored"));
      continue;
    }
    std::vector<Entry> parsed;
    std::string problem;
    int line_number = 0;
    bool header_seen = false;
    for (absl::string_view raw : absl::StrSplit(*text, '\n')) {
      ++line_number;
      const absl::string_view line = absl::StripTrailingAsciiWhitespace(raw);
      if (line.empty() || line.front() == '#') continue;
      if (!header_seen) {
        header_seen = true;
        if (line != kHeader) {
          problem = absl::StrFormat(
              "%s:%d: the first line must be the header \"vid<TAB>pid<TAB>chip<TAB>"
              "rx_agg_layout<TAB>source\"",
              name, line_number);
          break;
        }
        continue;
      }
      absl::StatusOr<Entry> entry = ParseLine(line);
      if (!entry.ok()) {
        problem = absl::StrFormat("%s:%d: %s", name, line_number, entry.status().message());
        break;
      }
      entry->origin = absl::StrFormat("%s:%d", name, line_number);
      parsed.push_back(std::move(*entry));
    }
    if (!problem.empty()) {
      errors->push_back(absl::StrCat(problem, "; file ignored"));
      continue;
    }
    for (Entry& entry : parsed) {
      if (common::LookupChip(entry.id.vid, entry.id.pid) != nullptr) {
        errors->push_back(absl::StrCat(entry.origin, ": ",
                                       common::FormatVidPid(entry.id.vid, entry.id.pid),
                                       " is already in the shipped table; the shipped entry wins"));
        continue;
      }
      const auto key = std::pair(entry.id.vid, entry.id.pid);
      if (catalog.index_.contains(key)) {
        errors->push_back(absl::StrCat(entry.origin, ": duplicate of ",
                                       catalog.entries_[catalog.index_[key]].origin, "; ignored"));
        continue;
      }
      if (catalog.entries_.size() >= kMaxEntries) {
        errors->push_back(absl::StrCat(entry.origin, ": more than ", kMaxEntries,
                                       " extension ids; the rest are ignored"));
        return catalog;
      }
      catalog.entries_.push_back(std::move(entry));
      Entry& stored = catalog.entries_.back();
      stored.id.chip = stored.chip;
      catalog.index_[key] = catalog.entries_.size() - 1;
    }
  }
  return catalog;
}

const ChipCatalog::Entry* ChipCatalog::FindExtension(uint16_t vid, uint16_t pid) const {
  auto it = index_.find(std::pair(vid, pid));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

IdentifiedDevice IdentifyDevice(const UsbDeviceInfo& device, const ChipCatalog& catalog,
                                std::string_view bound_driver) {
  IdentifiedDevice out;
  out.assessment = AssessDevice(device);
  const std::string id = common::FormatVidPid(device.vid, device.pid);
  switch (out.assessment.device_class) {
    case DeviceClass::kSupported:
      out.source = ChipSource::kTable;
      out.origin = "rtw89-usb-devices.tsv";
      return out;
    case DeviceClass::kObserved:
      out.source = ChipSource::kTable;
      out.origin =
          absl::StrCat(ToAbslView(common::ChipFamilyName(out.assessment.observed->layout->family)),
                       "-usb-devices.tsv");
      return out;
    case DeviceClass::kStorageMode:
      return out;
    case DeviceClass::kUnknownRealtek:
    case DeviceClass::kOtherVendor:
      break;
  }
  if (const ChipCatalog::Entry* entry = catalog.FindExtension(device.vid, device.pid)) {
    out.assessment.device_class = DeviceClass::kSupported;
    out.assessment.chip = &entry->id;
    out.source = ChipSource::kExtension;
    out.origin = entry->origin;
    out.assessment.diagnoses = {
        {std::string(kDiagnosisChipFromExtension),
         absl::StrFormat("%s is not in this release's chip table; identified as %s by %s", id,
                         entry->chip, entry->origin)}};
    return out;
  }
  if (const std::optional<std::string_view> chip = ChipFromDriverName(bound_driver)) {
    for (const common::ChipId& entry : common::AllChips()) {
      if (entry.chip != *chip) continue;
      out.assessment.device_class = DeviceClass::kSupported;
      out.assessment.chip = &entry;  // chip and layout only; the vid:pid is the device's
      out.source = ChipSource::kDriver;
      out.origin = std::string(bound_driver);
      out.assessment.diagnoses = {
          {std::string(kDiagnosisChipFromDriver),
           absl::StrFormat("%s is not in this release's chip table; the bound driver %s says it "
                           "is an %s, so it is managed as one (add the id to a chips.d file to "
                           "make this independent of the driver)",
                           id, ToAbslView(bound_driver), ToAbslView(*chip))}};
      return out;
    }
  }
  if (const common::ObservedChip* observed = common::LookupObservedChipByDriver(bound_driver)) {
    out.assessment.device_class = DeviceClass::kObserved;
    out.assessment.observed = observed;  // names and layout only; the vid:pid is the device's
    out.source = ChipSource::kDriver;
    out.origin = std::string(bound_driver);
    out.assessment.diagnoses = {
        {std::string(kDiagnosisChipFromDriver),
         absl::StrFormat("%s is not in this release's chip tables; the bound driver %s says it "
                         "is an %s (%s), so it is observed as one: registers read, never "
                         "written",
                         id, ToAbslView(bound_driver), ToAbslView(observed->names),
                         ToAbslView(common::ChipFamilyName(observed->layout->family)))}};
    return out;
  }
  if (bound_driver.empty()) {
    out.assessment.diagnoses = {
        {std::string(kDiagnosisUnknownIdUnbound),
         absl::StrFormat("%s is not in this release's chip table nor in a chips.d file, and no "
                         "driver is bound to it, so its chip is unknown; left alone (if an rtw89 "
                         "driver supports it, load that driver or add the id to chips.d)",
                         id)}};
  }
  return out;
}

}  // namespace rxfleet::agent
