#include "agent/app/host_facts.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Trim(absl::string_view text) {
  while (!text.empty() && (text.back() == '\0' || absl::ascii_isspace(text.back()))) {
    text.remove_suffix(1);
  }
  return std::string(absl::StripLeadingAsciiWhitespace(text));
}

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// "Raspberry Pi" models; nullopt if `rest` (the text after "Raspberry Pi ") is not recognised.
std::optional<std::string> RaspberryPiBoard(absl::string_view rest) {
  auto leading_number = [](absl::string_view text) {
    size_t n = 0;
    while (n < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[n]))) ++n;
    return std::string(text.substr(0, n));
  };
  if (absl::ConsumePrefix(&rest, "Compute Module ")) {
    const std::string n = leading_number(rest);
    if (!n.empty()) return "cm" + n;
    return std::nullopt;
  }
  if (absl::ConsumePrefix(&rest, "Zero")) {
    rest = absl::StripLeadingAsciiWhitespace(rest);
    const std::string n = leading_number(rest);
    return "pizero" + n;
  }
  if (absl::StartsWith(rest, "Model ")) return "pi1";  // Pi 1 A/B/A+/B+ name no number
  const std::string n = leading_number(rest);
  if (!n.empty()) return "pi" + n;
  return std::nullopt;
}

}  // namespace

UnameInfo ReadUname() {
  UnameInfo info;
  struct utsname u;
  if (::uname(&u) == 0) {
    info.nodename = u.nodename;
    info.release = u.release;
    info.machine = u.machine;
  }
  return info;
}

std::string SanitizeLabelValue(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok = IsAlnum(c) || c == '.' || c == '_' || c == '-';
    if (ok) {
      out.push_back(c);
    } else if (out.empty() || out.back() != '-') {
      out.push_back('-');
    }
  }
  if (out.size() > 63) out.resize(63);
  size_t begin = 0;
  while (begin < out.size() && !IsAlnum(out[begin])) ++begin;
  size_t end = out.size();
  while (end > begin && !IsAlnum(out[end - 1])) --end;
  return out.substr(begin, end - begin);
}

std::optional<std::string> NormalizeBoardModel(std::string_view model_text) {
  std::string model = Trim(common::ToAbslView(model_text));
  if (model.empty()) return std::nullopt;
  absl::string_view rest = model;
  if (absl::ConsumePrefix(&rest, "Raspberry Pi ")) {
    if (auto board = RaspberryPiBoard(rest)) return board;
  }
  // Generic: drop a trailing " Rev x.y", lower-case, sanitise.
  std::string generic = model;
  if (const size_t rev = generic.rfind(" Rev "); rev != std::string::npos) generic.resize(rev);
  generic = SanitizeLabelValue(absl::AsciiStrToLower(generic));
  if (generic.empty()) return std::nullopt;
  return generic;
}

std::map<std::string, std::string> DetectHostLabels(const std::string& procfs_root,
                                                    const UnameInfo& uname) {
  std::map<std::string, std::string> labels;
  if (std::string arch = SanitizeLabelValue(uname.machine); !arch.empty()) labels["arch"] = arch;
  if (std::string kernel = SanitizeLabelValue(uname.release); !kernel.empty()) {
    labels["kernel"] = kernel;
  }
  if (auto model = ReadFile(procfs_root + "/device-tree/model")) {
    if (auto board = NormalizeBoardModel(*model)) labels["board"] = *board;
  }
  return labels;
}

HostFacts ReadHostFacts(const std::string& procfs_root, const UnameInfo& uname) {
  HostFacts facts;
  facts.hostname = uname.nodename;
  facts.kernel_release = uname.release;
  facts.arch = uname.machine;
  if (auto os_release = ReadFile("/etc/os-release")) {
    for (absl::string_view line : absl::StrSplit(*os_release, '\n')) {
      if (absl::ConsumePrefix(&line, "PRETTY_NAME=")) {
        line = absl::StripPrefix(absl::StripSuffix(line, "\""), "\"");
        facts.os = std::string(line);
      }
    }
  }
  if (auto cpuinfo = ReadFile(procfs_root + "/cpuinfo")) {
    for (absl::string_view line : absl::StrSplit(*cpuinfo, '\n')) {
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string key = Trim(line.substr(0, colon));
      const std::string value = Trim(line.substr(colon + 1));
      if ((key == "model name" || key == "Model") && facts.cpu_model.empty()) {
        facts.cpu_model = value;
      }
    }
  }
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  facts.cpu_count = cpus > 0 ? static_cast<uint32_t>(cpus) : 0;
  if (auto model = ReadFile(procfs_root + "/device-tree/model")) facts.board_model = Trim(*model);
  if (auto meminfo = ReadFile(procfs_root + "/meminfo")) {
    for (absl::string_view line : absl::StrSplit(*meminfo, '\n')) {
      if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
      line = absl::StripAsciiWhitespace(line);
      uint64_t kib = 0;
      if (absl::SimpleAtoi(absl::StripSuffix(line, " kB"), &kib)) facts.memory_bytes = kib * 1024;
    }
  }
  if (auto boot_id = ReadFile(procfs_root + "/sys/kernel/random/boot_id")) {
    facts.boot_id = Trim(*boot_id);
  }
  return facts;
}

void HostFactsToProto(const HostFacts& facts, v1::HostInfo* out) {
  out->set_hostname(facts.hostname);
  out->set_kernel_release(facts.kernel_release);
  out->set_arch(facts.arch);
  out->set_os(facts.os);
  out->set_cpu_model(facts.cpu_model);
  out->set_cpu_count(facts.cpu_count);
  out->set_board_model(facts.board_model);
  out->set_memory_bytes(facts.memory_bytes);
  out->set_boot_id(facts.boot_id);
}

std::string DefaultHostId(const std::string& hostname) {
  std::string id;
  for (char c : hostname) {
    const char lower = absl::ascii_tolower(static_cast<unsigned char>(c));
    const bool ok = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') ||
                    lower == '-' || lower == '.';
    id.push_back(ok ? lower : '-');
  }
  if (id.size() > 63) id.resize(63);
  while (!id.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(id.back()))) id.pop_back();
  size_t begin = 0;
  while (begin < id.size() && !absl::ascii_isalnum(static_cast<unsigned char>(id[begin]))) ++begin;
  id = id.substr(begin);
  return id.empty() ? "localhost" : id;
}

}  // namespace rxfleet::agent
