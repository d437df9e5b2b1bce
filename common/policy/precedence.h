#pragma once

// The precedence of policy layers, in one place for the agent and the server: the experiment
// layer (arms in effect on an adapter), server policies, the local policy file and the
// built-in default, composed per settings field by common::Resolve (resolver.h: highest
// priority first, ties to the higher layer experiment > server > local file, then to the
// smaller name; the built-in default always last), with the origin of every decided field.
//
// The agent resolves all four layers (agent/reconcile/policy_set.h). The server knows no local
// files, so it predicts with the experiment layer, its policies and the built-in default
// (server/api/explain.h); what a local file changes shows in what agents report.
//
// Pure functions over values; no I/O, no clock.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/chips/rx_agg.h"
#include "common/policy/policy.h"
#include "common/policy/resolver.h"
#include "common/policy/selectors.h"

namespace rxfleet::common {

/// The settings fields precedence decides, in the names provenance maps use.
inline constexpr std::array<std::string_view, 4> kSettingsFields = {"hold_us", "count_threshold",
                                                                    "buffer_kib", "enable"};

/// Whether `settings` sets `field` (one of kSettingsFields; false for any other name).
bool SetsField(const RxAggSettings& settings, std::string_view field);

/// An experiment arm in effect on one adapter: one entry of the experiment layer.
struct ArmInEffect {
  /// Experiment name ([a-z0-9-], 1..63) and arm name.
  std::string experiment;
  std::string arm;
  /// The experiment's priority (ExperimentSpec.priority), -1000..1000.
  int priority = 0;
  /// The arm's settings (valid per ValidateRxAggSettings, at least one field).
  RxAggSettings settings;

  friend bool operator==(const ArmInEffect&, const ArmInEffect&) = default;
};

/// The policy an arm becomes in the experiment layer: name = experiment, labels naming the
/// experiment and arm (kExperimentLabel / kExperimentArmLabel, so provenance reads "experiment
/// NAME arm ARM"), selector = the one adapter `adapter_id`, the arm's settings and priority.
Policy ArmPolicy(const ArmInEffect& arm, std::string_view adapter_id);

/// The layers resolved for one adapter. Null policy pointers are empty layers; the pointed-to
/// vectors must outlive the call.
struct PolicyLayers {
  const std::vector<Policy>* local = nullptr;   ///< the agent's local file
  const std::vector<Policy>* server = nullptr;  ///< server policies (a bundle or the store)
  /// Arms in effect on this adapter (at most one per experiment).
  std::vector<ArmInEffect> experiments;
  /// Bundle version carrying the server policies and arms (0 without a server); it only
  /// fills SettingOrigin::bundle_version.
  uint64_t bundle_version = 0;
};

/// Where one decided field came from, with what Provenance does not carry.
struct SettingOrigin {
  Provenance provenance;
  /// spec.priority of the deciding policy (0 for the built-in default).
  int priority = 0;
  /// Local file policies: "FILE:LINE" of the document (Policy::source); empty otherwise.
  std::string location;
  /// Server policies and experiments: PolicyLayers::bundle_version; 0 otherwise.
  uint64_t bundle_version = 0;
  /// Experiments: name and arm; empty otherwise.
  std::string experiment;
  std::string arm;

  friend bool operator==(const SettingOrigin&, const SettingOrigin&) = default;
};

/// An adapter's settings after precedence, with per-field origins.
struct LayeredSettings {
  ResolvedSettings resolved;
  /// Keyed by kSettingsFields names; only resolved fields have an entry.
  std::map<std::string, SettingOrigin> origins;

  RxAggSettings Settings() const { return resolved.ToSettings(); }
  friend bool operator==(const LayeredSettings&, const LayeredSettings&) = default;
};

/// Resolves `adapter` over `layers` (experiment layer: ArmPolicy of each arm), see the file
/// comment for the rules.
LayeredSettings ResolveLayers(const AdapterAttributes& adapter, const PolicyLayers& layers);

/// A field an experiment's arm sets on an adapter that another layer decides instead.
struct KeptField {
  std::string arm;
  std::string field;      ///< a kSettingsFields name
  SettingOrigin decided;  ///< who decides it (never the experiment)
};

/// The fields that keep an experiment from an adapter: for each of `arms` (every arm of one
/// experiment, each with the experiment's name and priority) alone in the experiment layer over
/// `layers` (whose own experiment layer is ignored), the fields the arm sets that a policy
/// decides. Empty = every arm would take effect, the adapter is eligible. A policy keeps a
/// field when its priority is higher than the experiment's (ties go to the experiment layer).
std::vector<KeptField> FieldsKeptFromExperiment(const AdapterAttributes& adapter,
                                                const PolicyLayers& layers,
                                                const std::vector<ArmInEffect>& arms);

/// "server policy pin-long (priority 100) decides hold_us, count_threshold": the deciders of
/// `kept`, each once, in order of first appearance. Empty for an empty list.
std::string DescribeKeptFields(const std::vector<KeptField>& kept);

}  // namespace rxfleet::common
