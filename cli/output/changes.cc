#include "cli/output/changes.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/output/format.h"
#include "cli/output/table.h"
#include "common/string_view_compat.h"

namespace rxfleet::cli {

std::string DescribeSettingsChange(const v1::RxAggSettings& before,
                                   const v1::RxAggSettings& after) {
  std::vector<std::string> changes;
  for (const std::string& field : SettingsFieldNames()) {
    auto old_value = FormatSettingsField(before, field);
    auto new_value = FormatSettingsField(after, field);
    if (old_value == new_value) continue;
    changes.push_back(absl::StrCat(field, " ", old_value.value_or("<unset>"), " -> ",
                                   new_value.value_or("<unset>")));
  }
  return absl::StrJoin(changes, ", ");
}

void PrintAffectedAdapters(const google::protobuf::RepeatedPtrField<v1::AffectedAdapter>& affected,
                           std::ostream& out) {
  if (affected.empty()) return;
  std::vector<const v1::AffectedAdapter*> sorted;
  for (const auto& a : affected) sorted.push_back(&a);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return std::tie(a->adapter().host_id(), a->adapter().name()) <
           std::tie(b->adapter().host_id(), b->adapter().name());
  });
  Table table({"HOST", "ADAPTER", "CHANGE"});
  for (const auto* a : sorted) {
    std::string change = DescribeSettingsChange(a->before(), a->after());
    table.AddRow({a->adapter().host_id(), a->adapter().name(), change.empty() ? "-" : change});
  }
  table.Print(out, "  ");
}

std::string LineDiff(std::string_view before, std::string_view after) {
  std::vector<absl::string_view> a =
      absl::StrSplit(common::ToAbslView(before), '\n', absl::SkipEmpty());
  std::vector<absl::string_view> b =
      absl::StrSplit(common::ToAbslView(after), '\n', absl::SkipEmpty());
  // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
  std::vector<std::vector<size_t>> lcs(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;) {
    for (size_t j = b.size(); j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::string out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      absl::StrAppend(&out, "  ", a[i++], "\n");
      ++j;
    } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      absl::StrAppend(&out, "- ", a[i++], "\n");  // removals before additions
    } else {
      absl::StrAppend(&out, "+ ", b[j++], "\n");
    }
  }
  return out;
}

}  // namespace rxfleet::cli
