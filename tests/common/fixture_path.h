#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace rxfleet::common::testing {

// Repository root: RXFLEET_SOURCE_DIR (set by rxfleet_test), else the working directory.
inline std::string SourceDir() {
  const char* dir = std::getenv("RXFLEET_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// Path of a file under tests/fixtures/policies.
inline std::string PolicyFixture(const std::string& name) {
  return SourceDir() + "/tests/fixtures/policies/" + name;
}

// Whole file as a string; empty if unreadable (tests assert on content).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace rxfleet::common::testing
