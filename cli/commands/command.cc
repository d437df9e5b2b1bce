#include "cli/commands/command.h"

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::cli {

absl::StatusOr<std::pair<std::string, std::string>> ParseAdapterRef(std::string_view ref) {
  const size_t slash = ref.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == ref.size() ||
      ref.find('/', slash + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter '", common::ToAbslView(ref),
                     "': expected HOST/ADAPTER, e.g. pi1/port-2-2 (adapter ids are unique per "
                     "host only)"));
  }
  return std::make_pair(std::string(ref.substr(0, slash)), std::string(ref.substr(slash + 1)));
}

void PrintNoResources(const Streams& streams) { *streams.err << "No resources found.\n"; }

}  // namespace rxfleet::cli
