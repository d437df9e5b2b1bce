#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "common/chips/rx_agg.h"
#include "common/policy/policy.h"
#include "common/policy/selectors.h"
#include "common/usb_speed.h"

namespace rxfleet::common {

/// Where a policy came from. Used as the tie-breaker between equal priorities:
/// kExperiment > kServerPolicy > kLocalFile. kBuiltinDefault is always lowest.
enum class PolicySource : uint8_t { kBuiltinDefault, kLocalFile, kServerPolicy, kExperiment };

/// "builtin-default", "local-file", "server", "experiment" (for metrics labels and tables).
std::string_view PolicySourceName(PolicySource source);

/// Policy labels that name an experiment arm. A policy in a kExperiment layer that carries
/// both is reported as "experiment NAME arm ARM"; otherwise by its name.
inline constexpr std::string_view kExperimentLabel = "rxfleet.io/experiment";
inline constexpr std::string_view kExperimentArmLabel = "rxfleet.io/arm";

/// Which policy decided a field.
struct Provenance {
  PolicySource source = PolicySource::kBuiltinDefault;
  /// Policy name, "builtin-default", or "experiment NAME arm ARM".
  std::string name;

  /// "builtin-default", "local policy NAME", "server policy NAME", "experiment NAME arm ARM".
  std::string ToString() const;
  friend bool operator==(const Provenance&, const Provenance&) = default;
};

template <typename T>
struct Resolved {
  T value;
  Provenance provenance;
  friend bool operator==(const Resolved&, const Resolved&) = default;
};

/// The desired RX aggregation settings of one adapter, each field with its provenance.
/// Unset fields are left as the driver set them.
struct ResolvedSettings {
  std::optional<Resolved<uint32_t>> hold_us, count_threshold, buffer_kib;
  std::optional<Resolved<bool>> enable;
  /// The force_enable of the policy that decided `enable`.
  bool force_enable = false;

  RxAggSettings ToSettings() const;
  friend bool operator==(const ResolvedSettings&, const ResolvedSettings&) = default;
};

/// A set of policies from one source. `policies` must outlive the Resolve call.
struct PolicyLayer {
  PolicySource source;
  const std::vector<Policy>* policies;
};

/// Resolves the settings of one adapter, per field: among the policies that match the adapter
/// (Matches) and set the field, the highest spec.priority wins; ties go to the source
/// (experiment > server > local file), then to the lexicographically smallest name.
/// BuiltinDefaultPolicy(adapter.usb_speed) always applies below every layer whatever the
/// priorities, so the hold is always resolved. Null `policies` pointers are skipped; a layer
/// with source kBuiltinDefault ranks below all other layers.
ResolvedSettings Resolve(const AdapterAttributes& adapter, absl::Span<const PolicyLayer> layers);

/// The active probe of one adapter (PolicySpec.probe): of the policies in `layers` that match
/// the adapter and set a probe, the one that wins by the order of a settings field (priority,
/// then source experiment > server > local file, then the smaller name) decides the whole
/// probe. nullopt when no matching policy sets one. The built-in default sets no probe;
/// experiment probes come with assignments, not through here.
std::optional<Resolved<ProbeSpec>> ResolveProbe(const AdapterAttributes& adapter,
                                                absl::Span<const PolicyLayer> layers);

/// The built-in default, "builtin-default": sets only the hold, by USB speed, from the seed
/// measurements (RTL8922AU, rtw89 usb.c patch "short hold on USB 3 only"):
///  - SuperSpeed and SuperSpeed+ -> 32 µs (1 unit; reg 0x6000 = 0x80FF0114 on v3);
///  - high-speed, full-speed, low-speed and unknown -> 1024 µs (32 units, the driver default),
///    because a short hold on a slow host over USB 2 loses throughput and frames.
/// SuperSpeed+ is treated as USB 3 here, unlike the kernel patch, which tests
/// `speed == USB_SPEED_SUPER` and so gives SuperSpeed+ the long hold.
/// The selector lists the speed (empty for kUnknown); priority is 0.
Policy BuiltinDefaultPolicy(UsbSpeed usb_speed);

}  // namespace rxfleet::common
