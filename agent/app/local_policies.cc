#include "agent/app/local_policies.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rxfleet::agent {
namespace {

std::string StatSummary(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return absl::StrFormat("%o:%d:%d.%09d:%d", st.st_mode, st.st_size, st.st_mtim.tv_sec,
                         st.st_mtim.tv_nsec, st.st_ino);
}

bool IsPolicyFileName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  return name.ends_with(".yaml") || name.ends_with(".yml");
}

}  // namespace

LocalPolicyFiles::LocalPolicyFiles(std::vector<std::string> paths) : paths_(std::move(paths)) {}

absl::StatusOr<std::vector<common::Policy>> LocalPolicyFiles::Load() const {
  return common::LoadPolicyFiles(paths_);
}

std::string LocalPolicyFiles::Fingerprint() const {
  std::string out;
  for (const std::string& path : paths_) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      absl::StrAppend(&out, path, "=", StatSummary(path), ";");
      continue;
    }
    // A directory's own mtime changes with any file in it; only policy files matter.
    absl::StrAppend(&out, path, "=dir;");
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();
      if (IsPolicyFileName(name)) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string file = path + "/" + name;
      absl::StrAppend(&out, " ", name, "=", StatSummary(file), ";");
    }
  }
  return out;
}

}  // namespace rxfleet::agent
