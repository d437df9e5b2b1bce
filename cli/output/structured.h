#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace rxfleet::cli {

/// How `get` and `status` print their results (-o/--output).
enum class OutputFormat {
  kTable,  ///< aligned columns an operator needs first (default)
  kWide,   ///< the table plus more columns
  kJson,   ///< the API resource(s) in the protobuf JSON mapping
  kYaml,   ///< the same document as YAML
  kName,   ///< one `kind/name` per line, for scripts
};

/// The names -o accepts, in help order: table, wide, json, yaml, name.
const std::vector<std::string>& OutputFormatNames();

/// Parses an -o value. InvalidArgument naming the accepted values otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

/// The message in the protobuf JSON mapping (lowerCamelCase names, enums by name, 64-bit
/// integers as strings, unset fields omitted), indented by two spaces, fields in .proto order,
/// ending in a newline. If `ensure_list_field` is non-empty and the message has no such field
/// in its JSON (an empty repeated field), it is added as [] so list output always has the key.
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message,
                                          std::string_view ensure_list_field = "");

/// Converts a JSON document to YAML (block style, keys in the JSON's order) with yaml-cpp.
/// Strings that would read back as another type ("7", "true", "null", "") are double-quoted,
/// so the YAML carries the same values as the JSON. Ends in a newline.
/// InvalidArgument if `json` is not valid JSON.
absl::StatusOr<std::string> JsonToYaml(std::string_view json);

/// Prints `message` as JSON or YAML (`format` must be kJson or kYaml; anything else is
/// InvalidArgument). `ensure_list_field` as for MessageToJson.
absl::Status PrintStructured(const google::protobuf::Message& message, OutputFormat format,
                             std::ostream& out, std::string_view ensure_list_field = "");

}  // namespace rxfleet::cli
