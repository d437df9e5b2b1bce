#pragma once

// Paging of FleetService lists: page_size 0 = 100, at most 1000 (larger values are clamped),
// negative = InvalidArgument; a page also ends early, with a next_page_token, before its items
// pass kMaxPageBytes, so no response comes near the 4 MiB gRPC message limit; page tokens are
// opaque (web-safe base64) and carry the last key returned plus a fingerprint of the query's
// filters, so a token is refused (InvalidArgument) with other filters.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rxfleet::server {

inline constexpr size_t kDefaultPageSize = 100;
inline constexpr size_t kMaxPageSize = 1000;
/// Serialised bytes of the items of one page (half the 4 MiB message limit). A single item
/// larger than this still makes a page of its own.
inline constexpr size_t kMaxPageBytes = size_t{2} << 20;

/// Fills one page of at most `page_size` items and kMaxPageBytes bytes.
class PageFill {
 public:
  explicit PageFill(size_t page_size) : page_size_(page_size) {}
  /// Whether one more item of `bytes` (its ByteSizeLong()) belongs on this page; counts it if
  /// so. The first item always fits. After a false the caller ends the page with a token for
  /// the last item it added.
  bool Add(size_t bytes) {
    if (items_ > 0 && (items_ == page_size_ || bytes_ + bytes > kMaxPageBytes)) return false;
    ++items_;
    bytes_ += bytes;
    return true;
  }

 private:
  const size_t page_size_;
  size_t items_ = 0;
  size_t bytes_ = 0;
};

/// The effective page size of a request.
absl::StatusOr<size_t> PageSize(int32_t requested);

/// A token resuming after `last_key` for the query identified by `query` (the filter fields
/// concatenated by the caller).
std::string MakePageToken(std::string_view query, std::string_view last_key);

/// The last key of a token; "" for an empty token. InvalidArgument for a malformed token or
/// one made for another query.
absl::StatusOr<std::string> ParsePageToken(std::string_view token, std::string_view query);

}  // namespace rxfleet::server
