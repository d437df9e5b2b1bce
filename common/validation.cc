#include "common/validation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/host_labels.h"
#include "common/policy/document_reader.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

std::string Quoted(std::string_view value) {
  return absl::StrCat("'", absl::CHexEscape(ToAbslView(value)), "'");
}

bool IsLowerAlnum(char c) {
  const auto u = static_cast<unsigned char>(c);
  return absl::ascii_islower(u) || absl::ascii_isdigit(u);
}

}  // namespace

absl::Status ValidateHostId(std::string_view id) {
  if (id.empty() || id.size() > kMaxHostIdLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("host id ", Quoted(id), " must be 1..", kMaxHostIdLength, " characters"));
  }
  for (char c : id) {
    if (!IsLowerAlnum(c) && c != '-' && c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          "host id ", Quoted(id), " may contain only lower-case letters, digits, '-' and '.'"));
    }
  }
  if (!IsLowerAlnum(id.front()) || !IsLowerAlnum(id.back())) {
    return absl::InvalidArgumentError(
        absl::StrCat("host id ", Quoted(id), " must start and end with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAdapterId(std::string_view id) {
  if (id.empty() || id.size() > kMaxAdapterIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("adapter id ", Quoted(id), " must be 1..",
                                                   kMaxAdapterIdLength, " characters"));
  }
  for (char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("adapter id ", Quoted(id), " must be printable ASCII without spaces"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckObjectName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > kMaxObjectNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbslView(what), " ", Quoted(name),
                                                   " must be 1..", kMaxObjectNameLength,
                                                   " characters of [a-z0-9-]"));
  }
  for (char c : name) {
    if (!IsLowerAlnum(c) && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbslView(what), " ", Quoted(name),
                       " may contain only lower-case letters, digits and '-'"));
    }
  }
  if (name.front() == '-' || name.back() == '-') {
    return absl::InvalidArgumentError(absl::StrCat(ToAbslView(what), " ", Quoted(name),
                                                   " must start and end with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateExperimentName(std::string_view name) {
  return CheckObjectName("experiment name", name);
}

std::optional<FieldProblem> FindSelectorProblem(const Selector& selector, std::string_view path) {
  const std::string base(path);
  auto problem = [](std::string field, const absl::Status& s) -> std::optional<FieldProblem> {
    if (s.ok()) return std::nullopt;
    return FieldProblem{std::move(field), std::string(s.message())};
  };
  for (const auto& [key, value] : selector.match_labels) {
    if (auto p = problem(base + ".matchLabels", ValidateLabelKey(key))) return p;
    if (auto p = problem(absl::StrCat(base, ".matchLabels.", key), ValidateLabelValue(value))) {
      return p;
    }
  }
  for (size_t i = 0; i < selector.usb_speeds.size(); ++i) {
    if (auto p = problem(absl::StrCat(base, ".usbSpeeds[", i, "]"),
                         CheckSelectableUsbSpeed(selector.usb_speeds[i]))) {
      return p;
    }
  }
  for (size_t i = 0; i < selector.chips.size(); ++i) {
    if (auto p = problem(absl::StrCat(base, ".chips[", i, "]"), CheckChipName(selector.chips[i]))) {
      return p;
    }
  }
  for (size_t i = 0; i < selector.adapters.size(); ++i) {
    if (auto p = problem(absl::StrCat(base, ".adapters[", i, "]"),
                         ValidateAdapterId(selector.adapters[i]))) {
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace rxfleet::common
