#include "cli/output/structured.h"

#include <cctype>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace rxfleet::cli {
namespace {

using Json = nlohmann::ordered_json;

// True if a YAML reader would take `s` as something other than a string when written plain.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  const std::string lower = absl::AsciiStrToLower(s);
  static const char* const kSpecial[] = {"true", "false", "yes", "no",   "on",   "off",   "y",
                                         "n",    "null",  "~",   ".nan", ".inf", "-.inf", "+.inf"};
  for (const char* word : kSpecial) {
    if (lower == word) return true;
  }
  double number = 0;
  if (absl::SimpleAtod(s, &number)) return true;
  // YAML 1.1 readers also take octal/hex/sexagesimal-looking digits as numbers.
  if (std::isdigit(static_cast<unsigned char>(s[0])) ||
      ((s[0] == '-' || s[0] == '+' || s[0] == '.') && s.size() > 1 &&
       std::isdigit(static_cast<unsigned char>(s[1])))) {
    bool digits_only = true;
    for (unsigned char c : s) {
      if (!std::isxdigit(c) && c != ':' && c != '_' && c != 'x' && c != 'o' && c != '.' &&
          c != '-' && c != '+') {
        digits_only = false;
      }
    }
    if (digits_only) return true;
  }
  return false;
}

void Emit(YAML::Emitter& out, const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key << key << YAML::Value;
        Emit(out, item);
      }
      out << YAML::EndMap;
      break;
    case Json::value_t::array:
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : value) Emit(out, item);
      out << YAML::EndSeq;
      break;
    case Json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case Json::value_t::boolean:
      out << (value.get<bool>() ? "true" : "false");
      break;
    case Json::value_t::null:
      out << YAML::Null;
      break;
    default:  // numbers: keep the JSON spelling
      out << value.dump();
      break;
  }
}

}  // namespace

const std::vector<std::string>& OutputFormatNames() {
  static const auto* const kNames =
      new std::vector<std::string>{"table", "wide", "json", "yaml", "name"};
  return *kNames;
}

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "wide") return OutputFormat::kWide;
  if (name == "json") return OutputFormat::kJson;
  if (name == "yaml") return OutputFormat::kYaml;
  if (name == "name") return OutputFormat::kName;
  return absl::InvalidArgumentError(absl::StrCat("unknown output format '",
                                                 common::ToAbslView(name), "' (expected ",
                                                 absl::StrJoin(OutputFormatNames(), ", "), ")"));
}

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message,
                                          std::string_view ensure_list_field) {
  // Serialise deterministically first (map entries sorted by key), then convert the bytes:
  // MessageToJsonString would print map entries in hash order, which changes between runs.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded)) {
      return absl::InternalError(absl::StrCat("cannot serialise ", message.GetTypeName()));
    }
  }
  constexpr char kUrlPrefix[] = "type.googleapis.com";
  std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kUrlPrefix, message.GetDescriptor()->file()->pool()));
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = false;
  std::string compact;
  if (auto status = google::protobuf::util::BinaryToJsonString(
          resolver.get(), absl::StrCat(kUrlPrefix, "/", message.GetTypeName()), binary, &compact,
          options);
      !status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot convert ", message.GetTypeName(), " to JSON: ", status.ToString()));
  }
  Json json = Json::parse(compact);
  if (!ensure_list_field.empty() && !json.contains(std::string(ensure_list_field))) {
    json[std::string(ensure_list_field)] = Json::array();
  }
  return json.dump(2) + "\n";
}

absl::StatusOr<std::string> JsonToYaml(std::string_view json_text) {
  Json json = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("invalid JSON document");
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(out, json);
  if (!out.good()) {
    return absl::InternalError(absl::StrCat("cannot emit YAML: ", out.GetLastError()));
  }
  return absl::StrCat(out.c_str(), "\n");
}

absl::Status PrintStructured(const google::protobuf::Message& message, OutputFormat format,
                             std::ostream& out, std::string_view ensure_list_field) {
  if (format != OutputFormat::kJson && format != OutputFormat::kYaml) {
    return absl::InvalidArgumentError("structured output is json or yaml");
  }
  auto json = MessageToJson(message, ensure_list_field);
  if (!json.ok()) return json.status();
  if (format == OutputFormat::kJson) {
    out << *json;
    return absl::OkStatus();
  }
  auto yaml = JsonToYaml(*json);
  if (!yaml.ok()) return yaml.status();
  out << *yaml;
  return absl::OkStatus();
}

}  // namespace rxfleet::cli
