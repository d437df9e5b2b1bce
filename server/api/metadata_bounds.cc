#include "server/api/metadata_bounds.h"

#include "absl/strings/str_cat.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

absl::Status Refused(std::string_view object, std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(ToAbslView(object), ": ", ToAbslView(field), ToAbslView(why)));
}

}  // namespace

absl::Status ValidateObjectMetadata(std::string_view object, const v1::ObjectMeta& meta) {
  if (meta.labels_size() > static_cast<int>(kMaxObjectLabels)) {
    return Refused(
        object, "metadata.labels",
        absl::StrCat(": ", meta.labels_size(), " entries, at most ", kMaxObjectLabels, " allowed"));
  }
  for (const auto& [key, value] : meta.labels()) {
    absl::Status s = common::ValidateLabelKey(key);
    if (s.ok()) s = common::ValidateLabelValue(value);
    if (!s.ok()) return Refused(object, "metadata.labels", absl::StrCat(": ", s.message()));
  }
  if (meta.annotations_size() > static_cast<int>(kMaxAnnotations)) {
    return Refused(object, "metadata.annotations",
                   absl::StrCat(": ", meta.annotations_size(), " entries, at most ",
                                kMaxAnnotations, " allowed"));
  }
  size_t total = 0;
  for (const auto& [key, value] : meta.annotations()) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
      return Refused(object, "metadata.annotations", absl::StrCat(": ", s.message()));
    }
    if (value.size() > kMaxAnnotationValueLength) {
      return Refused(object, absl::StrCat("metadata.annotations.", key),
                     absl::StrCat(" is ", value.size(), " characters long, at most ",
                                  kMaxAnnotationValueLength, " allowed"));
    }
    total += key.size() + value.size();
  }
  if (total > kMaxAnnotationBytes) {
    return Refused(object, "metadata.annotations",
                   absl::StrCat(": ", total, " bytes of keys and values, at most ",
                                kMaxAnnotationBytes, " allowed"));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
