#include "agent/collectors/collector.h"

#include <unistd.h>

#include <string>

namespace rxfleet::agent {

void LogToStderr(std::string_view line) {
  std::string text = "rxfleet-agent: ";
  text.append(line);
  text.push_back('\n');
  // One write(2) per line so lines from different threads never interleave.
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n <= 0) return;  // nowhere to report a failing stderr
    data += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace rxfleet::agent
