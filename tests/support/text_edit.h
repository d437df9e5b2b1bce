#pragma once

// Editing a test document: one piece of it replaced, for tests of one validation rule each.

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace rxfleet::testing {

/// `text` with `from` replaced by `to`. `from` must occur exactly once; otherwise the calling
/// test fails (non-fatally) and `text` comes back unchanged when `from` is absent.
inline std::string ReplacedOnce(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace rxfleet::testing
