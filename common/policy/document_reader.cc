// Reason: one strict reader for every document block (metadata, selector, settings, probe);
// the blocks share its position bookkeeping and error wording, so it stays one file.
#include "common/policy/document_reader.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/chips/chip_table.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "common/units.h"
#include "common/yaml_guard.h"

namespace rxfleet::common {

// ---------------------------------------------------------------------------------------------
// Reading.

std::string DocumentReader::Where(const YAML::Mark& mark) const {
  if (mark.is_null()) return std::string(source_);
  return absl::StrCat(source_, ":", mark.line + 1, ":", mark.column + 1);
}

std::string DocumentReader::SourceLine(const YAML::Node& doc) const {
  const YAML::Mark mark = doc.Mark();
  return mark.is_null() ? std::string(source_) : absl::StrCat(source_, ":", mark.line + 1);
}

absl::Status DocumentReader::Error(const YAML::Node& node, absl::string_view path,
                                   absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(node.Mark()), ": ", path, ": ", message));
}

absl::string_view DocumentReader::TypeName(const YAML::Node& node) {
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

std::string DocumentReader::Found(const YAML::Node& node) {
  return node.IsScalar() ? absl::StrCat("'", node.Scalar(), "'") : std::string(TypeName(node));
}

void DocumentReader::StartDocument(const YAML::Node& doc) {
  positions_.clear();
  positions_["document"] = doc;
}

YAML::Node DocumentReader::NodeFor(std::string field) const {
  while (true) {
    if (auto it = positions_.find(field); it != positions_.end()) return it->second;
    const size_t cut = field.find_last_of(".[");
    if (cut == std::string::npos) break;
    field.resize(cut);
  }
  if (auto it = positions_.find("document"); it != positions_.end()) return it->second;
  return YAML::Node();
}

absl::StatusOr<std::vector<YAML::Node>> DocumentReader::LoadDocuments(absl::string_view text,
                                                                      absl::string_view what,
                                                                      size_t max_bytes,
                                                                      size_t max_documents) const {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": ", text.size(), " bytes exceeds the 1 MiB ", what, " input limit"));
  }
  // yaml-cpp 0.7's LoadAll can loop forever on some malformed input: count first.
  if (absl::Status count =
          CheckYamlDocumentCount(ToStdView(text), max_documents, ToStdView(source_));
      !count.ok()) {
    return count;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Where(e.mark), ": malformed YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": malformed YAML: ", e.what()));
  }
  if (docs.size() > max_documents) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", docs.size(), " documents exceed the limit of ", max_documents));
  }
  return docs;
}

absl::Status DocumentReader::ReadTopLevel(const YAML::Node& doc, std::string_view api_version,
                                          std::string_view kind, FieldMap* fields) {
  StartDocument(doc);
  if (absl::Status s = CheckIdentity(doc, api_version, kind); !s.ok()) return s;
  if (absl::Status s = ReadMap(doc, "document", {"apiVersion", "kind", "metadata", "spec"}, fields);
      !s.ok()) {
    return s;
  }
  return RequireFields(doc, "document", {"apiVersion", "kind", "metadata", "spec"}, *fields);
}

absl::Status DocumentReader::ReadMetadata(const YAML::Node& node,
                                          absl::Status (*check_name)(std::string_view),
                                          bool validate_labels, DocumentMetadata* metadata) {
  FieldMap f;
  if (absl::Status s = ReadMap(node, "metadata", {"name", "labels", "resourceVersion"}, &f);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = RequireFields(node, "metadata", {"name"}, f); !s.ok()) return s;
  const YAML::Node& name_node = f["name"].second;
  absl::StatusOr<std::string> name = ReadString(name_node, "metadata.name");
  if (!name.ok()) return name.status();
  if (check_name != nullptr) {
    if (absl::Status s = check_name(*name); !s.ok()) {
      return Error(name_node, "metadata.name", s.message());
    }
  }
  metadata->name = *std::move(name);
  if (auto it = f.find("labels"); it != f.end()) {
    absl::StatusOr<std::map<std::string, std::string>> labels =
        ReadLabels(it->second.second, "metadata.labels", validate_labels);
    if (!labels.ok()) return labels.status();
    metadata->labels = *std::move(labels);
  }
  if (auto it = f.find("resourceVersion"); it != f.end()) {
    absl::StatusOr<std::string> version = ReadString(it->second.second, "metadata.resourceVersion");
    if (!version.ok()) return version.status();
    metadata->resource_version = *std::move(version);
  }
  return absl::OkStatus();
}

