#include "cli/output/events.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cli/output/format.h"
#include "cli/output/table.h"

namespace rxfleet::cli {
namespace {

std::string OneLine(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\r\n", " "}, {"\n", " "}, {"\t", " "}});
}

}  // namespace

std::string EventObject(const v1::Event& event) {
  const auto& object = event.involved_object();
  if (object.name().empty()) return "fleet";
  std::string kind = absl::AsciiStrToLower(object.kind().empty() ? "object" : object.kind());
  if (!object.host_id().empty())
    return absl::StrCat(kind, "/", object.host_id(), "/", object.name());
  return absl::StrCat(kind, "/", object.name());
}

void PrintEventsSection(const std::vector<v1::Event>& events, absl::Time now, std::ostream& out) {
  if (events.empty()) {
    out << "Events:  <none>\n";
    return;
  }
  out << "Events:\n";
  Table table({"TYPE", "REASON", "AGE", "FROM", "MESSAGE"});
  for (const auto& event : events) {
    std::string age = FormatAge(AsTime(event.last_time()), now);
    if (event.count() > 1) {
      absl::StrAppend(&age, " (x", event.count(), " over ",
                      FormatAge(AsTime(event.first_time()), now), ")");
    }
    table.AddRow({EventTypeWord(event.type()), event.reason(), age,
                  event.source().empty() ? "-" : event.source(), OneLine(event.message())});
  }
  table.Print(out, "  ");
}

std::string FormatEventLine(const v1::Event& event) {
  absl::Time at = AsTime(event.last_time());
  std::string when = at == absl::InfinitePast()
                         ? "-"
                         : absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", at, absl::UTCTimeZone());
  std::string line = absl::StrCat(when, "  ", EventTypeWord(event.type()), "  ", event.reason(),
                                  "  ", EventObject(event), "  ", OneLine(event.message()));
  if (event.count() > 1) absl::StrAppend(&line, " (x", event.count(), ")");
  line.erase(line.find_last_not_of(' ') + 1);
  return line;
}

}  // namespace rxfleet::cli
