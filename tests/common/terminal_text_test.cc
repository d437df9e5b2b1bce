#include "common/terminal_text.h"

#include <gtest/gtest.h>

#include <string>

namespace rxfleet::common {
namespace {

TEST(TerminalSafeTest, CleanTextIsUnchanged) {
  EXPECT_EQ(TerminalSafe("rtl8922au hold 32µs, port-2-2 (0bda:8912)"),
            "rtl8922au hold 32µs, port-2-2 (0bda:8912)");
  EXPECT_EQ(TerminalSafe(""), "");
  EXPECT_EQ(TerminalSafe("{\"a\": \"\\u001b\"}\n", /*keep_newlines=*/true),
            "{\"a\": \"\\u001b\"}\n");
}

TEST(TerminalSafeTest, EscapeSequencesBecomeVisible) {
  // Clear screen, cursor home, then fake text: what a hostile agent put in its product string.
  EXPECT_EQ(TerminalSafe("\x1b[2J\x1b[Hall good"), "\\u001b[2J\\u001b[Hall good");
  // OSC window title ending with BEL.
  EXPECT_EQ(TerminalSafe("\x1b]0;pwned\x07"), "\\u001b]0;pwned\\u0007");
  EXPECT_EQ(TerminalSafe(std::string("a\0b", 3)), "a\\u0000b");
  EXPECT_EQ(TerminalSafe("del\x7f"), "del\\u007f");
}

TEST(TerminalSafeTest, CarriageReturnsAndNewlines) {
  EXPECT_EQ(TerminalSafe("ok\rFAKE"), "ok\\u000dFAKE");
  EXPECT_EQ(TerminalSafe("a\nb\tc"), "a\\u000ab\\u0009c");
  EXPECT_EQ(TerminalSafe("a\nb\tc\r", /*keep_newlines=*/true), "a\nb\tc\\u000d");
}

TEST(TerminalSafeTest, C1ControlsBidiOverridesAndBadUtf8) {
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "31m"),
            "\\u009b31m");  // one-character CSI
  EXPECT_EQ(TerminalSafe("abc\xe2\x80\xae"
                         "fed"),
            "abc\\u202efed");
  EXPECT_EQ(TerminalSafe("\x9b"
                         "31m"),
            "\\x9b31m");                                       // a lone C1 byte, not UTF-8
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
  EXPECT_EQ(TerminalSafe("cut\xe2\x82"), "cut\\xe2\\x82");     // truncated sequence
}

TEST(TerminalSafeTest, IncompleteTails) {
  EXPECT_EQ(IncompleteUtf8Tail("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("32\xc2"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("32\xc2\xb5"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("\xf0\x9f\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8Tail(""), 0u);
}

}  // namespace
}  // namespace rxfleet::common
