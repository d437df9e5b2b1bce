#include "common/experiment/experiment.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/chips/chip_table.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "common/usb_speed.h"
#include "common/yaml_guard.h"

namespace rxfleet::experiments {
namespace {

using common::RxAggLayout;
using common::RxAggSettings;
using common::Selector;
using common::ToAbslView;
using common::ToStdView;
using common::UsbSpeed;

constexpr size_t kMaxNameLength = 63;
constexpr int kMinPriority = -1000;
constexpr int kMaxPriority = 1000;

// A rule broken by an experiment: the field path ("spec.arms[1].weight") and the message.
struct FieldError {
  std::string field;
  std::string message;
};

using CheckResult = std::optional<FieldError>;

// ---------------------------------------------------------------------------------------------
// Rules on values, shared by the parser (which adds positions) and ValidateExperiment.

std::optional<std::string> NameProblem(absl::string_view what, absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::StrCat(what, " '", name, "' must be 1..63 characters of [a-z0-9-]");
  }
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!(absl::ascii_islower(u) || absl::ascii_isdigit(u) || c == '-')) {
      return absl::StrCat(what, " '", name,
                          "' may contain only lower-case letters, digits and '-'");
    }
  }
  if (name.front() == '-' || name.back() == '-') {
    return absl::StrCat(what, " '", name, "' must start and end with a letter or digit");
  }
  return std::nullopt;
}

std::optional<std::string> ChipProblem(absl::string_view chip) {
  if (common::LayoutForChip(ToStdView(chip))) return std::nullopt;
  return absl::StrCat("unknown chip '", chip, "' (known chips: ",
                      absl::StrJoin(common::KnownChipNames(), ", ",
                                    [](std::string* out, std::string_view n) { out->append(n); }),
                      ")");
}

std::optional<std::string> AdapterIdProblem(absl::string_view id) {
  if (id.empty()) return "adapter id must not be empty";
  for (char c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "adapter id must not contain control characters";
    }
  }
  return std::nullopt;
}

bool IsBuiltinSegmentKey(absl::string_view key) {
  return key == ToAbslView(kSegmentUsbSpeed) || key == ToAbslView(kSegmentChip) ||
         key == ToAbslView(kSegmentHost);
}

// The register layouts an adapter matched by `selector` can have: chips narrow it; without
// chips, known vid:pids narrow it; otherwise any layout.
std::set<RxAggLayout> PossibleLayouts(const Selector& selector) {
  std::set<RxAggLayout> layouts;
  if (!selector.chips.empty()) {
    for (const std::string& chip : selector.chips) {
      if (std::optional<RxAggLayout> layout = common::LayoutForChip(chip)) layouts.insert(*layout);
    }
    return layouts;
  }
  if (!selector.vid_pids.empty()) {
    bool all_known = true;
    for (const common::VidPid& id : selector.vid_pids) {
      if (const common::ChipId* chip = common::LookupChip(id.vid, id.pid)) {
        layouts.insert(chip->layout);
      } else {
        all_known = false;
      }
    }
    if (all_known) return layouts;
  }
  return {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3};
}

std::optional<std::string> SettingsProblem(const RxAggSettings& settings,
                                           const Selector& selector) {
  if (settings.Empty()) {
    return "must set at least one of hold, holdUs, countThreshold, bufferKiB, enable";
  }
  if (settings.force_enable) {
    return "forceEnable is not allowed in experiment arms (it is for lab use on single "
           "adapters; use a policy)";
  }
  if (absl::Status s = common::ValidateRxAggSettings(settings); !s.ok()) {
    return std::string(s.message());
  }
  for (RxAggLayout layout : PossibleLayouts(selector)) {
    if (absl::Status s = common::ValidateRxAggSettingsForLayout(layout, settings); !s.ok()) {
      return absl::StrCat(s.message(), "; the selector can match ",
                          ToAbslView(common::RxAggLayoutName(layout)),
                          " chips (narrow spec.selector.chips to avoid them)");
    }
  }
  return std::nullopt;
}

std::string Dur(absl::Duration d) { return absl::FormatDuration(d); }

