#include "server/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {

void Log(LogLevel level, std::string_view message) {
  static const bool journal = [] {
    const char* stream = std::getenv("JOURNAL_STREAM");
    return stream != nullptr && stream[0] != '\0';
  }();
  std::string line;
  if (journal) absl::StrAppend(&line, "<", static_cast<int>(level), ">");
  const char* name = level == LogLevel::kError     ? "error"
                     : level == LogLevel::kWarning ? "warning"
                                                   : "info";
  absl::StrAppend(&line, name, " ", common::ToAbslView(message), "\n");
  // A failed write to stderr has nowhere to be reported.
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace rxfleet::server
