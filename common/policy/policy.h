#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chips/chip_table.h"
#include "common/chips/rx_agg.h"
#include "common/probe/probe_spec.h"
#include "common/usb_speed.h"

namespace rxfleet::common {

/// Document identity of an RX aggregation policy.
inline constexpr std::string_view kPolicyApiVersion = "rxfleet/v1";
inline constexpr std::string_view kPolicyKind = "RxAggPolicy";

/// Limits of ParsePolicyDocuments.
inline constexpr size_t kMaxPolicyInputBytes = 1 << 20;  // 1 MiB per input text/file
inline constexpr size_t kMaxPolicyDocuments = 1000;      // per input text/file
inline constexpr int kMinPolicyPriority = -1000;
inline constexpr int kMaxPolicyPriority = 1000;

/// Name of the built-in default policy (see resolver.h); reserved, user policies cannot use it.
inline constexpr std::string_view kBuiltinDefaultPolicyName = "builtin-default";

/// Which adapters a policy applies to. Every non-empty term must match (AND); within a list
/// any entry may match (OR). An empty selector selects every adapter.
struct Selector {
  std::map<std::string, std::string> match_labels;  ///< host labels, all must be equal
  std::vector<UsbSpeed> usb_speeds;                 ///< never kUnknown
  std::vector<std::string> chips;                   ///< names from the chip table
  std::vector<VidPid> vid_pids;
  std::vector<std::string> adapters;  ///< adapter ids
  std::vector<std::string> families;  ///< chip families "rtw89", "rtw88", "mt76"

  bool Empty() const {
    return match_labels.empty() && usb_speeds.empty() && chips.empty() && vid_pids.empty() &&
           adapters.empty() && families.empty();
  }
  friend bool operator==(const Selector&, const Selector&) = default;
};

/// One RX aggregation policy (a validated value: inner code trusts it).
///
/// Document shape (YAML or JSON; several YAML documents separated by `---`):
///   apiVersion: rxfleet/v1
///   kind: RxAggPolicy
///   metadata:
///     name: pi1-long-hold        # [a-z0-9-], 1..63, starts/ends alphanumeric
///     labels: {team: edge}       # optional, label syntax of host_labels.h
///     resourceVersion: "7"       # optional, set by the server
///   spec:
///     priority: 100              # optional, -1000..1000, default 0; higher wins
///     selector:                  # optional; all given terms must match
///       matchLabels: {board: pi1}
///       usbSpeeds: [high]        # low, full, high, super, super_plus
///       chips: [rtl8922au]
///       vidPids: ["0bda:8912"]
///       adapters: []
///     settings:                  # at least one field; optional when `probe` is set
///       hold: 1024us             # or holdUs: 1024 (not both); multiple of 32, 0..8160 µs
///       countThreshold: 255      # 0..255
///       bufferKiB: 20            # 1..20; multiple of 4 if the selector can match a v1 chip
///       enable: true
///       forceEnable: true        # only with enable: true
///     probe:                     # optional, opt-in active iperf3 probe (probe_spec.h ranges)
///       server: iperf.lab:5201   # required; host or host:port (IPv4 address or name)
///       protocol: tcp            # tcp (default) or udp
///       direction: reverse       # reverse (default, download) or forward (upload)
///       parallelStreams: 1       # 1..16
///       duration: 10s            # whole seconds, 1s..60s
///       udpRate: 50Mbit/s        # UDP only, required there; bit/s, kbit/s, Mbit/s, Gbit/s
///       interval: 1h             # 1m..168h, between two runs on one adapter
struct Policy {
  std::string name;
  std::map<std::string, std::string> labels;
  int priority = 0;
  Selector selector;
  RxAggSettings settings;
  /// The active probe of the matched adapters, decided whole by the highest-precedence policy
  /// that sets one (ResolveProbe in resolver.h); unset = no probe from this policy.
  std::optional<ProbeSpec> probe;
  /// Where the policy came from, for messages: "file.yaml:3" (first line of its document) or
  /// "server". Not part of the document.
  std::string source;
  /// Opaque version assigned by the server's store (metadata.resourceVersion); empty locally.
  std::string resource_version;

  friend bool operator==(const Policy&, const Policy&) = default;
};

/// Parses one or many policy documents (YAML, or JSON which is parsed as YAML).
/// `source_name` prefixes every message and Policy::source ("policies/pi.yaml").
/// Strict; returns InvalidArgument with "source:line:column: " for:
///  - malformed YAML (the parser's position), input over 1 MiB, more than 1000 documents;
///  - unknown or duplicate fields (named), wrong types, apiVersion other than rxfleet/v1 or
///    kind other than RxAggPolicy (the found value is named);
///  - any ValidatePolicy failure, and two documents with the same metadata.name.
/// Empty documents (e.g. a trailing `---`) are skipped; empty input yields an empty vector.
absl::StatusOr<std::vector<Policy>> ParsePolicyDocuments(std::string_view text,
                                                         std::string_view source_name);

/// Validates a policy built from data (e.g. received from the server) with the same rules as
/// the parser: name syntax and not "builtin-default", labels, priority range, selector terms
/// (chips known, speeds not unknown, adapter ids non-empty), settings (ValidateRxAggSettings,
/// at least one field set unless the policy has a probe, and the v1 4 KiB buffer rule for
/// every layout the selector can match), the probe (ValidateProbeSpec, "spec.probe: ..."). Returns
/// InvalidArgument naming the policy and the field.
absl::Status ValidatePolicy(const Policy& policy);

/// Loads policies from files and directories. A directory contributes its *.yaml and *.yml
/// files (not recursive, hidden files skipped) in sorted order; a file is read whatever its
/// suffix. A missing directory (a missing path without a .yaml/.yml/.json suffix) contributes
/// nothing; a missing file is NotFound. Duplicate names across files are InvalidArgument.
/// Any error fails the whole load, so the caller keeps its previous set.
absl::StatusOr<std::vector<Policy>> LoadPolicyFiles(const std::vector<std::string>& paths_or_dirs);

/// Serialises a policy as one YAML document (without `---`), omitting unset/empty fields.
/// ParsePolicyDocuments(PolicyToYaml(p)) yields p again (except `source`).
std::string PolicyToYaml(const Policy& policy);

}  // namespace rxfleet::common