absl::Status DocumentReader::CheckIdentity(const YAML::Node& doc, std::string_view api_version,
                                           std::string_view kind) const {
  if (!doc.IsMap()) return absl::OkStatus();  // ReadMap reports the shape.
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string& key = it->first.Scalar();
    if (key != "apiVersion" && key != "kind") continue;
    absl::StatusOr<std::string> value = ReadString(it->second, key);
    if (!value.ok()) return value.status();
    const absl::string_view expected =
        key == "apiVersion" ? ToAbslView(api_version) : ToAbslView(kind);
    if (*value != expected) {
      return Error(
          it->second, key,
          absl::StrCat("unsupported ", key, " '", *value, "' (expected '", expected, "')"));
    }
  }
  return absl::OkStatus();
}

absl::Status DocumentReader::ReadMap(const YAML::Node& node, absl::string_view path,
                                     std::initializer_list<absl::string_view> allowed,
                                     FieldMap* fields) {
  if (!node.IsMap()) {
    return Error(node, path, absl::StrCat("must be a map, found ", TypeName(node)));
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) return Error(key, path, "field names must be scalars");
    const std::string& name = key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return Error(
          key, path,
          absl::StrCat("unknown field '", name, "' (allowed: ", absl::StrJoin(allowed, ", "), ")"));
    }
    if (!fields->emplace(name, std::make_pair(key, it->second)).second) {
      return Error(key, path, absl::StrCat("duplicate field '", name, "'"));
    }
    Remember(absl::StrCat(path == "document" ? "" : absl::StrCat(path, "."), name), it->second);
  }
  return absl::OkStatus();
}

