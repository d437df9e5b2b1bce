#include "common/terminal_text.h"

#include <cstdint>
#include <cstdio>

namespace rxfleet::common {
namespace {

void AppendHex(std::string& out, unsigned char byte) {
  char buf[5];
  std::snprintf(buf, sizeof(buf), "\\x%02x", byte);
  out += buf;
}

void AppendCodePoint(std::string& out, uint32_t code_point) {
  char buf[7];
  std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(code_point));
  out += buf;
}

// Length of the UTF-8 sequence starting at text[i] and its code point, or 0 if it is not a
// valid (shortest-form, non-surrogate) sequence.
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(k) & 0x3F);
  }
  if ((length == 3 && value < 0x800) || (length == 4 && (value < 0x10000 || value > 0x10FFFF)) ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    return 0;
  }
  *code_point = value;
  return length;
}

bool IsFormattingControl(uint32_t c) {
  return (c >= 0x80 && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

}  // namespace

std::string TerminalSafe(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (keep_newlines && (c == '\n' || c == '\t')) {
        out += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7F) {
        AppendCodePoint(out, c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    uint32_t code_point = 0;
    const size_t length = DecodeUtf8(text, i, &code_point);
    if (length == 0) {
      AppendHex(out, c);
      ++i;
    } else if (IsFormattingControl(code_point)) {
      AppendCodePoint(out, code_point);
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

size_t IncompleteUtf8Tail(std::string_view text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

}  // namespace rxfleet::common
