#include "agent/collectors/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rxfleet::agent::text {

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

namespace {
bool Parse(std::string_view s, uint64_t* out, int base) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

bool ParseDecimal(std::string_view s, uint64_t* out) {
  // from_chars accepts no sign for unsigned types, so "-1" and "+1" fail here.
  return Parse(s, out, 10);
}

bool ParseHex(std::string_view s, uint64_t* out) { return Parse(s, out, 16); }

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR || err == ENODEV || err == ENXIO) {
      return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(err)));
    }
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(err)));
  }
  std::string out;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      ::close(fd);
      // A netdev unregistered between open and read makes sysfs reads fail with ENODEV.
      if (err == ENODEV || err == ENOENT || err == ENXIO) {
        return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(err)));
      }
      return absl::InternalError(absl::StrCat(path, ": read failed: ", std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace rxfleet::agent::text