absl::Status DocumentReader::RequireFields(const YAML::Node& node, absl::string_view path,
                                           std::initializer_list<absl::string_view> required,
                                           const FieldMap& fields) const {
  for (absl::string_view name : required) {
    if (!fields.contains(std::string(name))) {
      return Error(node, path, absl::StrCat("missing required field '", name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DocumentReader::ReadString(const YAML::Node& node,
                                                       absl::string_view path) const {
  if (!node.IsScalar()) {
    return Error(node, path, absl::StrCat("must be a string, found ", TypeName(node)));
  }
  return node.Scalar();
}

absl::StatusOr<int64_t> DocumentReader::ReadInt(const YAML::Node& node,
                                                absl::string_view path) const {
  int64_t value = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &value)) {
    return Error(node, path, absl::StrCat("must be an integer, found ", Found(node)));
  }
  return value;
}

absl::StatusOr<uint32_t> DocumentReader::ReadCount(const YAML::Node& node, absl::string_view path,
                                                   absl::string_view name, int64_t low,
                                                   int64_t high) const {
  absl::StatusOr<int64_t> value = ReadInt(node, path);
  if (!value.ok()) return value.status();
  if (*value < low || *value > high) {
    return Error(node, path, absl::StrCat(name, " ", *value, " is out of range ", low, "..", high));
  }
  return static_cast<uint32_t>(*value);
}

absl::StatusOr<bool> DocumentReader::ReadBool(const YAML::Node& node,
                                              absl::string_view path) const {
  if (node.IsScalar()) {
    const std::string lower = absl::AsciiStrToLower(node.Scalar());
    if (lower == "true") return true;
    if (lower == "false") return false;
  }
  return Error(node, path, absl::StrCat("must be true or false, found ", Found(node)));
}

absl::StatusOr<std::vector<YAML::Node>> DocumentReader::ReadList(const YAML::Node& node,
                                                                 absl::string_view path) {
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

absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> DocumentReader::ReadStringList(
    const YAML::Node& node, absl::string_view path) {
  absl::StatusOr<std::vector<YAML::Node>> items = ReadList(node, path);
  if (!items.ok()) return items.status();
  std::vector<std::pair<YAML::Node, std::string>> out;
  for (size_t i = 0; i < items->size(); ++i) {
    const YAML::Node& item = (*items)[i];
    absl::StatusOr<std::string> value = ReadString(item, absl::StrCat(path, "[", i, "]"));
    if (!value.ok()) return value.status();
    out.emplace_back(item, *std::move(value));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> DocumentReader::ReadLabels(
    const YAML::Node& node, absl::string_view path, bool validate) {
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
    if (validate) {
      if (absl::Status s = ValidateLabelKey(key_text); !s.ok()) {
        return Error(key, path, s.message());
      }
    }
    const std::string field = absl::StrCat(path, ".", key_text);
    std::string value_text;
    if (!value.IsNull()) {
      absl::StatusOr<std::string> v = ReadString(value, field);
      if (!v.ok()) return v.status();
      value_text = *std::move(v);
    }
    if (validate) {
      if (absl::Status s = ValidateLabelValue(value_text); !s.ok()) {
        return Error(value, field, s.message());
      }
    }
    if (!labels.emplace(key_text, value_text).second) {
      return Error(key, path, absl::StrCat("duplicate label '", key_text, "'"));
    }
    Remember(field, value);
  }
  return labels;
}

absl::Status DocumentReader::ReadSelector(const YAML::Node& node, SelectorItemChecks checks,
                                          Selector* selector) {
  if (node.IsNull()) return absl::OkStatus();
  const bool check_all = checks == SelectorItemChecks::kWhileReading;
  FieldMap f;
  if (absl::Status s =
          ReadMap(node, "spec.selector",
                  {"matchLabels", "usbSpeeds", "chips", "vidPids", "adapters", "families"}, &f);
      !s.ok()) {
    return s;
  }
  if (auto it = f.find("matchLabels"); it != f.end()) {
    absl::StatusOr<std::map<std::string, std::string>> labels =
        ReadLabels(it->second.second, "spec.selector.matchLabels", check_all);
    if (!labels.ok()) return labels.status();
    selector->match_labels = *std::move(labels);
  }
  // Reads the list `name` and hands every item to `add`, which returns the item's problem.
  auto read_list = [&](absl::string_view name, auto add) -> absl::Status {
    auto it = f.find(std::string(name));
    if (it == f.end()) return absl::OkStatus();
    const std::string path = absl::StrCat("spec.selector.", name);
    absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> items =
        ReadStringList(it->second.second, path);
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const auto& [item, text] = (*items)[i];
      if (absl::Status s = add(text); !s.ok()) {
        return Error(item, check_all ? path : absl::StrCat(path, "[", i, "]"), s.message());
      }
    }
    return absl::OkStatus();
  };
  auto add_speed = [&](const std::string& text) -> absl::Status {
    absl::StatusOr<UsbSpeed> speed = ParseUsbSpeed(text);
    if (!speed.ok()) return speed.status();
    if (check_all) {
      if (absl::Status problem = CheckSelectableUsbSpeed(*speed); !problem.ok()) return problem;
    }
    selector->usb_speeds.push_back(*speed);
    return absl::OkStatus();
  };
  // Items kept as text: `check` applies while reading only.
  auto add_text = [check_all](std::vector<std::string>* list,
                              absl::Status (*check)(std::string_view)) {
    return [check_all, list, check](const std::string& text) -> absl::Status {
      if (check_all) {
        if (absl::Status problem = check(text); !problem.ok()) return problem;
      }
      list->push_back(text);
      return absl::OkStatus();
    };
  };
  auto add_vid_pid = [&](const std::string& text) -> absl::Status {
    absl::StatusOr<VidPid> id = ParseVidPid(text);
    if (!id.ok()) return id.status();
    selector->vid_pids.push_back(*id);
    return absl::OkStatus();
  };
  if (absl::Status s = read_list("usbSpeeds", add_speed); !s.ok()) return s;
  if (absl::Status s = read_list("chips", add_text(&selector->chips, &CheckChipName)); !s.ok()) {
    return s;
  }
  if (absl::Status s = read_list("vidPids", add_vid_pid); !s.ok()) return s;
  if (absl::Status s = read_list("families", add_text(&selector->families, &CheckFamilyName));
      !s.ok()) {
    return s;
  }
  return read_list("adapters", add_text(&selector->adapters, &ValidateAdapterId));
}

absl::Status DocumentReader::ReadSettings(const YAML::Node& node, absl::string_view path,
                                          const SettingsReadOptions& options,
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
    const YAML::Node& value = it->second.second;
    const std::string field = absl::StrCat(path, ".hold");
    absl::StatusOr<std::string> text = ReadString(value, field);
    if (!text.ok()) return text.status();
    absl::StatusOr<uint32_t> hold = ParseHoldUs(*text);
    if (!hold.ok()) return Error(value, field, hold.status().message());
    settings->hold_us = *hold;
  }
  if (auto it = f.find("holdUs"); it != f.end()) {
    const YAML::Node& value = it->second.second;
    const std::string field = absl::StrCat(path, ".holdUs");
    absl::StatusOr<int64_t> hold = ReadInt(value, field);
    if (!hold.ok()) return hold.status();
    if (*hold < 0 || *hold > kMaxHoldUs) {
      return Error(value, field,
                   options.hold_us_range_in_us
                       ? absl::StrCat("hold ", *hold, "us is out of range 0..8160us")
                       : absl::StrCat("holdUs ", *hold, " is out of range 0..", kMaxHoldUs));
    }
    // Same rule and wording as 'hold'.
    absl::StatusOr<uint32_t> checked = ParseHoldUs(absl::StrCat(*hold));
    if (!checked.ok()) return Error(value, field, checked.status().message());
    settings->hold_us = *checked;
  }
  if (auto it = f.find("countThreshold"); it != f.end()) {
    absl::StatusOr<uint32_t> count =
        ReadCount(it->second.second, absl::StrCat(path, ".countThreshold"), "countThreshold", 0,
                  kMaxRxAggCountThreshold);
    if (!count.ok()) return count.status();
    settings->count_threshold = *count;
  }
  if (auto it = f.find("bufferKiB"); it != f.end()) {
    const YAML::Node& value = it->second.second;
    const std::string field = absl::StrCat(path, ".bufferKiB");
    absl::StatusOr<std::string> text = ReadString(value, field);
    if (!text.ok()) return text.status();
    absl::StatusOr<uint32_t> kib = ParseKiB(*text);
    if (!kib.ok()) return Error(value, field, kib.status().message());
    if (options.check_buffer_range && (*kib == 0 || *kib > kMaxRxAggBufferKiB)) {
      return Error(value, field,
                   absl::StrCat("bufferKiB ", *kib,
                                " is out of range 1..20 (the driver's RX buffer is 20 KiB)"));
    }
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

absl::Status DocumentReader::ReadProbe(const YAML::Node& node, absl::string_view path,
                                       ProbeSpec* probe) {
  FieldMap f;
  if (absl::Status s = ReadMap(
          node, path,
          {"server", "protocol", "direction", "parallelStreams", "duration", "udpRate", "interval"},
          &f);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = RequireFields(node, path, {"server"}, f); !s.ok()) return s;
  const auto field = [&](absl::string_view name) { return absl::StrCat(path, ".", name); };
  {
    const YAML::Node& value = f["server"].second;
    absl::StatusOr<std::string> text = ReadString(value, field("server"));
    if (!text.ok()) return text.status();
    if (absl::Status s = ParseProbeServer(*text, *probe); !s.ok()) {
      return Error(value, field("server"), s.message());
    }
  }
  // A word from `words` (lower case, exact).
  const auto read_word =
      [&](absl::string_view name,
          std::initializer_list<absl::string_view> words) -> absl::StatusOr<int> {
    const YAML::Node& value = f[std::string(name)].second;
    absl::StatusOr<std::string> text = ReadString(value, field(name));
    if (!text.ok()) return text.status();
    int index = 0;
    for (absl::string_view word : words) {
      if (*text == word) return index;
      ++index;
    }
    return Error(
        value, field(name),
        absl::StrCat("must be one of ", absl::StrJoin(words, ", "), ", found ", Found(value)));
  };
  if (f.contains("protocol")) {
    absl::StatusOr<int> word = read_word("protocol", {"tcp", "udp"});
    if (!word.ok()) return word.status();
    probe->protocol = *word == 0 ? ProbeProtocol::kTcp : ProbeProtocol::kUdp;
  }
  if (f.contains("direction")) {
    absl::StatusOr<int> word = read_word("direction", {"reverse", "forward"});
    if (!word.ok()) return word.status();
    probe->direction = *word == 0 ? ProbeDirection::kReverse : ProbeDirection::kForward;
  }
  if (auto it = f.find("parallelStreams"); it != f.end()) {
    absl::StatusOr<uint32_t> streams = ReadCount(it->second.second, field("parallelStreams"),
                                                 "parallelStreams", 1, kMaxProbeStreams);
    if (!streams.ok()) return streams.status();
    probe->parallel_streams = static_cast<int>(*streams);
  }
  const auto read_duration = [&](absl::string_view name, absl::Duration* out) -> absl::Status {
    auto it = f.find(std::string(name));
    if (it == f.end()) return absl::OkStatus();
    const YAML::Node& value = it->second.second;
    absl::StatusOr<std::string> text = ReadString(value, field(name));
    if (!text.ok()) return text.status();
    if (!absl::ParseDuration(*text, out) || *out < absl::ZeroDuration() ||
        *out == absl::InfiniteDuration()) {
      return Error(value, field(name),
                   absl::StrCat("must be a duration such as 10s, 5m or 1h, found ", Found(value)));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = read_duration("duration", &probe->duration); !s.ok()) return s;
  if (absl::Status s = read_duration("interval", &probe->interval); !s.ok()) return s;
  if (auto it = f.find("udpRate"); it != f.end()) {
    const YAML::Node& value = it->second.second;
    absl::StatusOr<std::string> text = ReadString(value, field("udpRate"));
    if (!text.ok()) return text.status();
    absl::StatusOr<uint64_t> rate = ParseBitRate(*text);
    if (!rate.ok()) return Error(value, field("udpRate"), rate.status().message());
    probe->udp_rate_bps = *rate;
  }
  if (absl::Status s = ValidateProbeSpec(*probe); !s.ok()) {
    // ValidateProbeSpec names "probe.<field>"; point at that field when it was written.
    absl::string_view message = s.message();
    absl::string_view rest = message;
    if (absl::ConsumePrefix(&rest, "probe.")) {
      const std::string name(rest.substr(0, rest.find_first_of(" :")));
      if (auto it = f.find(name); it != f.end()) {
        return Error(it->second.second, field(name), message);
      }
    }
    return Error(node, path, message);
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::common
