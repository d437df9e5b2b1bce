#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace rxfleet::testing {

/// Root of the source tree: $RXFLEET_SOURCE_DIR (set by ctest for every rxfleet_test), else
/// the source directory this library was configured from.
std::string SourceDir();

/// Root of the build tree: $RXFLEET_BINARY_DIR, else the configured build directory.
std::string BinaryDir();

/// Absolute path of a built file, e.g. BinaryPath("agent/rxfleet-agent").
std::string BinaryPath(std::string_view target_relative_path);

/// Absolute path of a source file, e.g. SourcePath("tests/fixtures/policies/a.yaml").
std::string SourcePath(std::string_view source_relative_path);

/// The emulator executable: BinaryPath("tools/emulator/rxfleet-emulate").
std::string EmulatorPath();

/// A shipped lab file under tests/labs/: LabPath("demo") or LabPath("demo.yaml"),
/// LabPath("timelines/be6500-reenumerate.yaml"). ".yaml" is appended when absent.
std::string LabPath(std::string_view name);

/// A unique directory (mkdtemp below $TMPDIR or /tmp) removed with its contents on
/// destruction. Aborts the test binary if the directory cannot be created.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "rxfleet-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// path() / name, as a string.
  std::string File(std::string_view name) const;

 private:
  std::filesystem::path path_;
};

/// Reads a whole file. NotFound if it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::filesystem::path& path);

/// Writes (replaces) a whole file. Internal on I/O failure.
absl::Status WriteTextFile(const std::filesystem::path& path, std::string_view contents);

/// Reads and parses a JSON file. NotFound if missing, InvalidArgument (with the parser's
/// message) if it is not valid JSON.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::filesystem::path& path);

}  // namespace rxfleet::testing