// Every rule of the document, in document order. The first broken rule is returned.
CheckResult CheckExperiment(const Experiment& e) {
  auto fail = [](std::string field, std::string message) -> CheckResult {
    return FieldError{std::move(field), std::move(message)};
  };
  if (auto p = NameProblem("name", e.name)) return fail("metadata.name", *p);
  for (const auto& [key, value] : e.labels) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
      return fail("metadata.labels", std::string(s.message()));
    }
    if (absl::Status s = common::ValidateLabelValue(value); !s.ok()) {
      return fail(absl::StrCat("metadata.labels.", key), std::string(s.message()));
    }
  }
  const Selector& selector = e.selector;
  for (const auto& [key, value] : selector.match_labels) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
      return fail("spec.selector.matchLabels", std::string(s.message()));
    }
    if (absl::Status s = common::ValidateLabelValue(value); !s.ok()) {
      return fail(absl::StrCat("spec.selector.matchLabels.", key), std::string(s.message()));
    }
  }
  for (size_t i = 0; i < selector.usb_speeds.size(); ++i) {
    if (selector.usb_speeds[i] == UsbSpeed::kUnknown) {
      return fail(absl::StrCat("spec.selector.usbSpeeds[", i, "]"),
                  "USB speed 'unknown' cannot be selected (expected low, full, high, super, "
                  "super_plus)");
    }
  }
  for (size_t i = 0; i < selector.chips.size(); ++i) {
    if (auto p = ChipProblem(selector.chips[i])) {
      return fail(absl::StrCat("spec.selector.chips[", i, "]"), *p);
    }
  }
  for (size_t i = 0; i < selector.adapters.size(); ++i) {
    if (auto p = AdapterIdProblem(selector.adapters[i])) {
      return fail(absl::StrCat("spec.selector.adapters[", i, "]"), *p);
    }
  }

  if (e.arms.size() < 2) {
    return fail(
        "spec.arms",
        absl::StrCat("needs at least 2 arms (a control and a treatment), found ", e.arms.size()));
  }
  if (e.arms.size() > kMaxArms) {
    return fail("spec.arms", absl::StrCat("has ", e.arms.size(), " arms; at most 16 are allowed"));
  }
  std::map<std::string, size_t> arm_names;
  for (size_t i = 0; i < e.arms.size(); ++i) {
    const Arm& arm = e.arms[i];
    const std::string path = absl::StrCat("spec.arms[", i, "]");
    if (auto p = NameProblem("arm name", arm.name)) return fail(absl::StrCat(path, ".name"), *p);
    if (auto [it, inserted] = arm_names.emplace(arm.name, i); !inserted) {
      return fail(
          absl::StrCat(path, ".name"),
          absl::StrCat("duplicate arm name '", arm.name, "' (also spec.arms[", it->second, "])"));
    }
    if (arm.weight < 1 || arm.weight > kMaxArmWeight) {
      return fail(absl::StrCat(path, ".weight"),
                  absl::StrCat("weight ", arm.weight, " is out of range 1..100"));
    }
    if (auto p = SettingsProblem(arm.settings, selector)) {
      return fail(absl::StrCat(path, ".settings"), *p);
    }
  }
  if (!arm_names.contains(e.control_arm)) {
    return fail(
        "spec.control",
        absl::StrCat("control arm '", e.control_arm, "' is not one of the arms (",
                     absl::StrJoin(e.arms, ", ",
                                   [](std::string* out, const Arm& a) { out->append(a.name); }),
                     ")"));
  }

  const absl::Duration zero = absl::ZeroDuration();
  if (e.duration <= zero || e.duration == absl::InfiniteDuration()) {
    return fail("spec.duration", absl::StrCat("duration ", Dur(e.duration), " must be positive"));
  }
  if (e.duration > kMaxExperimentDuration) {
    return fail("spec.duration",
                absl::StrCat("duration ", Dur(e.duration), " exceeds the limit of 90 days"));
  }
  if (e.window_length < kMinWindowLength || e.window_length > kMaxWindowLength ||
      e.window_length % absl::Seconds(1) != zero) {
    return fail("spec.windowLength", absl::StrCat("windowLength ", Dur(e.window_length),
                                                  " must be whole seconds in 1s..1h"));
  }
  if (e.window_length > e.duration) {
    return fail("spec.windowLength", absl::StrCat("windowLength ", Dur(e.window_length),
                                                  " is longer than duration ", Dur(e.duration)));
  }
  if (e.burn_in < zero || e.burn_in == absl::InfiniteDuration()) {
    return fail("spec.burnIn", absl::StrCat("burnIn ", Dur(e.burn_in), " must not be negative"));
  }
  if (e.design == Design::kSwitchback) {
    if (e.period_length == zero) {
      return fail("spec.periodLength", "is required for the switchback design");
    }
    if (e.period_length < e.window_length || e.period_length == absl::InfiniteDuration()) {
      return fail("spec.periodLength",
                  absl::StrCat("periodLength ", Dur(e.period_length),
                               " must be at least windowLength ", Dur(e.window_length)));
    }
    if (e.period_length % e.window_length != zero) {
      return fail("spec.periodLength",
                  absl::StrCat("periodLength ", Dur(e.period_length),
                               " must be a multiple of windowLength ", Dur(e.window_length),
                               " so windows do not straddle a switch"));
    }
    if (e.burn_in + e.window_length > e.period_length) {
      return fail("spec.burnIn",
                  absl::StrCat("burnIn ", Dur(e.burn_in), " leaves no full window of ",
                               Dur(e.window_length), " in a period of ", Dur(e.period_length)));
    }
    const absl::Duration block = e.period_length * static_cast<int64_t>(e.TotalWeight());
    if (e.duration < block) {
      return fail(
          "spec.duration",
          absl::StrCat("duration ", Dur(e.duration), " is shorter than one balanced block (",
                       e.TotalWeight(), " periods of ", Dur(e.period_length), " = ", Dur(block),
                       ", the sum of the arm weights); every adapter must "
                       "see every arm"));
    }
  } else {
    if (e.period_length != zero) {
      return fail("spec.periodLength", "applies to the switchback design only");
    }
    if (e.burn_in + e.window_length > e.duration) {
      return fail("spec.burnIn",
                  absl::StrCat("burnIn ", Dur(e.burn_in), " leaves no full window of ",
                               Dur(e.window_length), " in duration ", Dur(e.duration)));
    }
  }

  for (size_t i = 0; i < e.secondary_metrics.size(); ++i) {
    const Metric m = e.secondary_metrics[i];
    const std::string path = absl::StrCat("spec.secondaryMetrics[", i, "]");
    if (m == e.primary_metric) {
      return fail(path, absl::StrCat("'", ToAbslView(MetricName(m)), "' is the primary metric"));
    }
    if (std::find(e.secondary_metrics.begin(), e.secondary_metrics.begin() + i, m) !=
        e.secondary_metrics.begin() + i) {
      return fail(path, absl::StrCat("duplicate metric '", ToAbslView(MetricName(m)), "'"));
    }
  }

  if (e.guardrails.size() > kMaxGuardrails) {
    return fail("spec.guardrails",
                absl::StrCat("has ", e.guardrails.size(), " guardrails; at most 32 are allowed"));
  }
  for (size_t i = 0; i < e.guardrails.size(); ++i) {
    const Guardrail& g = e.guardrails[i];
    const std::string path = absl::StrCat("spec.guardrails[", i, "]");
    const bool ratio = UnitOf(g.metric) == MetricUnit::kRatio;
    if (!std::isfinite(g.threshold) || g.threshold < 0 || (ratio && g.threshold > 1)) {
      return fail(absl::StrCat(path, ".threshold"),
                  absl::StrCat("threshold ", g.threshold, " of ", ToAbslView(MetricName(g.metric)),
                               ratio ? " must lie in [0, 1]" : " must be finite and >= 0"));
    }
    if (g.min_adapters && (*g.min_adapters < 2 || *g.min_adapters > kMaxMinAdaptersPerArm)) {
      return fail(absl::StrCat(path, ".minAdapters"),
                  absl::StrCat("minAdapters ", *g.min_adapters,
                               " is out of range 2..100000 (a bound needs 2 adapters)"));
    }
    if (g.min_windows && (*g.min_windows < 1 || *g.min_windows > kMaxMinWindowsPerArm)) {
      return fail(absl::StrCat(path, ".minWindows"),
                  absl::StrCat("minWindows ", *g.min_windows, " is out of range 1..10000000"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (e.guardrails[j].metric == g.metric && e.guardrails[j].op == g.op) {
        return fail(path, absl::StrCat("duplicate guardrail ", ToAbslView(MetricName(g.metric)),
                                       " ", ToAbslView(GuardrailOpSymbol(g.op)),
                                       " (also spec.guardrails[", j, "])"));
      }
    }
  }

  if (e.segment_keys.size() > kMaxSegmentKeys) {
    return fail("spec.segments",
                absl::StrCat("has ", e.segment_keys.size(), " keys; at most 4 are allowed"));
  }
  for (size_t i = 0; i < e.segment_keys.size(); ++i) {
    const std::string& key = e.segment_keys[i];
    const std::string path = absl::StrCat("spec.segments[", i, "]");
    if (!IsBuiltinSegmentKey(key)) {
      if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
        return fail(path, absl::StrCat(s.message(),
                                       " (segments are usb_speed, chip, host or a "
                                       "host label key)"));
      }
    }
    if (std::find(e.segment_keys.begin(), e.segment_keys.begin() + i, key) !=
        e.segment_keys.begin() + i) {
      return fail(path, absl::StrCat("duplicate segment key '", key, "'"));
    }
  }
  if (e.min_adapters_per_arm < 2 || e.min_adapters_per_arm > kMaxMinAdaptersPerArm) {
    return fail("spec.minAdaptersPerArm",
                absl::StrCat("minAdaptersPerArm ", e.min_adapters_per_arm,
                             " is out of range 2..100000 (a confidence interval needs 2)"));
  }
  if (e.min_windows_per_arm < 1 || e.min_windows_per_arm > kMaxMinWindowsPerArm) {
    return fail("spec.minWindowsPerArm", absl::StrCat("minWindowsPerArm ", e.min_windows_per_arm,
                                                      " is out of range 1..10000000"));
  }
  if (e.priority < kMinPriority || e.priority > kMaxPriority) {
    return fail("spec.priority",
                absl::StrCat("priority ", e.priority, " is out of range -1000..1000"));
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// YAML reading with positions.

using FieldMap = std::map<std::string, std::pair<YAML::Node, YAML::Node>>;

class DocumentReader {
 public:
  explicit DocumentReader(absl::string_view source) : source_(source) {}

  std::string Where(const YAML::Mark& mark) const {
    if (mark.is_null()) return std::string(source_);
    return absl::StrCat(source_, ":", mark.line + 1, ":", mark.column + 1);
  }

  absl::Status Error(const YAML::Node& node, absl::string_view path,
                     absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(node.Mark()), ": ", path, ": ", message));
  }

  // Reads one document. `positions` receives the node of every field path read, so rules
  // checked afterwards can point at the offending value.
  absl::StatusOr<Experiment> ReadDocument(const YAML::Node& doc) {
    positions_.clear();
    positions_["document"] = doc;
    if (absl::Status s = CheckIdentity(doc); !s.ok()) return s;
    FieldMap f;
    if (absl::Status s = ReadMap(doc, "document", {"apiVersion", "kind", "metadata", "spec"}, &f);
        !s.ok()) {
      return s;
    }
    for (absl::string_view required : {"apiVersion", "kind", "metadata", "spec"}) {
      if (!f.contains(std::string(required))) {
        return Error(doc, "document", absl::StrCat("missing required field '", required, "'"));
      }
    }
    Experiment e;
    if (absl::Status s = ReadMetadata(f["metadata"].second, &e); !s.ok()) return s;
    if (absl::Status s = ReadSpec(f["spec"].second, &e); !s.ok()) return s;
    if (CheckResult problem = CheckExperiment(e)) {
      return Error(NodeFor(problem->field), problem->field, problem->message);
    }
    const YAML::Mark mark = doc.Mark();
    e.source = mark.is_null() ? std::string(source_) : absl::StrCat(source_, ":", mark.line + 1);
    return e;
  }

  // The node recorded for `field` or its closest recorded parent.
  YAML::Node NodeFor(std::string field) const {
    while (true) {
      if (auto it = positions_.find(field); it != positions_.end()) return it->second;
      const size_t cut = field.find_last_of(".[");
      if (cut == std::string::npos) break;
      field.resize(cut);
    }
    return positions_.at("document");
  }

 private:
  static absl::string_view TypeName(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Null:
        return "null";
      case YAML::NodeType::Scalar:
        return "a scalar";
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a map";
      case YAML::NodeType::Undefined:
        break;
    }
    return "undefined";
  }

  static std::string Found(const YAML::Node& node) {
    return node.IsScalar() ? absl::StrCat("'", node.Scalar(), "'") : std::string(TypeName(node));
  }

  void Remember(const std::string& path, const YAML::Node& node) { positions_[path] = node; }

  absl::Status ReadMap(const YAML::Node& node, absl::string_view path,
                       std::initializer_list<absl::string_view> allowed, FieldMap* fields) {
    if (!node.IsMap()) {
      return Error(node, path, absl::StrCat("must be a map, found ", TypeName(node)));
    }
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) return Error(key, path, "field names must be scalars");
      const std::string& name = key.Scalar();
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        return Error(key, path,
                     absl::StrCat("unknown field '", name,
                                  "' (allowed: ", absl::StrJoin(allowed, ", "), ")"));
      }
      if (!fields->emplace(name, std::make_pair(key, it->second)).second) {
        return Error(key, path, absl::StrCat("duplicate field '", name, "'"));
      }
      Remember(absl::StrCat(path == "document" ? "" : absl::StrCat(path, "."), name), it->second);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadString(const YAML::Node& node, absl::string_view path) {
    if (!node.IsScalar()) {
      return Error(node, path, absl::StrCat("must be a string, found ", TypeName(node)));
    }
    return node.Scalar();
  }

  absl::StatusOr<int64_t> ReadInt(const YAML::Node& node, absl::string_view path) {
    int64_t value = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &value)) {
      return Error(node, path, absl::StrCat("must be an integer, found ", Found(node)));
    }
    return value;
  }

  // An integer in [low, high], for fields stored as uint32_t.
  absl::StatusOr<uint32_t> ReadCount(const YAML::Node& node, absl::string_view path,
                                     absl::string_view name, int64_t low, int64_t high) {
    absl::StatusOr<int64_t> value = ReadInt(node, path);
    if (!value.ok()) return value.status();
    if (*value < low || *value > high) {
      return Error(node, path,
                   absl::StrCat(name, " ", *value, " is out of range ", low, "..", high));
    }
    return static_cast<uint32_t>(*value);
  }

  absl::StatusOr<bool> ReadBool(const YAML::Node& node, absl::string_view path) {
    if (node.IsScalar()) {
      const std::string lower = absl::AsciiStrToLower(node.Scalar());
      if (lower == "true") return true;
      if (lower == "false") return false;
    }
    return Error(node, path, absl::StrCat("must be true or false, found ", Found(node)));
  }

  absl::StatusOr<absl::Duration> ReadDuration(const YAML::Node& node, absl::string_view path) {
    absl::Duration d;
    if (!node.IsScalar() || !absl::ParseDuration(node.Scalar(), &d) ||
        d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
      return Error(
          node, path,
          absl::StrCat("must be a duration such as 90s, 5m, 24h or 1h30m, found ", Found(node)));
    }
    if (d < absl::ZeroDuration()) {
      return Error(node, path, absl::StrCat("duration ", node.Scalar(), " must not be negative"));
    }
    return d;
  }

  // A list; null means empty. Remembers "path[i]" for every item.
  absl::StatusOr<std::vector<YAML::Node>> ReadList(const YAML::Node& node, absl::string_view path) {
    std::vector<YAML::Node> items;
    if (node.IsNull()) return items;
    if (!node.IsSequence()) {
      return Error(node, path, absl::StrCat("must be a list, found ", TypeName(node)));
    }
    for (size_t i = 0; i < node.size(); ++i) {
      items.push_back(node[i]);
      Remember(absl::StrCat(path, "[", i, "]"), node[i]);
    }
    return items;
  }

  absl::StatusOr<std::vector<std::string>> ReadStringList(const YAML::Node& node,
                                                          absl::string_view path) {
    absl::StatusOr<std::vector<YAML::Node>> items = ReadList(node, path);
    if (!items.ok()) return items.status();
    std::vector<std::string> out;
    for (size_t i = 0; i < items->size(); ++i) {
      absl::StatusOr<std::string> value = ReadString((*items)[i], absl::StrCat(path, "[", i, "]"));
      if (!value.ok()) return value.status();
      out.push_back(*std::move(value));
    }
    return out;
  }

  // A map of label key -> value; null means empty. Syntax is checked by CheckExperiment.
  absl::StatusOr<std::map<std::string, std::string>> ReadLabels(const YAML::Node& node,
                                                                absl::string_view path) {
    std::map<std::string, std::string> labels;
    if (node.IsNull()) return labels;
    if (!node.IsMap()) {
      return Error(node, path, absl::StrCat("must be a map, found ", TypeName(node)));
    }
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) return Error(key, path, "label keys must be scalars");
      std::string value;
      const std::string field = absl::StrCat(path, ".", key.Scalar());
      if (!it->second.IsNull()) {
        absl::StatusOr<std::string> v = ReadString(it->second, field);
        if (!v.ok()) return v.status();
        value = *std::move(v);
      }
      if (!labels.emplace(key.Scalar(), value).second) {
        return Error(key, path, absl::StrCat("duplicate label '", key.Scalar(), "'"));
      }
      Remember(field, it->second);
    }
    return labels;
  }

  absl::Status CheckIdentity(const YAML::Node& doc) {
    if (!doc.IsMap()) return absl::OkStatus();  // ReadMap reports the shape.
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      const std::string& key = it->first.Scalar();
      if (key != "apiVersion" && key != "kind") continue;
      absl::StatusOr<std::string> value = ReadString(it->second, key);
      if (!value.ok()) return value.status();
      const absl::string_view expected =
          key == "apiVersion" ? ToAbslView(kExperimentApiVersion) : ToAbslView(kExperimentKind);
      if (*value != expected) {
        return Error(
            it->second, key,
            absl::StrCat("unsupported ", key, " '", *value, "' (expected '", expected, "')"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadMetadata(const YAML::Node& node, Experiment* e) {
    FieldMap f;
    if (absl::Status s = ReadMap(node, "metadata", {"name", "labels", "resourceVersion"}, &f);
        !s.ok()) {
      return s;
    }
    auto name = f.find("name");
    if (name == f.end()) return Error(node, "metadata", "missing required field 'name'");
    absl::StatusOr<std::string> text = ReadString(name->second.second, "metadata.name");
    if (!text.ok()) return text.status();
    e->name = *std::move(text);
    if (auto it = f.find("labels"); it != f.end()) {
      absl::StatusOr<std::map<std::string, std::string>> labels =
          ReadLabels(it->second.second, "metadata.labels");
      if (!labels.ok()) return labels.status();
      e->labels = *std::move(labels);
    }
    if (auto it = f.find("resourceVersion"); it != f.end()) {
      absl::StatusOr<std::string> version =
          ReadString(it->second.second, "metadata.resourceVersion");
      if (!version.ok()) return version.status();
      e->resource_version = *std::move(version);
    }
    return absl::OkStatus();
  }

  absl::Status ReadSelector(const YAML::Node& node, Selector* selector) {
    if (node.IsNull()) return absl::OkStatus();
    FieldMap f;
    if (absl::Status s = ReadMap(node, "spec.selector",
                                 {"matchLabels", "usbSpeeds", "chips", "vidPids", "adapters"}, &f);
        !s.ok()) {
      return s;
    }
    if (auto it = f.find("matchLabels"); it != f.end()) {
      absl::StatusOr<std::map<std::string, std::string>> labels =
          ReadLabels(it->second.second, "spec.selector.matchLabels");
      if (!labels.ok()) return labels.status();
      selector->match_labels = *std::move(labels);
    }
    if (auto it = f.find("usbSpeeds"); it != f.end()) {
      absl::StatusOr<std::vector<std::string>> items =
          ReadStringList(it->second.second, "spec.selector.usbSpeeds");
      if (!items.ok()) return items.status();
      for (size_t i = 0; i < items->size(); ++i) {
        absl::StatusOr<UsbSpeed> speed = common::ParseUsbSpeed((*items)[i]);
        if (!speed.ok()) {
          const std::string path = absl::StrCat("spec.selector.usbSpeeds[", i, "]");
          return Error(NodeFor(path), path, speed.status().message());
        }
        selector->usb_speeds.push_back(*speed);
      }
    }
    if (auto it = f.find("chips"); it != f.end()) {
      absl::StatusOr<std::vector<std::string>> items =
          ReadStringList(it->second.second, "spec.selector.chips");
      if (!items.ok()) return items.status();
      selector->chips = *std::move(items);
    }
    if (auto it = f.find("vidPids"); it != f.end()) {
      absl::StatusOr<std::vector<std::string>> items =
          ReadStringList(it->second.second, "spec.selector.vidPids");
      if (!items.ok()) return items.status();
      for (size_t i = 0; i < items->size(); ++i) {
        absl::StatusOr<common::VidPid> id = common::ParseVidPid((*items)[i]);
        if (!id.ok()) {
          const std::string path = absl::StrCat("spec.selector.vidPids[", i, "]");
          return Error(NodeFor(path), path, id.status().message());
        }
        selector->vid_pids.push_back(*id);
      }
    }
    if (auto it = f.find("adapters"); it != f.end()) {
      absl::StatusOr<std::vector<std::string>> items =
          ReadStringList(it->second.second, "spec.selector.adapters");
      if (!items.ok()) return items.status();
      selector->adapters = *std::move(items);
    }
    return absl::OkStatus();
  }

  absl::Status ReadSettings(const YAML::Node& node, const std::string& path,
                            RxAggSettings* settings) {
    FieldMap f;
    if (absl::Status s =
            ReadMap(node, path,
                    {"hold", "holdUs", "countThreshold", "bufferKiB", "enable", "forceEnable"}, &f);
        !s.ok()) {
      return s;
    }
    if (f.contains("hold") && f.contains("holdUs")) {
      return Error(f["holdUs"].first, path, "set either 'hold' or 'holdUs', not both");
    }
    if (auto it = f.find("hold"); it != f.end()) {
      const std::string field = absl::StrCat(path, ".hold");
      absl::StatusOr<std::string> text = ReadString(it->second.second, field);
      if (!text.ok()) return text.status();
      absl::StatusOr<uint32_t> hold = common::ParseHoldUs(*text);
      if (!hold.ok()) return Error(it->second.second, field, hold.status().message());
      settings->hold_us = *hold;
    }
    if (auto it = f.find("holdUs"); it != f.end()) {
      const std::string field = absl::StrCat(path, ".holdUs");
      absl::StatusOr<uint32_t> hold =
          ReadCount(it->second.second, field, "holdUs", 0, common::kMaxHoldUs);
      if (!hold.ok()) return hold.status();
      absl::StatusOr<uint32_t> checked = common::ParseHoldUs(absl::StrCat(*hold));
      if (!checked.ok()) return Error(it->second.second, field, checked.status().message());
      settings->hold_us = *checked;
    }
    if (auto it = f.find("countThreshold"); it != f.end()) {
      absl::StatusOr<uint32_t> count =
          ReadCount(it->second.second, absl::StrCat(path, ".countThreshold"), "countThreshold", 0,
                    common::kMaxRxAggCountThreshold);
      if (!count.ok()) return count.status();
      settings->count_threshold = *count;
    }
    if (auto it = f.find("bufferKiB"); it != f.end()) {
      const std::string field = absl::StrCat(path, ".bufferKiB");
      absl::StatusOr<std::string> text = ReadString(it->second.second, field);
      if (!text.ok()) return text.status();
      absl::StatusOr<uint32_t> kib = common::ParseKiB(*text);
      if (!kib.ok()) return Error(it->second.second, field, kib.status().message());
      settings->buffer_kib = *kib;
    }
    if (auto it = f.find("enable"); it != f.end()) {
      absl::StatusOr<bool> enable = ReadBool(it->second.second, absl::StrCat(path, ".enable"));
      if (!enable.ok()) return enable.status();
      settings->enable = *enable;
    }
    if (auto it = f.find("forceEnable"); it != f.end()) {
      absl::StatusOr<bool> force = ReadBool(it->second.second, absl::StrCat(path, ".forceEnable"));
      if (!force.ok()) return force.status();
      settings->force_enable = *force;
    }
    return absl::OkStatus();
  }

  absl::Status ReadArms(const YAML::Node& node, Experiment* e) {
    absl::StatusOr<std::vector<YAML::Node>> items = ReadList(node, "spec.arms");
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const std::string path = absl::StrCat("spec.arms[", i, "]");
      const YAML::Node& item = (*items)[i];
      FieldMap f;
      if (absl::Status s = ReadMap(item, path, {"name", "settings", "weight"}, &f); !s.ok()) {
        return s;
      }
      for (absl::string_view required : {"name", "settings"}) {
        if (!f.contains(std::string(required))) {
          return Error(item, path, absl::StrCat("missing required field '", required, "'"));
        }
      }
      Arm arm;
      absl::StatusOr<std::string> name = ReadString(f["name"].second, absl::StrCat(path, ".name"));
      if (!name.ok()) return name.status();
      arm.name = *std::move(name);
      if (absl::Status s =
              ReadSettings(f["settings"].second, absl::StrCat(path, ".settings"), &arm.settings);
          !s.ok()) {
        return s;
      }
      if (auto it = f.find("weight"); it != f.end()) {
        absl::StatusOr<uint32_t> weight =
            ReadCount(it->second.second, absl::StrCat(path, ".weight"), "weight", 1, kMaxArmWeight);
        if (!weight.ok()) return weight.status();
        arm.weight = *weight;
      }
      e->arms.push_back(std::move(arm));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Metric> ReadMetric(const YAML::Node& node, absl::string_view path) {
    absl::StatusOr<std::string> text = ReadString(node, path);
    if (!text.ok()) return text.status();
    absl::StatusOr<Metric> metric = ParseMetric(*text);
    if (!metric.ok()) return Error(node, path, metric.status().message());
    return *metric;
  }

  absl::Status ReadGuardrails(const YAML::Node& node, Experiment* e) {
    absl::StatusOr<std::vector<YAML::Node>> items = ReadList(node, "spec.guardrails");
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const std::string path = absl::StrCat("spec.guardrails[", i, "]");
      const YAML::Node& item = (*items)[i];
      FieldMap f;
      if (absl::Status s =
              ReadMap(item, path, {"metric", "op", "threshold", "minAdapters", "minWindows"}, &f);
          !s.ok()) {
        return s;
      }
      for (absl::string_view required : {"metric", "op", "threshold"}) {
        if (!f.contains(std::string(required))) {
          return Error(item, path, absl::StrCat("missing required field '", required, "'"));
        }
      }
      Guardrail g;
      absl::StatusOr<Metric> metric = ReadMetric(f["metric"].second, absl::StrCat(path, ".metric"));
      if (!metric.ok()) return metric.status();
      g.metric = *metric;
      const YAML::Node& op_node = f["op"].second;
      absl::StatusOr<std::string> op = ReadString(op_node, absl::StrCat(path, ".op"));
      if (!op.ok()) return op.status();
      if (*op == "<=") {
        g.op = GuardrailOp::kAtMost;
      } else if (*op == ">=") {
        g.op = GuardrailOp::kAtLeast;
      } else {
        return Error(op_node, absl::StrCat(path, ".op"),
                     absl::StrCat("unsupported op '", *op,
                                  "' (expected \"<=\" or \">=\": the condition the metric must "
                                  "keep)"));
      }
      const YAML::Node& threshold_node = f["threshold"].second;
      absl::StatusOr<std::string> threshold =
          ReadString(threshold_node, absl::StrCat(path, ".threshold"));
      if (!threshold.ok()) return threshold.status();
      absl::StatusOr<double> value = ParseMetricValue(g.metric, *threshold);
      if (!value.ok()) {
        return Error(threshold_node, absl::StrCat(path, ".threshold"), value.status().message());
      }
      g.threshold = *value;
      if (auto it = f.find("minAdapters"); it != f.end()) {
        absl::StatusOr<uint32_t> n =
            ReadCount(it->second.second, absl::StrCat(path, ".minAdapters"), "minAdapters", 2,
                      kMaxMinAdaptersPerArm);
        if (!n.ok()) return n.status();
        g.min_adapters = *n;
      }
      if (auto it = f.find("minWindows"); it != f.end()) {
        absl::StatusOr<uint32_t> n = ReadCount(it->second.second, absl::StrCat(path, ".minWindows"),
                                               "minWindows", 1, kMaxMinWindowsPerArm);
        if (!n.ok()) return n.status();
        g.min_windows = *n;
      }
      e->guardrails.push_back(g);
    }
    return absl::OkStatus();
  }

  absl::Status ReadSpec(const YAML::Node& node, Experiment* e) {
    FieldMap f;
    if (absl::Status s =
            ReadMap(node, "spec",
                    {"selector", "arms", "control", "design", "duration", "windowLength",
                     "periodLength", "burnIn", "primaryMetric", "secondaryMetrics", "guardrails",
                     "segments", "minAdaptersPerArm", "minWindowsPerArm", "priority", "seed"},
                    &f);
        !s.ok()) {
      return s;
    }
    for (absl::string_view required : {"arms", "design", "duration", "primaryMetric"}) {
      if (!f.contains(std::string(required))) {
        return Error(node, "spec", absl::StrCat("missing required field '", required, "'"));
      }
    }
    if (auto it = f.find("selector"); it != f.end()) {
      if (absl::Status s = ReadSelector(it->second.second, &e->selector); !s.ok()) return s;
    }
    if (absl::Status s = ReadArms(f["arms"].second, e); !s.ok()) return s;
    if (auto it = f.find("control"); it != f.end()) {
      absl::StatusOr<std::string> control = ReadString(it->second.second, "spec.control");
      if (!control.ok()) return control.status();
      e->control_arm = *std::move(control);
    } else if (!e->arms.empty()) {
      e->control_arm = e->arms.front().name;
    }
    const YAML::Node& design_node = f["design"].second;
    absl::StatusOr<std::string> design = ReadString(design_node, "spec.design");
    if (!design.ok()) return design.status();
    if (*design == "parallel") {
      e->design = Design::kParallel;
    } else if (*design == "switchback") {
      e->design = Design::kSwitchback;
    } else {
      return Error(
          design_node, "spec.design",
          absl::StrCat("unknown design '", *design, "' (expected parallel or switchback)"));
    }
    struct DurationField {
      absl::string_view name;
      absl::Duration* out;
    };
    for (const DurationField& d :
         {DurationField{"duration", &e->duration}, DurationField{"windowLength", &e->window_length},
          DurationField{"periodLength", &e->period_length}, DurationField{"burnIn", &e->burn_in}}) {
      auto it = f.find(std::string(d.name));
      if (it == f.end()) continue;
      absl::StatusOr<absl::Duration> value =
          ReadDuration(it->second.second, absl::StrCat("spec.", d.name));
      if (!value.ok()) return value.status();
      *d.out = *value;
    }
    if (e->design == Design::kParallel && f.contains("periodLength")) {
      return Error(f["periodLength"].second, "spec.periodLength",
                   "applies to the switchback design only");
    }
    absl::StatusOr<Metric> primary = ReadMetric(f["primaryMetric"].second, "spec.primaryMetric");
    if (!primary.ok()) return primary.status();
    e->primary_metric = *primary;
    if (auto it = f.find("secondaryMetrics"); it != f.end()) {
      absl::StatusOr<std::vector<YAML::Node>> items =
          ReadList(it->second.second, "spec.secondaryMetrics");
      if (!items.ok()) return items.status();
      for (size_t i = 0; i < items->size(); ++i) {
        absl::StatusOr<Metric> metric =
            ReadMetric((*items)[i], absl::StrCat("spec.secondaryMetrics[", i, "]"));
        if (!metric.ok()) return metric.status();
        e->secondary_metrics.push_back(*metric);
      }
    }
    if (auto it = f.find("guardrails"); it != f.end()) {
      if (absl::Status s = ReadGuardrails(it->second.second, e); !s.ok()) return s;
    }
    if (auto it = f.find("segments"); it != f.end()) {
      absl::StatusOr<std::vector<std::string>> keys =
          ReadStringList(it->second.second, "spec.segments");
      if (!keys.ok()) return keys.status();
      e->segment_keys = *std::move(keys);
    }
    if (auto it = f.find("minAdaptersPerArm"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, "spec.minAdaptersPerArm",
                                             "minAdaptersPerArm", 2, kMaxMinAdaptersPerArm);
      if (!n.ok()) return n.status();
      e->min_adapters_per_arm = *n;
    }
    if (auto it = f.find("minWindowsPerArm"); it != f.end()) {
      absl::StatusOr<uint32_t> n = ReadCount(it->second.second, "spec.minWindowsPerArm",
                                             "minWindowsPerArm", 1, kMaxMinWindowsPerArm);
      if (!n.ok()) return n.status();
      e->min_windows_per_arm = *n;
    }
    if (auto it = f.find("priority"); it != f.end()) {
      absl::StatusOr<int64_t> priority = ReadInt(it->second.second, "spec.priority");
      if (!priority.ok()) return priority.status();
      if (*priority < kMinPriority || *priority > kMaxPriority) {
        return Error(it->second.second, "spec.priority",
                     absl::StrCat("priority ", *priority, " is out of range -1000..1000"));
      }
      e->priority = static_cast<int>(*priority);
    }
    if (auto it = f.find("seed"); it != f.end()) {
      uint64_t seed = 0;
      const YAML::Node& seed_node = it->second.second;
      if (!seed_node.IsScalar() || !absl::SimpleAtoi(seed_node.Scalar(), &seed)) {
        return Error(seed_node, "spec.seed",
                     absl::StrCat("must be an unsigned 64-bit integer, found ", Found(seed_node)));
      }
      e->seed = seed;
    }
    return absl::OkStatus();
  }

  absl::string_view source_;
  std::map<std::string, YAML::Node> positions_;
};

void EmitStringList(YAML::Emitter& out, absl::string_view key,
                    const std::vector<std::string>& items, bool quoted) {
  out << YAML::Key << std::string(key) << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& item : items) {
    if (quoted) out << YAML::DoubleQuoted;
    out << item;
  }
  out << YAML::EndSeq;
}

void EmitLabels(YAML::Emitter& out, absl::string_view key,
                const std::map<std::string, std::string>& labels) {
  out << YAML::Key << std::string(key) << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : labels) out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  out << YAML::EndMap;
}

std::string RoundTripDouble(double value) { return absl::StrFormat("%.17g", value); }

}  // namespace

