#pragma once

// Reading and writing the YAML documents of rxfleet (kind: RxAggPolicy, kind: Experiment):
// positioned errors, strict scalar/list/map readers, the adapter selector and the RX
// aggregation settings blocks both kinds share, and the value rules behind them.

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/chips/rx_agg.h"
#include "common/policy/policy.h"
#include "common/probe/probe_spec.h"
#include "common/usb_speed.h"
#include "common/validation.h"

namespace rxfleet::common {

// ---------------------------------------------------------------------------------------------
// Value rules. Each returns InvalidArgument with the message alone (no position or field path);
// callers add those. Names and ids: common/validation.h.

/// A priority in -1000..1000 (kMinPolicyPriority..kMaxPolicyPriority); otherwise "priority
/// 2000 is out of range -1000..1000".
absl::Status CheckPriority(int64_t priority);

/// A chip name from the chip table; otherwise "unknown chip 'x' (known chips: a, b, ...)".
absl::Status CheckChipName(std::string_view chip);

/// A chip family name ("rtw89", "rtw88", "mt76", common/chips/family.h); otherwise
/// InvalidArgument "unknown chip family 'x' (expected rtw89, rtw88 or mt76)".
absl::Status CheckFamilyName(std::string_view family);

/// A USB speed a selector may name: anything but UsbSpeed::kUnknown.
absl::Status CheckSelectableUsbSpeed(UsbSpeed speed);

/// The register layouts an adapter matched by `selector` can have. Chips narrow it (unknown
/// chips contribute nothing); without chips, vid:pids narrow it when every one is in the chip
/// table; otherwise all of v1, v2 and v3.
std::set<RxAggLayout> PossibleLayouts(const Selector& selector);

/// ValidateRxAggSettings (its message unchanged), then ValidateRxAggSettingsForLayout for every
/// layout of PossibleLayouts(selector): "<message>; the selector can match v1 chips (narrow
/// spec.selector.chips to avoid them)". Does not require any field to be set.
absl::Status CheckSettingsForSelector(const RxAggSettings& settings, const Selector& selector);

// ---------------------------------------------------------------------------------------------
// Emitting.

/// `key: [a, b]` as a flow list; `quoted` double-quotes every item. Emits `key: []` when empty.
void EmitStringList(YAML::Emitter& out, std::string_view key, const std::vector<std::string>& items,
                    bool quoted);

/// `key: {k: "v", ...}` as a block map with double-quoted values. Emits `key: {}` when empty.
void EmitLabels(YAML::Emitter& out, std::string_view key,
                const std::map<std::string, std::string>& labels);

/// `selector:` with its non-empty terms (matchLabels, usbSpeeds, chips, vidPids "vvvv:pppp",
/// adapters), in that order; nothing when the selector is empty.
void EmitSelector(YAML::Emitter& out, const Selector& selector);

/// The set fields of `settings` as keys of the map being emitted: hold ("1024us"),
/// countThreshold, bufferKiB, enable, and forceEnable (only when true).
void EmitSettingsFields(YAML::Emitter& out, const RxAggSettings& settings);

/// `probe:` with every field of `probe` (server "host:port", protocol, direction,
/// parallelStreams, duration and interval as "10s", udpRate in bit/s for UDP probes), so a
/// document states the defaults it runs with.
void EmitProbe(YAML::Emitter& out, const ProbeSpec& probe);

// ---------------------------------------------------------------------------------------------
// Reading.

/// How ReadSelector checks list items.
enum class SelectorItemChecks {
  /// Parse and check every item while reading (speed not unknown, chip known, adapter id
  /// valid; label keys and values valid); errors name the list ("spec.selector.chips").
  kWhileReading,
  /// Only parse usbSpeeds and vidPids; errors name the item ("spec.selector.usbSpeeds[1]").
  /// The caller checks the rest afterwards.
  kParseOnly,
};

/// How ReadSettings words and checks ranges.
struct SettingsReadOptions {
  /// holdUs out of 0..8160: true reads "hold 9000us is out of range 0..8160us" (the wording of
  /// `hold`), false reads "holdUs 9000 is out of range 0..8160".
  bool hold_us_range_in_us = true;
  /// Check bufferKiB against 1..20 while reading ("bufferKiB 0 is out of range 1..20 (the
  /// driver's RX buffer is 20 KiB)"); false leaves it to later validation.
  bool check_buffer_range = true;
};

/// The `metadata` block every document kind has.
struct DocumentMetadata {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string resource_version;  ///< opaque, set by the server; empty when absent
};

/// Strict reader of one YAML source. Every error is InvalidArgument and reads
/// "<source>:<line>:<column>: <path>: <message>" (1-based line and column; "<source>" alone
/// when the node has no position), where <path> is the field path such as
/// "spec.selector.chips[2]" or "document". Every field and list item read is recorded under
/// its path, so rules checked after reading can point at the value (NodeFor).
class DocumentReader {
 public:
  /// Fields of a map: name -> (key node, value node).
  using FieldMap = std::map<std::string, std::pair<YAML::Node, YAML::Node>>;

