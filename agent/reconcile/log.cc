#include "agent/reconcile/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "info";
}

std::string FormatLogLine(LogLevel level, std::string_view message, bool journal) {
  std::string line;
  if (journal) absl::StrAppend(&line, "<", static_cast<int>(level), ">");
  absl::StrAppend(&line, common::ToAbslView(LogLevelName(level)), " ", common::ToAbslView(message),
                  "\n");
  return line;
}

LogSink StderrLogSink(LogLevel min_level) {
  const char* stream = std::getenv("JOURNAL_STREAM");
  const bool journal = stream != nullptr && stream[0] != '\0';
  return [min_level, journal](LogLevel level, std::string_view message) {
    if (static_cast<int>(level) > static_cast<int>(min_level)) return;
    const std::string line = FormatLogLine(level, message, journal);
    // One write per line: concurrent writers never interleave within a line. A failed write to
    // stderr has nowhere to be reported.
    (void)!::write(STDERR_FILENO, line.data(), line.size());
  };
}

}  // namespace rxfleet::agent
