#include "common/policy/policy.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "common/yaml_guard.h"

namespace rxfleet::common {
namespace {

constexpr size_t kMaxPolicyNameLength = 63;

// ---------------------------------------------------------------------------------------------
// Field rules shared by the parser (which adds positions) and ValidatePolicy.

absl::Status CheckPolicyName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxPolicyNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("name '", name, "' must be 1..63 characters of [a-z0-9-]"));
  }
  for (char c : name) {
    if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
          absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return absl::InvalidArgumentError(
          absl::StrCat("name '", name, "' may contain only lower-case letters, digits and '-'"));
    }
  }
  if (name.front() == '-' || name.back() == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("name '", name, "' must start and end with a letter or digit"));
  }
  if (name == ToAbslView(kBuiltinDefaultPolicyName)) {
    return absl::InvalidArgumentError(
        absl::StrCat("name '", name, "' is reserved for the built-in default policy"));
  }
  return absl::OkStatus();
}

absl::Status CheckPriority(int64_t priority) {
  if (priority < kMinPolicyPriority || priority > kMaxPolicyPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority ", priority, " is out of range -1000..1000"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : labels) {
    if (absl::Status s = ValidateLabelKey(key); !s.ok()) return s;
    if (absl::Status s = ValidateLabelValue(value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckChipName(absl::string_view chip) {
  if (LayoutForChip(ToStdView(chip))) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chip '", chip, "' (known chips: ",
                   absl::StrJoin(KnownChipNames(), ", ",
                                 [](std::string* out, std::string_view n) { out->append(n); }),
                   ")"));
}

absl::Status CheckAdapterId(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("adapter id must not be empty");
  for (char c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("adapter id must not contain control characters");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckUsbSpeed(UsbSpeed speed) {
  if (speed == UsbSpeed::kUnknown) {
    return absl::InvalidArgumentError(
        "USB speed 'unknown' cannot be selected (expected low, full, high, super, super_plus)");
  }
  return absl::OkStatus();
}

// The layouts an adapter matched by `selector` can have. Chips narrow it; without chips, known
// vid:pids narrow it; anything else may be any layout.
std::set<RxAggLayout> PossibleLayouts(const Selector& selector) {
  std::set<RxAggLayout> layouts;
  if (!selector.chips.empty()) {
    for (const std::string& chip : selector.chips) {
      if (std::optional<RxAggLayout> layout = LayoutForChip(chip)) layouts.insert(*layout);
    }
    return layouts;
  }
  if (!selector.vid_pids.empty()) {
    bool all_known = true;
    for (const VidPid& id : selector.vid_pids) {
      if (const ChipId* chip = LookupChip(id.vid, id.pid)) {
        layouts.insert(chip->layout);
      } else {
        all_known = false;
      }
    }
    if (all_known) return layouts;
  }
  return {RxAggLayout::kV1, RxAggLayout::kV2, RxAggLayout::kV3};
}

// Cross-field settings rules: not empty, valid, and valid for every layout it may reach.
absl::Status CheckSettings(const RxAggSettings& settings, const Selector& selector) {
  if (settings.Empty()) {
    return absl::InvalidArgumentError(
        "spec.settings must set at least one of hold, holdUs, countThreshold, bufferKiB, enable");
  }
  if (absl::Status s = ValidateRxAggSettings(settings); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.settings: ", s.message()));
  }
  for (RxAggLayout layout : PossibleLayouts(selector)) {
    if (absl::Status s = ValidateRxAggSettingsForLayout(layout, settings); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.settings: ", s.message(), "; the selector can match ",
                       ToAbslView(RxAggLayoutName(layout)),
                       " chips (narrow spec.selector.chips to avoid them)"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// YAML reading with positions.

class DocumentReader {
 public:
  explicit DocumentReader(absl::string_view source) : source_(source) {}

  std::string Where(const YAML::Mark& mark) const {
    if (mark.is_null()) return std::string(source_);
    return absl::StrCat(source_, ":", mark.line + 1, ":", mark.column + 1);
  }

  absl::Status Error(const YAML::Node& node, absl::string_view path, absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(Where(node.Mark()), ": ", path, ": ", message));
  }

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

  // Checks that `node` is a map whose keys are unique scalars from `allowed`. Fills `fields`
  // with key -> (key node, value node).
  absl::Status ReadMap(const YAML::Node& node, absl::string_view path,
                       std::initializer_list<absl::string_view> allowed,
                       std::map<std::string, std::pair<YAML::Node, YAML::Node>>* fields) {
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
      return Error(node, path,
                   absl::StrCat("must be an integer, found ",
                                node.IsScalar() ? absl::StrCat("'", node.Scalar(), "'")
                                                : std::string(TypeName(node))));
    }
    return value;
  }

  absl::StatusOr<bool> ReadBool(const YAML::Node& node, absl::string_view path) {
    if (node.IsScalar()) {
      const std::string lower = absl::AsciiStrToLower(node.Scalar());
      if (lower == "true") return true;
      if (lower == "false") return false;
    }
    return Error(node, path,
                 absl::StrCat("must be true or false, found ",
                              node.IsScalar() ? absl::StrCat("'", node.Scalar(), "'")
                                              : std::string(TypeName(node))));
  }

  // A list of scalars; null means empty.
  absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> ReadStringList(
      const YAML::Node& node, absl::string_view path) {
    std::vector<std::pair<YAML::Node, std::string>> items;
    if (node.IsNull()) return items;
    if (!node.IsSequence()) {
      return Error(node, path, absl::StrCat("must be a list, found ", TypeName(node)));
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      absl::StatusOr<std::string> value = ReadString(item, absl::StrCat(path, "[", i, "]"));
      if (!value.ok()) return value.status();
      items.emplace_back(item, *std::move(value));
    }
    return items;
  }

  // A map of label key -> value; null means empty. Keys and values are validated.
  absl::StatusOr<std::map<std::string, std::string>> ReadLabels(const YAML::Node& node,
                                                                absl::string_view path) {
    std::map<std::string, std::string> labels;
    if (node.IsNull()) return labels;
    if (!node.IsMap()) {
      return Error(node, path, absl::StrCat("must be a map, found ", TypeName(node)));
    }
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) return Error(key, path, "label keys must be scalars");
      const std::string& key_text = key.Scalar();
      if (absl::Status s = ValidateLabelKey(key_text); !s.ok()) {
        return Error(key, path, s.message());
      }
      std::string value_text;
      if (!value.IsNull()) {
        absl::StatusOr<std::string> v = ReadString(value, absl::StrCat(path, ".", key_text));
        if (!v.ok()) return v.status();
        value_text = *std::move(v);
      }
      if (absl::Status s = ValidateLabelValue(value_text); !s.ok()) {
        return Error(value, absl::StrCat(path, ".", key_text), s.message());
      }
      if (!labels.emplace(key_text, value_text).second) {
        return Error(key, path, absl::StrCat("duplicate label '", key_text, "'"));
      }
    }
    return labels;
  }

  absl::Status ReadMetadata(const YAML::Node& node, Policy* policy, YAML::Node* name_node) {
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> f;
    if (absl::Status s = ReadMap(node, "metadata", {"name", "labels", "resourceVersion"}, &f);
        !s.ok()) {
      return s;
    }
    auto name_it = f.find("name");
    if (name_it == f.end()) return Error(node, "metadata", "missing required field 'name'");
    *name_node = name_it->second.second;
    absl::StatusOr<std::string> name = ReadString(*name_node, "metadata.name");
    if (!name.ok()) return name.status();
    if (absl::Status s = CheckPolicyName(*name); !s.ok()) {
      return Error(*name_node, "metadata.name", s.message());
    }
    policy->name = *std::move(name);
    if (auto it = f.find("labels"); it != f.end()) {
      absl::StatusOr<std::map<std::string, std::string>> labels =
          ReadLabels(it->second.second, "metadata.labels");
      if (!labels.ok()) return labels.status();
      policy->labels = *std::move(labels);
    }
    if (auto it = f.find("resourceVersion"); it != f.end()) {
      absl::StatusOr<std::string> version =
          ReadString(it->second.second, "metadata.resourceVersion");
      if (!version.ok()) return version.status();
      policy->resource_version = *std::move(version);
    }
    return absl::OkStatus();
  }

  absl::Status ReadSelector(const YAML::Node& node, Selector* selector) {
    if (node.IsNull()) return absl::OkStatus();
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> f;
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
    struct ListField {
      absl::string_view name;
      std::function<absl::Status(const YAML::Node&, const std::string&)> add;
    };
    const ListField lists[] = {
        {"usbSpeeds",
         [&](const YAML::Node& item, const std::string& text) {
           absl::StatusOr<UsbSpeed> speed = ParseUsbSpeed(text);
           absl::Status s = speed.ok() ? CheckUsbSpeed(*speed) : speed.status();
           if (!s.ok()) return Error(item, "spec.selector.usbSpeeds", s.message());
           selector->usb_speeds.push_back(*speed);
           return absl::OkStatus();
         }},
        {"chips",
         [&](const YAML::Node& item, const std::string& text) {
           if (absl::Status s = CheckChipName(text); !s.ok()) {
             return Error(item, "spec.selector.chips", s.message());
           }
           selector->chips.push_back(text);
           return absl::OkStatus();
         }},
        {"vidPids",
         [&](const YAML::Node& item, const std::string& text) {
           absl::StatusOr<VidPid> id = ParseVidPid(text);
           if (!id.ok()) return Error(item, "spec.selector.vidPids", id.status().message());
           selector->vid_pids.push_back(*id);
           return absl::OkStatus();
         }},
        {"adapters",
         [&](const YAML::Node& item, const std::string& text) {
           if (absl::Status s = CheckAdapterId(text); !s.ok()) {
             return Error(item, "spec.selector.adapters", s.message());
           }
           selector->adapters.push_back(text);
           return absl::OkStatus();
         }},
    };
    for (const ListField& list : lists) {
      auto it = f.find(std::string(list.name));
      if (it == f.end()) continue;
      absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> items =
          ReadStringList(it->second.second, absl::StrCat("spec.selector.", list.name));
      if (!items.ok()) return items.status();
      for (const auto& [item, text] : *items) {
        if (absl::Status s = list.add(item, text); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadSettings(const YAML::Node& node, RxAggSettings* settings) {
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> f;
    if (absl::Status s =
            ReadMap(node, "spec.settings",
                    {"hold", "holdUs", "countThreshold", "bufferKiB", "enable", "forceEnable"}, &f);
        !s.ok()) {
      return s;
    }
    if (f.contains("hold") && f.contains("holdUs")) {
      return Error(f["holdUs"].first, "spec.settings", "set either 'hold' or 'holdUs', not both");
    }
    if (auto it = f.find("hold"); it != f.end()) {
      const YAML::Node& value = it->second.second;
      absl::StatusOr<std::string> text = ReadString(value, "spec.settings.hold");
      if (!text.ok()) return text.status();
      absl::StatusOr<uint32_t> hold = ParseHoldUs(*text);
      if (!hold.ok()) return Error(value, "spec.settings.hold", hold.status().message());
      settings->hold_us = *hold;
    }
    if (auto it = f.find("holdUs"); it != f.end()) {
      const YAML::Node& value = it->second.second;
      absl::StatusOr<int64_t> hold = ReadInt(value, "spec.settings.holdUs");
      if (!hold.ok()) return hold.status();
      if (*hold < 0 || *hold > kMaxHoldUs) {
        return Error(value, "spec.settings.holdUs",
                     absl::StrCat("hold ", *hold, "us is out of range 0..8160us"));
      }
      // Same rule and wording as 'hold'.
      absl::StatusOr<uint32_t> checked = ParseHoldUs(absl::StrCat(*hold));
      if (!checked.ok()) return Error(value, "spec.settings.holdUs", checked.status().message());
      settings->hold_us = *checked;
    }
    if (auto it = f.find("countThreshold"); it != f.end()) {
      const YAML::Node& value = it->second.second;
      absl::StatusOr<int64_t> count = ReadInt(value, "spec.settings.countThreshold");
      if (!count.ok()) return count.status();
      if (*count < 0 || *count > kMaxRxAggCountThreshold) {
        return Error(value, "spec.settings.countThreshold",
                     absl::StrCat("countThreshold ", *count, " is out of range 0..255"));
      }
      settings->count_threshold = static_cast<uint32_t>(*count);
    }
    if (auto it = f.find("bufferKiB"); it != f.end()) {
      const YAML::Node& value = it->second.second;
      absl::StatusOr<std::string> text = ReadString(value, "spec.settings.bufferKiB");
      if (!text.ok()) return text.status();
      absl::StatusOr<uint32_t> kib = ParseKiB(*text);
      if (!kib.ok()) return Error(value, "spec.settings.bufferKiB", kib.status().message());
      if (*kib == 0 || *kib > kMaxRxAggBufferKiB) {
        return Error(value, "spec.settings.bufferKiB",
                     absl::StrCat("bufferKiB ", *kib,
                                  " is out of range 1..20 (the driver's RX buffer is 20 KiB)"));
      }
      settings->buffer_kib = *kib;
    }
    if (auto it = f.find("enable"); it != f.end()) {
      absl::StatusOr<bool> enable = ReadBool(it->second.second, "spec.settings.enable");
      if (!enable.ok()) return enable.status();
      settings->enable = *enable;
    }
    if (auto it = f.find("forceEnable"); it != f.end()) {
      absl::StatusOr<bool> force = ReadBool(it->second.second, "spec.settings.forceEnable");
      if (!force.ok()) return force.status();
      settings->force_enable = *force;
    }
    return absl::OkStatus();
  }

  absl::Status ReadSpec(const YAML::Node& node, Policy* policy, YAML::Node* settings_node) {
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> f;
    if (absl::Status s = ReadMap(node, "spec", {"priority", "selector", "settings"}, &f); !s.ok()) {
      return s;
    }
    if (auto it = f.find("priority"); it != f.end()) {
      absl::StatusOr<int64_t> priority = ReadInt(it->second.second, "spec.priority");
      if (!priority.ok()) return priority.status();
      if (absl::Status s = CheckPriority(*priority); !s.ok()) {
        return Error(it->second.second, "spec.priority", s.message());
      }
      policy->priority = static_cast<int>(*priority);
    }
    if (auto it = f.find("selector"); it != f.end()) {
      if (absl::Status s = ReadSelector(it->second.second, &policy->selector); !s.ok()) return s;
    }
    auto settings_it = f.find("settings");
    if (settings_it == f.end()) return Error(node, "spec", "missing required field 'settings'");
    *settings_node = settings_it->second.second;
    return ReadSettings(*settings_node, &policy->settings);
  }

  // Checks apiVersion and kind before anything else, so a document of another kind is
  // reported as such rather than by its first unfamiliar field.
  absl::Status CheckIdentity(const YAML::Node& doc) {
    if (!doc.IsMap()) return absl::OkStatus();  // ReadMap reports the shape.
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      const std::string& key = it->first.Scalar();
      if (key != "apiVersion" && key != "kind") continue;
      absl::StatusOr<std::string> value = ReadString(it->second, key);
      if (!value.ok()) return value.status();
      const absl::string_view expected =
          key == "apiVersion" ? ToAbslView(kPolicyApiVersion) : ToAbslView(kPolicyKind);
      if (*value != expected) {
        return Error(
            it->second, key,
            absl::StrCat("unsupported ", key, " '", *value, "' (expected '", expected, "')"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Policy> ReadDocument(const YAML::Node& doc, YAML::Node* name_node) {
    Policy policy;
    if (absl::Status s = CheckIdentity(doc); !s.ok()) return s;
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> f;
    if (absl::Status s = ReadMap(doc, "document", {"apiVersion", "kind", "metadata", "spec"}, &f);
        !s.ok()) {
      return s;
    }
    for (absl::string_view required : {"apiVersion", "kind", "metadata", "spec"}) {
      if (!f.contains(std::string(required))) {
        return Error(doc, "document", absl::StrCat("missing required field '", required, "'"));
      }
    }
    if (absl::Status s = ReadMetadata(f["metadata"].second, &policy, name_node); !s.ok()) {
      return s;
    }
    YAML::Node settings_node;
    if (absl::Status s = ReadSpec(f["spec"].second, &policy, &settings_node); !s.ok()) return s;
    if (absl::Status s = CheckSettings(policy.settings, policy.selector); !s.ok()) {
      return Error(settings_node, "spec.settings",
                   absl::StripPrefix(s.message(), "spec.settings: "));
    }
    const YAML::Mark mark = doc.Mark();
    policy.source =
        mark.is_null() ? std::string(source_) : absl::StrCat(source_, ":", mark.line + 1);
    return policy;
  }

 private:
  absl::string_view source_;
};

// ---------------------------------------------------------------------------------------------
// Files.

bool HasPolicySuffix(const std::filesystem::path& path, bool include_json) {
  const std::string ext = path.extension().string();
  return ext == ".yaml" || ext == ".yml" || (include_json && ext == ".json");
}

absl::StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": cannot read: ", ec.message()));
  }
  if (size > kMaxPolicyInputBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), ": ", size, " bytes exceeds the 1 MiB policy file limit"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path.string(), ": read error"));
  return buffer.str();
}

// Emits a flow list of plain strings.
void EmitList(YAML::Emitter& out, absl::string_view key, const std::vector<std::string>& items,
              bool quoted) {
  if (items.empty()) return;
  out << YAML::Key << std::string(key) << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& item : items) {
    if (quoted) out << YAML::DoubleQuoted;
    out << item;
  }
  out << YAML::EndSeq;
}

void EmitLabels(YAML::Emitter& out, absl::string_view key,
                const std::map<std::string, std::string>& labels) {
  if (labels.empty()) return;
  out << YAML::Key << std::string(key) << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : labels) {
    out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  }
  out << YAML::EndMap;
}

}  // namespace

absl::StatusOr<std::vector<Policy>> ParsePolicyDocuments(std::string_view std_text,
                                                         std::string_view std_source_name) {
  const absl::string_view text = ToAbslView(std_text);
  const absl::string_view source_name = ToAbslView(std_source_name);
  if (text.size() > kMaxPolicyInputBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", text.size(),
                                                   " bytes exceeds the 1 MiB policy input limit"));
  }
  if (absl::Status count = CheckYamlDocumentCount(std_text, kMaxPolicyDocuments, std_source_name);
      !count.ok()) {
    return count;
  }
  DocumentReader reader(source_name);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Where(e.mark), ": malformed YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": malformed YAML: ", e.what()));
  }
  if (docs.size() > kMaxPolicyDocuments) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", docs.size(), " documents exceed the limit of 1000"));
  }
  std::vector<Policy> policies;
  std::map<std::string, std::string> first_seen;  // name -> source
  try {
    for (const YAML::Node& doc : docs) {
      if (doc.IsNull()) continue;
      YAML::Node name_node;
      absl::StatusOr<Policy> policy = reader.ReadDocument(doc, &name_node);
      if (!policy.ok()) return policy.status();
      auto [it, inserted] = first_seen.emplace(policy->name, policy->source);
      if (!inserted) {
        return reader.Error(name_node, "metadata.name",
                            absl::StrCat("duplicate policy name '", policy->name,
                                         "' (first defined at ", it->second, ")"));
      }
      policies.push_back(*std::move(policy));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Where(e.mark), ": invalid policy document: ", e.msg));
  }
  return policies;
}

