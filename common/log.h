#pragma once

// The log lines both daemons write: one line per message on stderr, "LEVEL message", with the
// sd-daemon priority prefix under journald. rxfleet-agent hands a LogSink to its parts (tests
// capture lines through it); rxfleet-server calls Log directly.

#include <functional>
#include <string>
#include <string_view>

namespace rxfleet::common {

/// Severity of a log line, ordered from most to least severe. The values are the syslog
/// priorities journald understands (sd-daemon(3): "<3>" error, "<4>" warning, "<6>" info,
/// "<7>" debug).
enum class LogLevel : int { kError = 3, kWarning = 4, kInfo = 6, kDebug = 7 };

/// "error", "warning", "info", "debug".
std::string_view LogLevelName(LogLevel level);

/// Receives one log message without level, prefix or trailing newline, e.g.
/// "adapter=port-2-2 chip=rtl8922au state applied: hold 32µs verified". Must be thread-safe.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

/// Formats one line: "LEVEL message\n", e.g. "info adapter=port-2-2 ...". With `journal` set
/// (stderr connected to journald, $JOURNAL_STREAM), the line starts with the sd-daemon priority
/// prefix ("<6>info ...") so journald stores the right priority.
std::string FormatLogLine(LogLevel level, std::string_view message, bool journal);

/// True when $JOURNAL_STREAM is set (stderr goes to journald).
bool StderrIsJournal();

/// A LogSink writing FormatLogLine lines to stderr with one write(2) each (concurrent lines never
/// interleave). Lines below `min_level` (less severe) are dropped. The journald prefix is used
/// when $JOURNAL_STREAM is set at the time of the call that creates the sink.
LogSink StderrLogSink(LogLevel min_level = LogLevel::kInfo);

/// Writes one FormatLogLine line to stderr with a single write(2), every level; the journald
/// prefix when $JOURNAL_STREAM was set at the first call. Thread-safe.
void Log(LogLevel level, std::string_view message);

}  // namespace rxfleet::common
