#include "tests/support/paths.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::testing {
namespace {

std::string FromEnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  if (value != nullptr && *value != '\0') return value;
  return fallback;
}

std::string Join(const std::string& root, std::string_view relative) {
  if (!relative.empty() && relative.front() == '/') return std::string(relative);
  return root + "/" + std::string(relative);
}

}  // namespace

std::string SourceDir() { return FromEnvOr("RXFLEET_SOURCE_DIR", RXFLEET_DEFAULT_SOURCE_DIR); }

std::string BinaryDir() { return FromEnvOr("RXFLEET_BINARY_DIR", RXFLEET_DEFAULT_BINARY_DIR); }

std::string BinaryPath(std::string_view target_relative_path) {
  return Join(BinaryDir(), target_relative_path);
}

std::string SourcePath(std::string_view source_relative_path) {
  return Join(SourceDir(), source_relative_path);
}

std::string EmulatorPath() { return BinaryPath("tools/emulator/rxfleet-emulate"); }

std::string LabPath(std::string_view name) {
  std::string path = SourcePath("tests/labs/" + std::string(name));
  if (!absl::EndsWith(path, ".yaml")) absl::StrAppend(&path, ".yaml");
  return path;
}

TempDir::TempDir(std::string_view prefix) {
  const std::string base = FromEnvOr("TMPDIR", "/tmp");
  std::string templ = base + "/" + std::string(prefix) + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    std::perror(("TempDir: mkdtemp " + templ).c_str());
    std::abort();
  }
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::File(std::string_view name) const { return (path_ / name).string(); }

absl::StatusOr<std::string> ReadTextFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

absl::Status WriteTextFile(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot create ", path.string()));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not valid JSON"));
  }
  return parsed;
}

}  // namespace rxfleet::testing
