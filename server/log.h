#pragma once

#include <string_view>

namespace rxfleet::server {

/// Severity of a server log line; the values are the syslog priorities journald understands.
enum class LogLevel : int { kError = 3, kWarning = 4, kInfo = 6 };

/// Writes one line "LEVEL message\n" to stderr with a single write(2), so concurrent lines
/// never interleave; under journald ($JOURNAL_STREAM set) the line starts with the sd-daemon
/// priority prefix ("<4>warning ...") so journald stores the right priority. Thread-safe.
void Log(LogLevel level, std::string_view message);

}  // namespace rxfleet::server
