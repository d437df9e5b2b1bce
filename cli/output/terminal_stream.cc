#include "cli/output/terminal_stream.h"

#include <cstring>
#include <string_view>

#include "common/terminal_text.h"

namespace rxfleet::cli {

TerminalSafeBuf::~TerminalSafeBuf() { Drain(/*final=*/true); }

TerminalSafeBuf::int_type TerminalSafeBuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  pending_.push_back(traits_type::to_char_type(ch));
  if (ch == '\n') Drain(/*final=*/false);
  return ch;
}

std::streamsize TerminalSafeBuf::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  if (std::memchr(s, '\n', static_cast<size_t>(n)) != nullptr) Drain(/*final=*/false);
  return n;
}

int TerminalSafeBuf::sync() {
  Drain(/*final=*/false);
  sink_.flush();
  return sink_.good() ? 0 : -1;
}

void TerminalSafeBuf::Drain(bool final) {
  if (pending_.empty()) return;
  const size_t keep = final ? 0 : common::IncompleteUtf8Tail(pending_);
  const size_t ready = pending_.size() - keep;
  if (ready == 0) return;
  sink_ << common::TerminalSafe(std::string_view(pending_).substr(0, ready),
                                /*keep_newlines=*/true);
  pending_.erase(0, ready);
}

TerminalSafeStream::TerminalSafeStream(std::ostream& sink, bool unit_buffered)
    : std::ostream(nullptr), buf_(sink) {
  rdbuf(&buf_);
  if (unit_buffered) setf(std::ios::unitbuf);
}

TerminalSafeStream::~TerminalSafeStream() { flush(); }

}  // namespace rxfleet::cli