std::string_view DesignName(Design design) {
  return design == Design::kSwitchback ? "switchback" : "parallel";
}

std::string_view GuardrailOpSymbol(GuardrailOp op) {
  return op == GuardrailOp::kAtLeast ? ">=" : "<=";
}

size_t Experiment::ControlIndex() const { return ArmIndex(control_arm).value_or(arms.size()); }

std::optional<size_t> Experiment::ArmIndex(std::string_view arm_name) const {
  for (size_t i = 0; i < arms.size(); ++i) {
    if (arms[i].name == arm_name) return i;
  }
  return std::nullopt;
}

uint32_t Experiment::TotalWeight() const {
  uint32_t total = 0;
  for (const Arm& arm : arms) total += arm.weight;
  return total;
}

uint32_t Experiment::PeriodCount() const {
  if (design != Design::kSwitchback || period_length <= absl::ZeroDuration()) return 1;
  absl::Duration remainder;
  const int64_t full = absl::IDivDuration(duration, period_length, &remainder);
  return static_cast<uint32_t>(full + (remainder > absl::ZeroDuration() ? 1 : 0));
}

std::vector<Metric> Experiment::ReportedMetrics() const {
  std::vector<Metric> metrics;
  metrics.reserve(1 + secondary_metrics.size());
  metrics.push_back(primary_metric);
  for (Metric metric : secondary_metrics) metrics.push_back(metric);
  return metrics;
}