  /// `source` prefixes every message; it must outlive the reader.
  explicit DocumentReader(absl::string_view source) : source_(source) {}

  absl::string_view source() const { return source_; }

  /// "source:line:column", or "source" for a null mark.
  std::string Where(const YAML::Mark& mark) const;

  /// "source:line" of the first line of `doc`, or "source" without a position.
  std::string SourceLine(const YAML::Node& doc) const;

  /// InvalidArgument "<Where(node)>: <path>: <message>".
  absl::Status Error(const YAML::Node& node, absl::string_view path,
                     absl::string_view message) const;

  /// "null", "a scalar", "a list", "a map" or "undefined".
  static absl::string_view TypeName(const YAML::Node& node);

  /// A scalar in single quotes ("'abc'"), otherwise TypeName.
  static std::string Found(const YAML::Node& node);

  /// Forgets the recorded positions and records `doc` as "document".
  void StartDocument(const YAML::Node& doc);

  /// The node recorded for `field` or its closest recorded parent ("a.b[1]" -> "a.b" -> "a"),
  /// else the document.
  YAML::Node NodeFor(std::string field) const;

  /// Splits `text` into YAML documents (empty ones included). InvalidArgument:
  ///  - "<source>: <n> bytes exceeds the 1 MiB <what> input limit" when `text` is over
  ///    `max_bytes` (callers pass 1 MiB);
  ///  - "<source>:<line>:<column>: malformed YAML: <parser message>";
  ///  - "<source>: <n> documents exceed the limit of <max_documents>".
  /// `what` names the kind in messages ("policy", "experiment").
  absl::StatusOr<std::vector<YAML::Node>> LoadDocuments(absl::string_view text,
                                                        absl::string_view what, size_t max_bytes,
                                                        size_t max_documents) const;

