#pragma once

// Text from the network (agents' chip and product names, diagnoses, conditions, NACK details,
// event messages) and from operators' files (YAML names) made safe for a terminal: escape
// sequences and control characters could otherwise move the cursor, rewrite what an operator
// reads, retitle the window or hide text. rxfleetctl passes every human-readable line it prints
// through TerminalSafe(); structured output (-o json/yaml) stays data (JSON escapes controls).

#include <string>
#include <string_view>

namespace rxfleet::common {

/// `text` with every byte sequence a terminal could act on replaced by a visible escape:
///  - C0 controls U+0000..U+001F (ESC included, so every escape sequence), DEL U+007F, C1
///    controls U+0080..U+009F (U+009B is a one-character CSI) and the bidirectional overrides
///    and isolates U+202A..U+202E, U+2066..U+2069 as `\uNNNN` (ESC -> `\u001b`), which is
///    also a valid JSON escape, so JSON text passes through with the same meaning; newline and
///    tab are kept when `keep_newlines` is set (multi-line output), else escaped too;
///  - bytes that are not valid UTF-8 as `\xNN`.
/// Everything else (printable ASCII, valid UTF-8 such as "µs") is unchanged, so clean text
/// round-trips byte for byte. Pure; O(n).
std::string TerminalSafe(std::string_view text, bool keep_newlines = false);

/// Number of bytes at the end of `text` that start a UTF-8 sequence it does not complete
/// (0..3), for callers that sanitise a stream in chunks and keep those bytes for the next one.
size_t IncompleteUtf8Tail(std::string_view text);

}  // namespace rxfleet::common
