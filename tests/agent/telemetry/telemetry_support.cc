#include "tests/agent/telemetry/telemetry_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rxfleet::agent::telemetry {
namespace {

// Closes a socket on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Debian's Abseil has its own string_view type.
absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool IsNameChar(char c, bool first) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && absl::ascii_isdigit(static_cast<unsigned char>(c)));
}

// Parses `{a="x",b="y"}` starting at text[*pos] == '{'; leaves *pos after the '}'.
bool ParseLabels(absl::string_view text, size_t* pos, std::map<std::string, std::string>* out) {
  size_t i = *pos + 1;
  while (i < text.size()) {
    if (text[i] == '}') {
      *pos = i + 1;
      return true;
    }
    const size_t name_start = i;
    while (i < text.size() && IsNameChar(text[i], i == name_start)) ++i;
    if (i == name_start || i + 1 >= text.size() || text[i] != '=' || text[i + 1] != '"') {
      return false;
    }
    const std::string name(text.substr(name_start, i - name_start));
    i += 2;
    std::string value;
    bool closed = false;
    while (i < text.size()) {
      const char c = text[i++];
      if (c == '"') {
        closed = true;
        break;
      }
      if (c != '\\') {
        value.push_back(c);
        continue;
      }
      if (i >= text.size()) return false;
      const char escaped = text[i++];
      value.push_back(escaped == 'n' ? '\n' : escaped);
    }
    if (!closed) return false;
    (*out)[name] = std::move(value);
    if (i < text.size() && text[i] == ',') ++i;
  }
  return false;
}

bool Matches(const Sample& sample, std::string_view name,
             const std::map<std::string, std::string>& labels) {
  if (sample.name != name) return false;
  for (const auto& [key, value] : labels) {
    auto it = sample.labels.find(key);
    if (it == sample.labels.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(int port, std::string_view target) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const sockaddr_in addr = Loopback(port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to port ", port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", View(target), " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\n\r\n");
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
  }
  std::string raw;
  char buf[16384];
  while (true) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DeadlineExceededError(absl::StrCat("recv: ", std::strerror(errno)));
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  const size_t split = raw.find("\r\n\r\n");
  int status = 0;
  if (split == std::string::npos || !absl::StartsWith(raw, "HTTP/1.") || raw.size() < 12 ||
      !absl::SimpleAtoi(raw.substr(9, 3), &status)) {
    return absl::DataLossError(absl::StrCat("malformed HTTP answer: ", raw.substr(0, 200)));
  }
  return HttpResponse{status, raw.substr(split + 4)};
}

absl::StatusOr<std::vector<Sample>> ParseExposition(std::string_view text) {
  std::vector<Sample> samples;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(View(text), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&] {
      return absl::InvalidArgumentError(absl::StrCat("exposition line ", line_number, ": ", line));
    };
    Sample sample;
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
    if (i == 0) return bad();
    sample.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{' && !ParseLabels(line, &i, &sample.labels)) return bad();
    const std::vector<absl::string_view> rest =
        absl::StrSplit(line.substr(i), ' ', absl::SkipEmpty());
    if (rest.empty() || rest.size() > 2) return bad();
    const std::string value(rest[0]);
    char* end = nullptr;
    sample.value = std::strtod(value.c_str(), &end);
    if (end != value.c_str() + value.size()) return bad();
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> FindValue(const std::vector<Sample>& samples, std::string_view name,
                                const std::map<std::string, std::string>& labels) {
  for (const Sample& s : samples) {
    if (Matches(s, name, labels)) return s.value;
  }
  return std::nullopt;
}

std::optional<std::map<std::string, std::string>> FindLabels(
    const std::vector<Sample>& samples, std::string_view name,
    const std::map<std::string, std::string>& labels) {
  for (const Sample& s : samples) {
    if (Matches(s, name, labels)) return s.labels;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<DocQuery>> ParseOperatorQueries(std::string_view markdown) {
  constexpr absl::string_view kHeading = "## PromQL for operators";
  std::vector<DocQuery> queries;
  bool in_section = false;
  bool seen_section = false;
  bool in_block = false;
  std::vector<std::string> block;
  std::string description;
  int line_number = 0;
  int block_start = 0;
  for (absl::string_view line : absl::StrSplit(View(markdown), '\n')) {
    ++line_number;
    if (!in_block && absl::StartsWith(line, "## ")) {
      in_section = absl::StripTrailingAsciiWhitespace(line) == kHeading;
      seen_section |= in_section;
      continue;
    }
    if (!in_section) continue;
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (in_block) {
      if (stripped == "```") {
        in_block = false;
        DocQuery query;
        query.description = description;
        query.promql = absl::StrJoin(block, " ");
        constexpr std::string_view kNeeds = "[needs: ";
        if (const size_t at = description.find(kNeeds); at != std::string::npos) {
          const size_t close = description.find(']', at);
          if (close == std::string::npos) {
            return absl::InvalidArgumentError(
                absl::StrCat("docs line ", block_start, ": unclosed [needs: marker"));
          }
          query.needs = description.substr(at + kNeeds.size(), close - at - kNeeds.size());
        }
        if (query.promql.empty()) {
          return absl::InvalidArgumentError(absl::StrCat("docs line ", block_start, ": empty"));
        }
        queries.push_back(std::move(query));
        block.clear();
      } else if (!stripped.empty()) {
        block.emplace_back(stripped);
      }
      continue;
    }
    if (stripped == "```promql") {
      in_block = true;
      block_start = line_number;
    } else if (!stripped.empty()) {
      description = std::string(stripped);
    }
  }
  if (!seen_section) {
    return absl::InvalidArgumentError(absl::StrCat("no \"", kHeading, "\" section"));
  }
  if (in_block) {
    return absl::InvalidArgumentError(
        absl::StrCat("docs line ", block_start, ": ```promql block never closed"));
  }
  if (queries.empty()) return absl::InvalidArgumentError("no ```promql block in the section");
  return queries;
}

absl::StatusOr<int> PickFreePort() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
  }
  return ntohs(addr.sin_port);
}

absl::StatusOr<int> WaitForMetricsPort(testing::ChildProcess& child, absl::Duration timeout) {
  constexpr std::string_view kPrefix = "metrics endpoint on http://";
  absl::StatusOr<std::string> line =
      child.WaitForLineContaining(testing::Stream::kStderr, kPrefix, timeout);
  if (!line.ok()) return line.status();
  std::string_view address(*line);
  address = address.substr(address.find(kPrefix) + kPrefix.size());
  address = address.substr(0, address.find('/'));
  int port = 0;
  if (!absl::SimpleAtoi(View(address.substr(address.rfind(':') + 1)), &port) || port <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("no port in: ", *line));
  }
  return port;
}

std::string UrlEncode(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      constexpr char kHex[] = "0123456789ABCDEF";
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

}  // namespace rxfleet::agent::telemetry
