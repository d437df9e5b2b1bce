#pragma once

// Paging of FleetService lists: page_size 0 = 100, at most 1000 (larger values are clamped),
// negative = InvalidArgument; page tokens are opaque (web-safe base64) and carry the last key
// returned plus a fingerprint of the query's filters, so a token is refused
// (InvalidArgument) with other filters.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rxfleet::server {

inline constexpr size_t kDefaultPageSize = 100;
inline constexpr size_t kMaxPageSize = 1000;

/// The effective page size of a request.
absl::StatusOr<size_t> PageSize(int32_t requested);

/// A token resuming after `last_key` for the query identified by `query` (the filter fields
/// concatenated by the caller).
std::string MakePageToken(std::string_view query, std::string_view last_key);

/// The last key of a token; "" for an empty token. InvalidArgument for a malformed token or
/// one made for another query.
absl::StatusOr<std::string> ParsePageToken(std::string_view token, std::string_view query);

}  // namespace rxfleet::server