  /// Reads every non-null document of `docs` with `read_one` (YAML::Node ->
  /// absl::StatusOr<Document>; Document has `name` and `source`), in order, stopping at the
  /// first error. Two documents with the same name are "duplicate <what> name 'x' (first
  /// defined at <source>)" at the second's metadata.name; a yaml-cpp exception becomes
  /// "<where>: invalid <what> document: <message>".
  template <typename Document, typename ReadOne>
  absl::StatusOr<std::vector<Document>> ReadNamedDocuments(const std::vector<YAML::Node>& docs,
                                                           absl::string_view what,
                                                           ReadOne read_one) {
    std::vector<Document> out;
    std::map<std::string, std::string> first_seen;  // name -> source
    try {
      for (const YAML::Node& doc : docs) {
        if (doc.IsNull()) continue;
        absl::StatusOr<Document> document = read_one(doc);
        if (!document.ok()) return document.status();
        auto [it, inserted] = first_seen.emplace(document->name, document->source);
        if (!inserted) {
          return Error(NodeFor("metadata.name"), "metadata.name",
                       absl::StrCat("duplicate ", what, " name '", document->name,
                                    "' (first defined at ", it->second, ")"));
        }
        out.push_back(*std::move(document));
      }
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(e.mark), ": invalid ", what, " document: ", e.msg));
    }
    return out;
  }

  /// Starts a document (StartDocument), checks its identity (CheckIdentity), and reads its top
  /// level: a map of exactly apiVersion, kind, metadata and spec, all required (path
  /// "document").
  absl::Status ReadTopLevel(const YAML::Node& doc, std::string_view api_version,
                            std::string_view kind, FieldMap* fields);

  /// Reads `metadata`: name (required string), labels (ReadLabels with `validate_labels`),
  /// resourceVersion (string). `check_name`, when not null, is applied to the name as soon as
  /// it is read; its message is reported at metadata.name.
  absl::Status ReadMetadata(const YAML::Node& node, absl::Status (*check_name)(std::string_view),
                            bool validate_labels, DocumentMetadata* metadata);

  /// Checks apiVersion and kind (when present, before any other field) against the expected
  /// values: "unsupported kind 'X' (expected 'Y')". Non-maps pass (ReadMap reports them).
  absl::Status CheckIdentity(const YAML::Node& doc, std::string_view api_version,
                             std::string_view kind) const;

  /// Checks that `node` is a map whose keys are unique scalars from `allowed` ("must be a map,
  /// found a list", "unknown field 'x' (allowed: a, b)", "duplicate field 'x'") and fills
  /// `fields`. Records "<path>.<name>" (just "<name>" when path is "document").
  absl::Status ReadMap(const YAML::Node& node, absl::string_view path,
                       std::initializer_list<absl::string_view> allowed, FieldMap* fields);

  /// "missing required field 'x'" at `node` for the first of `required` not in `fields`.
  absl::Status RequireFields(const YAML::Node& node, absl::string_view path,
                             std::initializer_list<absl::string_view> required,
                             const FieldMap& fields) const;

  /// A scalar as text; "must be a string, found a map" otherwise.
  absl::StatusOr<std::string> ReadString(const YAML::Node& node, absl::string_view path) const;

  /// A decimal int64; "must be an integer, found 'x'" otherwise.
  absl::StatusOr<int64_t> ReadInt(const YAML::Node& node, absl::string_view path) const;

  /// ReadInt within [low, high]; "<name> <value> is out of range <low>..<high>" otherwise.
  absl::StatusOr<uint32_t> ReadCount(const YAML::Node& node, absl::string_view path,
                                     absl::string_view name, int64_t low, int64_t high) const;

  /// true or false in any case; "must be true or false, found 'x'" otherwise.
  absl::StatusOr<bool> ReadBool(const YAML::Node& node, absl::string_view path) const;

  /// A list (null means empty); records "<path>[i]" for every item.
  absl::StatusOr<std::vector<YAML::Node>> ReadList(const YAML::Node& node, absl::string_view path);

  /// A list of scalars (null means empty): (item node, text) pairs.
  absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> ReadStringList(
      const YAML::Node& node, absl::string_view path);

  /// A map of label key -> value (null means empty; a null value is ""). With `validate`, keys
  /// and values are checked with ValidateLabelKey/ValidateLabelValue. Records "<path>.<key>".
  absl::StatusOr<std::map<std::string, std::string>> ReadLabels(const YAML::Node& node,
                                                                absl::string_view path,
                                                                bool validate);

  /// `spec.selector` (null means empty): matchLabels, usbSpeeds (low, full, high, super,
  /// super_plus), chips, vidPids ("0bda:8912"), adapters.
  absl::Status ReadSelector(const YAML::Node& node, SelectorItemChecks checks, Selector* selector);

  /// A settings map at `path`: hold ("1024us", multiple of 32, 0..8160 µs) or holdUs (integer,
  /// not both), countThreshold (0..255), bufferKiB (ParseKiB), enable, forceEnable (booleans).
  /// Cross-field rules are the caller's.
  absl::Status ReadSettings(const YAML::Node& node, absl::string_view path,
                            const SettingsReadOptions& options, RxAggSettings* settings);

  /// A probe map at `path` (common/probe/probe_spec.h): server (required, ParseProbeServer),
  /// protocol (tcp|udp), direction (reverse|forward), parallelStreams (1..16), duration and
  /// interval (durations such as "10s", "1h"), udpRate (ParseBitRate, "50Mbit/s"). Unset
  /// fields keep the ProbeSpec defaults; ValidateProbeSpec runs at the end and its message is
  /// reported at the field it names ("<path>.udpRate: ...") or at `path`.
  absl::Status ReadProbe(const YAML::Node& node, absl::string_view path, ProbeSpec* probe);

 private:
  void Remember(const std::string& path, const YAML::Node& node) { positions_[path] = node; }

  absl::string_view source_;
  std::map<std::string, YAML::Node> positions_;
};

}  // namespace rxfleet::common