absl::Status ValidatePolicy(const Policy& policy) {
  const std::string prefix = absl::StrCat("policy '", policy.name, "': ");
  auto fail = [&](absl::string_view field, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, field, ": ", s.message()));
  };
  if (absl::Status s = CheckPolicyName(policy.name); !s.ok()) return fail("metadata.name", s);
  if (absl::Status s = CheckLabels(policy.labels); !s.ok()) return fail("metadata.labels", s);
  if (absl::Status s = CheckPriority(policy.priority); !s.ok()) return fail("spec.priority", s);
  const Selector& selector = policy.selector;
  if (absl::Status s = CheckLabels(selector.match_labels); !s.ok()) {
    return fail("spec.selector.matchLabels", s);
  }
  for (UsbSpeed speed : selector.usb_speeds) {
    if (absl::Status s = CheckUsbSpeed(speed); !s.ok()) return fail("spec.selector.usbSpeeds", s);
  }
  for (const std::string& chip : selector.chips) {
    if (absl::Status s = CheckChipName(chip); !s.ok()) return fail("spec.selector.chips", s);
  }
  for (const std::string& adapter : selector.adapters) {
    if (absl::Status s = CheckAdapterId(adapter); !s.ok()) {
      return fail("spec.selector.adapters", s);
    }
  }
  if (absl::Status s = CheckSettings(policy.settings, selector); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Policy>> LoadPolicyFiles(const std::vector<std::string>& paths_or_dirs) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const std::string& entry : paths_or_dirs) {
    const fs::path path(entry);
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) {
      if (HasPolicySuffix(path, /*include_json=*/true)) {
        return absl::NotFoundError(absl::StrCat(entry, ": policy file not found"));
      }
      continue;  // A policy directory that does not exist yet holds no policies.
    }
    if (ec) return absl::UnavailableError(absl::StrCat(entry, ": ", ec.message()));
    if (fs::is_directory(status)) {
      std::vector<fs::path> in_dir;
      fs::directory_iterator it(path, ec);
      if (ec) return absl::UnavailableError(absl::StrCat(entry, ": ", ec.message()));
      for (; it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        const fs::path& child = it->path();
        const std::string filename = child.filename().string();
        if (filename.empty() || filename.front() == '.') continue;
        if (!HasPolicySuffix(child, /*include_json=*/false)) continue;
        std::error_code file_ec;
        if (!fs::is_regular_file(child, file_ec)) continue;
        in_dir.push_back(child);
      }
      if (ec) return absl::UnavailableError(absl::StrCat(entry, ": ", ec.message()));
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.push_back(path);
    }
  }
  std::vector<Policy> all;
  std::map<std::string, std::string> first_seen;
  for (const fs::path& file : files) {
    absl::StatusOr<std::string> text = ReadSmallFile(file);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<Policy>> policies = ParsePolicyDocuments(*text, file.string());
    if (!policies.ok()) return policies.status();
    for (Policy& policy : *policies) {
      auto [it, inserted] = first_seen.emplace(policy.name, policy.source);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(policy.source, ": duplicate policy name '",
                                                       policy.name, "' (first defined at ",
                                                       it->second, ")"));
      }
      all.push_back(std::move(policy));
    }
  }
  return all;
}

