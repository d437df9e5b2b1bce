// common/regular_file and the policy files read through it: FIFOs, directories and huge files
// are refused without blocking or reading; an unreadable file names the OS reason.
#include "common/regular_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/policy/policy.h"

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

class RegularFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "rxfleet-file-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string File(const std::string& name, const std::string& contents) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(RegularFileTest, ReadsARegularFile) {
  absl::StatusOr<std::string> text = ReadRegularFile(File("a", "hello"), 16);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello");
}

TEST_F(RegularFileTest, RefusesMissingNonRegularAndOversizedFiles) {
  absl::Status missing = ReadRegularFile((dir_ / "none").string(), 16).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("No such file or directory"));

  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::Status not_regular = ReadRegularFile(fifo, 16).status();  // returns, never blocks
  EXPECT_EQ(not_regular.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_regular.message(), HasSubstr("is not a regular file"));
  EXPECT_EQ(ReadRegularFile(dir_.string(), 16).status().code(),
            absl::StatusCode::kFailedPrecondition);

  absl::Status big = ReadRegularFile(File("big", std::string(17, 'x')), 16).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(big.message(), HasSubstr("has 17 bytes, more than 16"));
}

// Runs `check` as an unprivileged user when the test runs as root (root reads any file), in
// a child process; returns whether it held.
bool HoldsWithoutPrivileges(const std::function<bool()>& check) {
  if (::geteuid() != 0) return check();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    ::_exit(check() ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// An unreadable policy file said only "<path>: cannot open".
TEST_F(RegularFileTest, AnUnreadablePolicyFileNamesTheOsReason) {
  const std::string path = File("p.yaml",
                                "apiVersion: rxfleet/v1\nkind: RxAggPolicy\nmetadata:\n  name: p\n"
                                "spec:\n  settings:\n    hold: 32us\n");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  EXPECT_TRUE(HoldsWithoutPrivileges([&] {
    absl::StatusOr<std::vector<Policy>> loaded = LoadPolicyFiles({path});
    return loaded.status().code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(loaded.status().message(),
                             absl::StrCat(path, ": cannot open: Permission denied"));
  }));
}

}  // namespace
}  // namespace rxfleet::common
