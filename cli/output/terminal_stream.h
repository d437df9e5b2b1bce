#pragma once

// rxfleetctl's standard output and error as a terminal sees them: every byte written passes
// through common::TerminalSafe (newlines and tabs kept), so text from agents (chip, product,
// diagnoses, conditions, NACK details, event messages), from YAML files (names in errors) and
// from the server's error messages cannot move the cursor, recolour or retitle the terminal.
// JSON output is unchanged (JSON already escapes control characters; see TerminalSafe).

#include <ostream>
#include <streambuf>
#include <string>

namespace rxfleet::cli {

/// A streambuf writing sanitised text to `sink`: complete lines at once, and everything
/// pending on flush (an incomplete UTF-8 sequence at the end waits for its remaining bytes).
class TerminalSafeBuf final : public std::streambuf {
 public:
  explicit TerminalSafeBuf(std::ostream& sink) : sink_(sink) {}
  /// Writes what is pending, incomplete sequences escaped.
  ~TerminalSafeBuf() override;
  TerminalSafeBuf(const TerminalSafeBuf&) = delete;
  TerminalSafeBuf& operator=(const TerminalSafeBuf&) = delete;

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void Drain(bool final);

  std::ostream& sink_;
  std::string pending_;
};

/// An ostream over a TerminalSafeBuf; `unit_buffered` flushes after every output operation
/// (standard error: prompts appear before input is read).
class TerminalSafeStream final : public std::ostream {
 public:
  TerminalSafeStream(std::ostream& sink, bool unit_buffered);
  ~TerminalSafeStream() override;

 private:
  TerminalSafeBuf buf_;
};

}  // namespace rxfleet::cli
