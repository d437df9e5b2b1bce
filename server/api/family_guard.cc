#include "server/api/family_guard.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/chips/family.h"
#include "common/proto/convert.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

constexpr size_t kMaxNamedAdapters = 20;

bool ObserveOnlyFamily(std::string_view name) {
  absl::StatusOr<common::ChipFamily> family = common::ParseChipFamily(name);
  return family.ok() && !common::FamilyManaged(*family);
}

}  // namespace

bool IsObserveOnly(const v1::Adapter& adapter) {
  return ObserveOnlyFamily(adapter.status().family());
}

std::string ObserveOnlyReason(const v1::Adapter& adapter) {
  const v1::AdapterStatus& s = adapter.status();
  return absl::StrCat("observe-only chip family ", s.family(), " (",
                      s.chip().empty() ? "unknown chip" : s.chip(),
                      "): rxfleet reads its RX aggregation registers and never writes them");
}

std::vector<const v1::Adapter*> ObserveOnlyMatches(const common::Selector& selector,
                                                   const std::vector<v1::Adapter>& adapters) {
  std::vector<const v1::Adapter*> out;
  for (const v1::Adapter& adapter : adapters) {
    if (!IsObserveOnly(adapter)) continue;
    const common::AdapterAttributes attributes = common::AdapterAttributesFromProto(
        adapter, common::LabelsFromProto(adapter.metadata().labels()));
    if (common::Matches(selector, attributes)) out.push_back(&adapter);
  }
  return out;
}

absl::Status RefuseSettingsOnObserveOnly(std::string_view what, const common::Selector& selector,
                                         const std::vector<v1::Adapter>& adapters) {
  std::vector<std::string> families;
  for (const std::string& family : selector.families) {
    if (ObserveOnlyFamily(family)) families.push_back(family);
  }
  const std::vector<const v1::Adapter*> matched = ObserveOnlyMatches(selector, adapters);
  if (families.empty() && matched.empty()) return absl::OkStatus();
  std::string message =
      absl::StrCat(ToAbslView(what),
                   " sets RX aggregation settings on observe-only adapters, which rxfleet "
                   "never writes (rtw88 rewrites them every 2 s; mt76 keeps aggregation off "
                   "because its RX path takes one frame per URB)");
  if (!families.empty()) {
    absl::StrAppend(&message, "; spec.selector.families lists ", absl::StrJoin(families, ", "));
  }
  if (!matched.empty()) {
    std::vector<std::string> names;
    for (size_t i = 0; i < matched.size() && i < kMaxNamedAdapters; ++i) {
      const v1::Adapter& a = *matched[i];
      names.push_back(absl::StrCat(a.host_id(), "/", a.metadata().name(), " (", a.status().family(),
                                   " ", a.status().chip(), ")"));
    }
    absl::StrAppend(&message, "; it matches ", absl::StrJoin(names, ", "));
    if (matched.size() > kMaxNamedAdapters) {
      absl::StrAppend(&message, " and ", matched.size() - kMaxNamedAdapters, " more");
    }
  }
  absl::StrAppend(&message, "; narrow spec.selector (e.g. families: [rtw89])");
  return absl::FailedPreconditionError(message);
}

}  // namespace rxfleet::server
