#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::testing {
namespace {

using ::testing::HasSubstr;

TEST(RunProcessTest, CapturesBothStreamsAndExitCode) {
  ProcessResult r = RunProcess({"sh", "-c", "echo out; echo err >&2; exit 3"}, absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(RunProcessTest, LargeOutputOnBothStreamsDoesNotDeadlock) {
  ProcessResult r = RunProcess(
      {"sh", "-c", "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"}, absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text.size(), 300000u);
  EXPECT_EQ(r.stderr_text.size(), 300000u);
}

TEST(RunProcessTest, ExtraEnvironmentReplacesInherited) {
  ProcessResult r = RunProcess({"sh", "-c", "echo \"$HOME:$RXFLEET_X\""}, absl::Seconds(10),
                               {"HOME=/nowhere", "RXFLEET_X=1"});
  EXPECT_EQ(r.stdout_text, "/nowhere:1\n");
}

TEST(RunProcessTest, KillsOnTimeout) {
  ProcessResult r = RunProcess({"sleep", "30"}, absl::Milliseconds(200));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
}

TEST(RunProcessTest, MissingProgramIsReported) {
  ProcessResult r = RunProcess({"/nonexistent/program"}, absl::Seconds(5));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.stderr_text.empty());
}

TEST(ChildProcessTest, WaitsForLinesInOrderAndTerminates) {
  auto child =
      ChildProcess::Start({"sh", "-c", "echo ready; echo second; echo warn >&2; exec sleep 30"});
  ASSERT_TRUE(child.ok()) << child.status();
  auto first = (*child)->WaitForLineContaining(Stream::kStdout, "e", absl::Seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "ready");
  auto second = (*child)->WaitForLineContaining(Stream::kStdout, "e", absl::Seconds(10));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, "second");
  EXPECT_TRUE((*child)->WaitForLineContaining(Stream::kStderr, "warn", absl::Seconds(10)).ok());
  EXPECT_FALSE((*child)->Wait(absl::Milliseconds(50)).ok());
  EXPECT_EQ((*child)->Terminate(), 128 + SIGTERM);
  EXPECT_FALSE((*child)->running());
}

TEST(ChildProcessTest, DeadlineAndEndOfStreamAreErrors) {
  auto child = ChildProcess::Start({"sh", "-c", "echo one; sleep 1; echo two"});
  ASSERT_TRUE(child.ok());
  auto missing = (*child)->WaitForLineContaining(Stream::kStdout, "zzz", absl::Milliseconds(100));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  auto ended = (*child)->WaitForLineContaining(Stream::kStdout, "zzz", absl::Seconds(10));
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(ended.status().message()), HasSubstr("two"));
  auto code = (*child)->Wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
}

TEST(PathsTest, TempDirIsRemovedAndJsonIsRead) {
  std::filesystem::path kept;
  {
    TempDir dir;
    kept = dir.path();
    ASSERT_TRUE(std::filesystem::is_directory(kept));
    ASSERT_TRUE(WriteTextFile(dir.File("a.json"), R"({"x": [1, 2]})").ok());
    auto json = ReadJsonFile(dir.File("a.json"));
    ASSERT_TRUE(json.ok()) << json.status();
    EXPECT_EQ((*json)["x"][1], 2);
    ASSERT_TRUE(WriteTextFile(dir.File("bad.json"), "{").ok());
    EXPECT_EQ(ReadJsonFile(dir.File("bad.json")).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ReadJsonFile(dir.File("none.json")).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(PathsTest, PathsComeFromTheBuild) {
  EXPECT_THAT(EmulatorPath(), HasSubstr("tools/emulator/rxfleet-emulate"));
  EXPECT_THAT(LabPath("demo"), HasSubstr("tests/labs/demo.yaml"));
  EXPECT_EQ(LabPath("demo.yaml"), LabPath("demo"));
  EXPECT_TRUE(std::filesystem::exists(SourcePath("CMakeLists.txt")));
}

TEST(StartServerProcessTest, ReadsThePortsOfTheStartLine) {
  const std::string line = "info listening on 127.0.0.1:0 (port 40123, HTTP on port 9478)";
  EXPECT_EQ(NumberAfter(line, "(port "), 40123);
  EXPECT_EQ(NumberAfter(line, "HTTP on port "), 9478);
  EXPECT_EQ(NumberAfter(line, "gRPC on port "), -1);
  EXPECT_EQ(NumberAfter("(port x", "(port "), -1);
  absl::StatusOr<StartedServer> started =
      StartServerProcess({"/bin/sh", "-c", "echo 'ready (port 123, test)' >&2; sleep 30"});
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->port, 123);
  // A child that never prints the line is retried, then the last stderr is named.
  absl::StatusOr<StartedServer> silent =
      StartServerProcess({"/bin/sh", "-c", "echo busy >&2"}, absl::Seconds(1), 2);
  EXPECT_EQ(silent.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(silent.status().message(), HasSubstr("busy"));
}

}  // namespace
}  // namespace rxfleet::testing
