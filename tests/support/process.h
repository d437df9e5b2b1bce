#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rxfleet::testing {

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns the last result.
/// For conditions on other processes or threads, instead of sleeping a fixed time.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(20));

/// Outcome of a finished child process.
struct ProcessResult {
  /// The child's exit status (0..255), or 128 + signal number if a signal ended it,
  /// or -1 if it could not be started (stderr_text then says why).
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
  /// True if the child was still running at the deadline and was killed.
  bool timed_out = false;
};

/// Runs argv[0] (looked up in PATH if it has no '/') with argv, the current environment plus
/// `extra_env` ("KEY=VALUE" entries; they replace inherited entries of the same key), stdin
/// from /dev/null, and both output streams captured (read concurrently, so a chatty child
/// never blocks). On timeout the child's process group gets SIGTERM, then SIGKILL 2 s later.
ProcessResult RunProcess(const std::vector<std::string>& argv, absl::Duration timeout,
                         const std::vector<std::string>& extra_env = {});

/// Which output stream of a ChildProcess.
enum class Stream { kStdout, kStderr };

/// A long-running child process (e.g. the agent under the emulator) whose output is read
/// line by line in the background. The child runs in its own process group; the destructor
/// kills the group (SIGKILL) and reaps it if it is still running. Thread-safe.
class ChildProcess {
 public:
  /// Starts argv as RunProcess does. Errors: Internal if the pipes or spawn fail,
  /// InvalidArgument for an empty argv.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  /// Waits until a complete line on `stream` satisfies `predicate` and returns it.
  /// Lines are consumed in order: each call starts after the line the previous successful
  /// call on the same stream returned. Errors: DeadlineExceeded (message includes the output
  /// seen so far) or FailedPrecondition if the stream ended without a match.
  absl::StatusOr<std::string> WaitForLine(Stream stream,
                                          const std::function<bool(std::string_view)>& predicate,
                                          absl::Duration timeout);

  /// Convenience: WaitForLine with a substring match.
  absl::StatusOr<std::string> WaitForLineContaining(Stream stream, std::string_view needle,
                                                    absl::Duration timeout);

  /// All complete lines received so far on `stream` (without '\n').
  std::vector<std::string> Lines(Stream stream) const;
  /// Everything received so far on `stream`, including a trailing partial line.
  std::string Text(Stream stream) const;

  /// Sends `signal` to the child only (not its group). False if it has already been reaped.
  bool Signal(int signal);

  /// Waits for the child to exit and returns its exit code (128 + signal if signalled).
  /// DeadlineExceeded if it is still running at the deadline (the child is left running).
  absl::StatusOr<int> Wait(absl::Duration timeout);

  /// SIGTERM, then SIGKILL to the whole process group after `grace`; returns the exit code.
  int Terminate(absl::Duration grace = absl::Seconds(2));

  /// True until the child has been reaped by Wait/Terminate.
  bool running() const;

 private:
  ChildProcess(pid_t pid, int stdout_fd, int stderr_fd);
  void ReadLoop();
  bool TryReap(absl::Duration timeout);

  const pid_t pid_;
  int pidfd_ = -1;
  int stdout_fd_;
  int stderr_fd_;
  int stop_fd_ = -1;
  std::thread reader_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string text_[2];
  std::vector<std::string> lines_[2];
  size_t partial_start_[2] = {0, 0};
  size_t cursor_[2] = {0, 0};
  bool eof_[2] = {false, false};
  bool reaped_ = false;
  int exit_code_ = -1;
};

/// The decimal number right after `marker` in `line` ("(port 7443, ..." with "(port "), or -1
/// if the marker is missing or no digits follow it.
int NumberAfter(std::string_view line, std::string_view marker);

/// A server child process that has printed its start line.
struct StartedServer {
  std::unique_ptr<ChildProcess> child;
  /// The stderr line containing "(port N" (rxfleet-server's "listening ..." line).
  std::string start_line;
  /// N: the gRPC port it listens on.
  int port = -1;
};

/// Starts `argv` (a server that logs "(port N" on stderr once it listens) and waits up to
/// `line_timeout` for that line. A child that exits or stays silent instead (a restart on the
/// same port may find the old one lingering for a moment) is reaped and started again, up to
/// `attempts` times. Errors: the spawn error, or DeadlineExceeded naming the last stderr.
absl::StatusOr<StartedServer> StartServerProcess(const std::vector<std::string>& argv,
                                                 absl::Duration line_timeout = absl::Seconds(20),
                                                 int attempts = 50);

}  // namespace rxfleet::testing
