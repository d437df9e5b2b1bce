#include "common/host_labels.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxPrefixLength = 253;

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// name: 1..63 of [A-Za-z0-9._-], alphanumeric at both ends. Returns the broken rule or "".
std::string_view CheckName(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > kMaxNameLength) return "must be at most 63 characters";
  for (char c : name) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') {
      return "may contain only letters, digits, '.', '_' and '-'";
    }
  }
  if (!IsAlnum(name.front()) || !IsAlnum(name.back())) {
    return "must start and end with a letter or digit";
  }
  return "";
}

// prefix: dot-separated DNS labels of [a-z0-9-], each 1..63, alphanumeric at both ends.
std::string_view CheckPrefix(std::string_view prefix) {
  if (prefix.empty()) return "prefix must not be empty";
  if (prefix.size() > kMaxPrefixLength) return "prefix must be at most 253 characters";
  size_t start = 0;
  while (start <= prefix.size()) {
    size_t end = prefix.find('.', start);
    if (end == std::string_view::npos) end = prefix.size();
    const std::string_view label = prefix.substr(start, end - start);
    if (label.empty() || label.size() > kMaxNameLength) {
      return "prefix must be a DNS subdomain (labels of 1..63 characters)";
    }
    for (char c : label) {
      if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
            absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return "prefix may contain only lower-case letters, digits, '-' and '.'";
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return "prefix labels must start and end with a letter or digit";
    }
    start = end + 1;
  }
  return "";
}

}  // namespace

absl::Status ValidateLabelKey(std::string_view key) {
  std::string_view name = key;
  if (const size_t slash = key.find('/'); slash != std::string_view::npos) {
    if (const std::string_view rule = CheckPrefix(key.substr(0, slash)); !rule.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label key '", ToAbslView(key), "': ", ToAbslView(rule)));
    }
    name = key.substr(slash + 1);
  }
  if (const std::string_view rule = CheckName(name); !rule.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label key '", ToAbslView(key), "': name ", ToAbslView(rule)));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelValue(std::string_view value) {
  if (value.empty()) return absl::OkStatus();
  if (const std::string_view rule = CheckName(value); !rule.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label value '", ToAbslView(value), "' ", ToAbslView(rule)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> ParseLabelFlag(std::string_view flag) {
  const size_t eq = flag.find('=');
  if (eq == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("label '", ToAbslView(flag), "' must have the form key=value"));
  }
  const std::string_view key = flag.substr(0, eq);
  const std::string_view value = flag.substr(eq + 1);
  if (absl::Status status = ValidateLabelKey(key); !status.ok()) return status;
  if (absl::Status status = ValidateLabelValue(value); !status.ok()) return status;
  return std::make_pair(std::string(key), std::string(value));
}

}  // namespace rxfleet::common