uint32_t Experiment::MinAdapters(const Guardrail& guardrail) const {
  return guardrail.min_adapters.value_or(min_adapters_per_arm);
}

uint32_t Experiment::MinWindows(const Guardrail& guardrail) const {
  return guardrail.min_windows.value_or(min_windows_per_arm);
}

absl::StatusOr<std::vector<Experiment>> ParseExperimentDocuments(std::string_view std_text,
                                                                 std::string_view std_source) {
  const absl::string_view text = ToAbslView(std_text);
  const absl::string_view source = ToAbslView(std_source);
  if (text.size() > kMaxExperimentInputBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", text.size(), " bytes exceeds the 1 MiB experiment input limit"));
  }
  if (absl::Status count =
          common::CheckYamlDocumentCount(std_text, kMaxExperimentDocuments, std_source);
      !count.ok()) {
    return count;
  }
  DocumentReader reader(source);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Where(e.mark), ": malformed YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed YAML: ", e.what()));
  }
  if (docs.size() > kMaxExperimentDocuments) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", docs.size(), " documents exceed the limit of 100"));
  }
  std::vector<Experiment> experiments;
  std::map<std::string, std::string> first_seen;  // name -> source
  try {
    for (const YAML::Node& doc : docs) {
      if (doc.IsNull()) continue;
      absl::StatusOr<Experiment> experiment = reader.ReadDocument(doc);
      if (!experiment.ok()) return experiment.status();
      auto [it, inserted] = first_seen.emplace(experiment->name, experiment->source);
      if (!inserted) {
        return reader.Error(reader.NodeFor("metadata.name"), "metadata.name",
                            absl::StrCat("duplicate experiment name '", experiment->name,
                                         "' (first defined at ", it->second, ")"));
      }
      experiments.push_back(*std::move(experiment));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Where(e.mark), ": invalid experiment document: ", e.msg));
  }
  return experiments;
}

