#include "common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

void WriteLine(LogLevel level, std::string_view message, bool journal) {
  const std::string line = FormatLogLine(level, message, journal);
  // One write per line: concurrent writers never interleave within a line. A failed write to
  // stderr has nowhere to be reported.
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

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
  absl::StrAppend(&line, ToAbslView(LogLevelName(level)), " ", ToAbslView(message), "\n");
  return line;
}

bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  return stream != nullptr && stream[0] != '\0';
}

LogSink StderrLogSink(LogLevel min_level) {
  const bool journal = StderrIsJournal();
  return [min_level, journal](LogLevel level, std::string_view message) {
    if (static_cast<int>(level) > static_cast<int>(min_level)) return;
    WriteLine(level, message, journal);
  };
}

void Log(LogLevel level, std::string_view message) {
  static const bool journal = StderrIsJournal();
  WriteLine(level, message, journal);
}

}  // namespace rxfleet::common