std::string PolicyToYaml(const Policy& policy) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << std::string(kPolicyApiVersion);
  out << YAML::Key << "kind" << YAML::Value << std::string(kPolicyKind);
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << policy.name;
  EmitLabels(out, "labels", policy.labels);
  if (!policy.resource_version.empty()) {
    out << YAML::Key << "resourceVersion" << YAML::Value << YAML::DoubleQuoted
        << policy.resource_version;
  }
  out << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "priority" << YAML::Value << policy.priority;
  const Selector& selector = policy.selector;
  if (!selector.Empty()) {
    out << YAML::Key << "selector" << YAML::Value << YAML::BeginMap;
    EmitLabels(out, "matchLabels", selector.match_labels);
    std::vector<std::string> speeds;
    for (UsbSpeed speed : selector.usb_speeds) speeds.emplace_back(UsbSpeedName(speed));
    EmitList(out, "usbSpeeds", speeds, /*quoted=*/false);
    EmitList(out, "chips", selector.chips, /*quoted=*/false);
    std::vector<std::string> ids;
    for (const VidPid& id : selector.vid_pids) ids.push_back(FormatVidPid(id.vid, id.pid));
    EmitList(out, "vidPids", ids, /*quoted=*/true);
    EmitList(out, "adapters", selector.adapters, /*quoted=*/true);
    out << YAML::EndMap;
  }
  const RxAggSettings& settings = policy.settings;
  out << YAML::Key << "settings" << YAML::Value << YAML::BeginMap;
  if (settings.hold_us) {
    out << YAML::Key << "hold" << YAML::Value << FormatHoldYaml(*settings.hold_us);
  }
  if (settings.count_threshold) {
    out << YAML::Key << "countThreshold" << YAML::Value << *settings.count_threshold;
  }
  if (settings.buffer_kib) {
    out << YAML::Key << "bufferKiB" << YAML::Value << *settings.buffer_kib;
  }
  if (settings.enable) {
    out << YAML::Key << "enable" << YAML::Value << YAML::TrueFalseBool << *settings.enable;
  }
  if (settings.force_enable) {
    out << YAML::Key << "forceEnable" << YAML::Value << YAML::TrueFalseBool << true;
  }
  out << YAML::EndMap;  // settings
  out << YAML::EndMap;  // spec
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace rxfleet::common
