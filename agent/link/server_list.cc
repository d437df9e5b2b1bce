#include "agent/link/server_list.h"

#include <cstdint>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net_address.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {

absl::StatusOr<std::vector<std::string>> ParseServerAddresses(std::string_view text) {
  if (absl::StripAsciiWhitespace(common::ToAbslView(text)).empty()) {
    return absl::InvalidArgumentError(
        "no server address: expected HOST:PORT[,HOST:PORT...], e.g. fleet.example:7443");
  }
  std::vector<std::string> addresses;
  std::set<std::string> seen;  // lower-cased, to find duplicates
  size_t position = 0;
  for (absl::string_view part : absl::StrSplit(common::ToAbslView(text), ',')) {
    ++position;
    const std::string entry(absl::StripAsciiWhitespace(part));
    const std::string where = absl::StrCat("entry ", position);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is empty (two commas in a row, or one at an end)"));
    }
    if (position > kMaxServerAddresses) {
      return absl::InvalidArgumentError(absl::StrCat(
          "more than ", kMaxServerAddresses, " server addresses (the most one list takes)"));
    }
    if (absl::Status valid = common::ValidateHostPort(entry); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", valid.message()));
    }
    uint32_t port = 0;
    if (absl::SimpleAtoi(common::ToAbslView(std::string_view(entry).substr(entry.rfind(':') + 1)),
                         &port) &&
        port == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": address \"", entry, "\": port 0 is not a server's port"));
    }
    if (!seen.insert(absl::AsciiStrToLower(entry)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", entry, "\" is already in the list"));
    }
    addresses.push_back(entry);
  }
  return addresses;
}

ServerRotation::ServerRotation(size_t count, size_t first)
    : count_(count == 0 ? 1 : count), current_(first % count_) {}

bool ServerRotation::EndAttempt(bool worked) {
  if (worked) failures_ = 0;
  current_ = (current_ + 1) % count_;
  ++failures_;
  if (failures_ < count_) return false;
  failures_ = 0;
  return true;
}

}  // namespace rxfleet::agent