absl::StatusOr<Experiment> ParseExperiment(std::string_view text, std::string_view source) {
  absl::StatusOr<std::vector<Experiment>> all = ParseExperimentDocuments(text, source);
  if (!all.ok()) return all.status();
  if (all->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbslView(source), ": expected exactly one ",
                                                   "Experiment document, found ", all->size()));
  }
  return std::move(all->front());
}

absl::Status ValidateExperiment(const Experiment& experiment) {
  if (CheckResult problem = CheckExperiment(experiment)) {
    return absl::InvalidArgumentError(absl::StrCat("experiment '", experiment.name,
                                                   "': ", problem->field, ": ", problem->message));
  }
  return absl::OkStatus();
}

std::string ExperimentToYaml(const Experiment& e) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << std::string(kExperimentApiVersion);
  out << YAML::Key << "kind" << YAML::Value << std::string(kExperimentKind);
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << e.name;
  if (!e.labels.empty()) EmitLabels(out, "labels", e.labels);
  if (!e.resource_version.empty()) {
    out << YAML::Key << "resourceVersion" << YAML::Value << YAML::DoubleQuoted
        << e.resource_version;
  }
  out << YAML::EndMap;

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  const Selector& selector = e.selector;
  if (!selector.Empty()) {
    out << YAML::Key << "selector" << YAML::Value << YAML::BeginMap;
    if (!selector.match_labels.empty()) EmitLabels(out, "matchLabels", selector.match_labels);
    if (!selector.usb_speeds.empty()) {
      std::vector<std::string> speeds;
      for (UsbSpeed speed : selector.usb_speeds) {
        speeds.emplace_back(common::UsbSpeedName(speed));
      }
      EmitStringList(out, "usbSpeeds", speeds, /*quoted=*/false);
    }
    if (!selector.chips.empty()) EmitStringList(out, "chips", selector.chips, false);
    if (!selector.vid_pids.empty()) {
      std::vector<std::string> ids;
      for (const common::VidPid& id : selector.vid_pids) {
        ids.push_back(common::FormatVidPid(id.vid, id.pid));
      }
      EmitStringList(out, "vidPids", ids, /*quoted=*/true);
    }
    if (!selector.adapters.empty()) EmitStringList(out, "adapters", selector.adapters, true);
    out << YAML::EndMap;
  }
  out << YAML::Key << "arms" << YAML::Value << YAML::BeginSeq;
  for (const Arm& arm : e.arms) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << arm.name;
    out << YAML::Key << "settings" << YAML::Value << YAML::Flow << YAML::BeginMap;
    const RxAggSettings& s = arm.settings;
    if (s.hold_us) out << YAML::Key << "hold" << YAML::Value << common::FormatHoldYaml(*s.hold_us);
    if (s.count_threshold) {
      out << YAML::Key << "countThreshold" << YAML::Value << *s.count_threshold;
    }
    if (s.buffer_kib) out << YAML::Key << "bufferKiB" << YAML::Value << *s.buffer_kib;
    if (s.enable) out << YAML::Key << "enable" << YAML::Value << YAML::TrueFalseBool << *s.enable;
    if (s.force_enable) {
      out << YAML::Key << "forceEnable" << YAML::Value << YAML::TrueFalseBool << true;
    }
    out << YAML::EndMap;
    out << YAML::Key << "weight" << YAML::Value << arm.weight;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "control" << YAML::Value << e.control_arm;
  out << YAML::Key << "design" << YAML::Value << std::string(DesignName(e.design));
  out << YAML::Key << "duration" << YAML::Value << absl::FormatDuration(e.duration);
  out << YAML::Key << "windowLength" << YAML::Value << absl::FormatDuration(e.window_length);
  if (e.design == Design::kSwitchback) {
    out << YAML::Key << "periodLength" << YAML::Value << absl::FormatDuration(e.period_length);
  }
  out << YAML::Key << "burnIn" << YAML::Value << absl::FormatDuration(e.burn_in);
  out << YAML::Key << "primaryMetric" << YAML::Value << std::string(MetricName(e.primary_metric));
  out << YAML::Key << "secondaryMetrics" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (Metric m : e.secondary_metrics) out << std::string(MetricName(m));
  out << YAML::EndSeq;
  out << YAML::Key << "guardrails" << YAML::Value << YAML::BeginSeq;
  for (const Guardrail& g : e.guardrails) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "metric" << YAML::Value << std::string(MetricName(g.metric));
    out << YAML::Key << "op" << YAML::Value << YAML::DoubleQuoted
        << std::string(GuardrailOpSymbol(g.op));
    out << YAML::Key << "threshold" << YAML::Value << RoundTripDouble(g.threshold);
    if (g.min_adapters) out << YAML::Key << "minAdapters" << YAML::Value << *g.min_adapters;
    if (g.min_windows) out << YAML::Key << "minWindows" << YAML::Value << *g.min_windows;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  EmitStringList(out, "segments", e.segment_keys, /*quoted=*/false);
  out << YAML::Key << "minAdaptersPerArm" << YAML::Value << e.min_adapters_per_arm;
  out << YAML::Key << "minWindowsPerArm" << YAML::Value << e.min_windows_per_arm;
  out << YAML::Key << "priority" << YAML::Value << e.priority;
  out << YAML::Key << "seed" << YAML::Value << e.seed;
  out << YAML::EndMap;  // spec
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> SegmentValuesFor(const Experiment& experiment,
                                          const common::AdapterAttributes& adapter) {
  std::vector<std::string> values;
  values.reserve(experiment.segment_keys.size());
  for (const std::string& key : experiment.segment_keys) {
    if (key == kSegmentUsbSpeed) {
      values.emplace_back(common::UsbSpeedName(adapter.usb_speed));
    } else if (key == kSegmentChip) {
      values.push_back(adapter.chip);
    } else if (key == kSegmentHost) {
      values.push_back(adapter.host);
    } else if (auto it = adapter.host_labels.find(key); it != adapter.host_labels.end()) {
      values.push_back(it->second);
    } else {
      values.emplace_back();
    }
  }
  return values;
}

std::map<std::string, std::string> SegmentMap(const std::vector<std::string>& keys,
                                              const std::vector<std::string>& values) {
  std::map<std::string, std::string> map;
  for (size_t i = 0; i < keys.size(); ++i) {
    map[keys[i]] = i < values.size() ? values[i] : std::string();
  }
  return map;
}

std::string FormatSegment(const std::vector<std::string>& keys,
                          const std::vector<std::string>& values) {
  if (keys.empty()) return "all adapters";
  std::vector<std::string> parts;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string value = i < values.size() && !values[i].empty() ? values[i] : "(none)";
    parts.push_back(absl::StrCat(keys[i], "=", value));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace rxfleet::experiments
