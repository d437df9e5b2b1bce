#include "server/api/paging.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

constexpr char kTokenVersion[] = "p1";

// FNV-1a: stable across processes and restarts, unlike std::hash.
std::string Fingerprint(std::string_view query) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : query) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", hash);
}

}  // namespace

absl::StatusOr<size_t> PageSize(int32_t requested) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size ", requested,
                                                   " must not be negative (0 = ", kDefaultPageSize,
                                                   ", at most ", kMaxPageSize, ")"));
  }
  if (requested == 0) return kDefaultPageSize;
  return std::min(static_cast<size_t>(requested), kMaxPageSize);
}

std::string MakePageToken(std::string_view query, std::string_view last_key) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(kTokenVersion, ":", Fingerprint(query), ":", ToAbslView(last_key)));
}

absl::StatusOr<std::string> ParsePageToken(std::string_view token, std::string_view query) {
  if (token.empty()) return std::string();
  std::string decoded;
  const std::string prefix = absl::StrCat(kTokenVersion, ":", Fingerprint(query), ":");
  if (!absl::WebSafeBase64Unescape(ToAbslView(token), &decoded) ||
      decoded.rfind(absl::StrCat(kTokenVersion, ":"), 0) != 0) {
    return absl::InvalidArgumentError("page_token is malformed (pass next_page_token unchanged)");
  }
  if (decoded.rfind(prefix, 0) != 0) {
    return absl::InvalidArgumentError(
        "page_token belongs to a query with other filters (start again without a token)");
  }
  return decoded.substr(prefix.size());
}

}  // namespace rxfleet::server
