#include "tests/support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace rxfleet::testing {
namespace {

int ExitCodeFromStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& extra : extra_env) {
      if (std::string_view(extra).substr(0, extra.find('=')) == key) {
        replaced = true;
        break;
      }
    }
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  if (argv.empty()) return absl::InvalidArgumentError("ChildProcess::Start: empty argv");
  std::vector<std::string> args = argv;
  std::vector<std::string> env = MergedEnvironment(extra_env);
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(env);

  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int saved = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(saved)));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2}) {
    sigaddset(&default_signals, sig);
  }
  posix_spawnattr_setsigmask(&attr, &empty_mask);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, c_args[0], &actions, &attr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out_pipe[0], err_pipe[0]));
}

ChildProcess::ChildProcess(pid_t pid, int stdout_fd, int stderr_fd)
    : pid_(pid), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {
  pidfd_ = OpenPidfd(pid_);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  reader_ = std::thread([this] { ReadLoop(); });
}

ChildProcess::~ChildProcess() {
  if (running()) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    TryReap(absl::Seconds(10));
  }
  // Give the reader a moment to drain what the child wrote before it died, then stop it
  // even if a stray descendant still holds the pipes open.
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return eof_[0] && eof_[1]; });
  }
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(stop_fd_, &one, sizeof(one));
  }
  if (reader_.joinable()) reader_.join();
  close(stdout_fd_);
  close(stderr_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  if (pidfd_ >= 0) close(pidfd_);
}

void ChildProcess::ReadLoop() {
  char buffer[8192];
  while (true) {
    pollfd fds[3];
    int nfds = 0;
    int stream_of[3];
    for (int s = 0; s < 2; ++s) {
      bool eof;
      {
        std::lock_guard<std::mutex> lock(mu_);
        eof = eof_[s];
      }
      if (!eof) {
        fds[nfds] = {s == 0 ? stdout_fd_ : stderr_fd_, POLLIN, 0};
        stream_of[nfds++] = s;
      }
    }
    if (nfds == 0) return;
    if (stop_fd_ >= 0) {
      fds[nfds] = {stop_fd_, POLLIN, 0};
      stream_of[nfds++] = -1;
    }
    if (poll(fds, nfds, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < nfds; ++i) {
      if (fds[i].revents == 0) continue;
      if (stream_of[i] < 0) return;  // stop requested
      const int s = stream_of[i];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= 0) {
        eof_[s] = true;
        if (partial_start_[s] < text_[s].size()) {
          lines_[s].push_back(text_[s].substr(partial_start_[s]));
          partial_start_[s] = text_[s].size();
        }
      } else {
        text_[s].append(buffer, static_cast<size_t>(n));
        size_t newline;
        while ((newline = text_[s].find('\n', partial_start_[s])) != std::string::npos) {
          lines_[s].push_back(text_[s].substr(partial_start_[s], newline - partial_start_[s]));
          partial_start_[s] = newline + 1;
        }
      }
      cv_.notify_all();
    }
  }
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(
    Stream stream, const std::function<bool(std::string_view)>& predicate, absl::Duration timeout) {
  const int s = stream == Stream::kStdout ? 0 : 1;
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    while (cursor_[s] < lines_[s].size()) {
      const std::string& line = lines_[s][cursor_[s]++];
      if (predicate(line)) return line;
    }
    if (eof_[s]) {
      return absl::FailedPreconditionError(absl::StrCat(
          s == 0 ? "stdout" : "stderr", " ended without a matching line; output:\n", text_[s]));
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        cursor_[s] >= lines_[s].size()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no matching line on ", s == 0 ? "stdout" : "stderr", " within ",
                       absl::FormatDuration(timeout), "; output so far:\n", text_[s]));
    }
  }
}

absl::StatusOr<std::string> ChildProcess::WaitForLineContaining(Stream stream,
                                                                std::string_view needle,
                                                                absl::Duration timeout) {
  const std::string wanted(needle);
  return WaitForLine(
      stream,
      [&wanted](std::string_view line) { return line.find(wanted) != std::string_view::npos; },
      timeout);
}

std::vector<std::string> ChildProcess::Lines(Stream stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_[stream == Stream::kStdout ? 0 : 1];
}

std::string ChildProcess::Text(Stream stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  return text_[stream == Stream::kStdout ? 0 : 1];
}

bool ChildProcess::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !reaped_;
}

bool ChildProcess::Signal(int signal) {
  if (!running()) return false;
  return kill(pid_, signal) == 0;
}

bool ChildProcess::TryReap(absl::Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reaped_) return true;
    }
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      std::lock_guard<std::mutex> lock(mu_);
      reaped_ = true;
      exit_code_ = ExitCodeFromStatus(status);
      return true;
    }
    if (r < 0 && errno != EINTR) {
      std::lock_guard<std::mutex> lock(mu_);
      reaped_ = true;  // not our child any more (reaped elsewhere); nothing left to wait for
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    if (pidfd_ >= 0) {
      pollfd pfd{pidfd_, POLLIN, 0};
      poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 5)));
    }
  }
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (!TryReap(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("process ", pid_, " still running after ", absl::FormatDuration(timeout)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return exit_code_;
}

int ChildProcess::Terminate(absl::Duration grace) {
  if (running()) {
    kill(pid_, SIGTERM);
    if (!TryReap(grace)) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      TryReap(absl::Seconds(10));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return exit_code_;
}

ProcessResult RunProcess(const std::vector<std::string>& argv, absl::Duration timeout,
                         const std::vector<std::string>& extra_env) {
  ProcessResult result;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, extra_env);
  if (!child.ok()) {
    result.stderr_text = std::string(child.status().message());
    return result;
  }
  absl::StatusOr<int> code = (*child)->Wait(timeout);
  if (!code.ok()) {
    result.timed_out = true;
    kill(-(*child)->pid(), SIGTERM);
    code = (*child)->Wait(absl::Seconds(2));
    if (!code.ok()) {
      kill(-(*child)->pid(), SIGKILL);
      code = (*child)->Wait(absl::Seconds(10));
    }
  }
  result.exit_code = code.ok() ? *code : -1;
  // Let the reader collect the tail of both streams (bounded, in case a descendant keeps a
  // pipe open), then take the text.
  (*child)
      ->WaitForLine(
          Stream::kStdout, [](std::string_view) { return false; }, absl::Seconds(2))
      .IgnoreError();
  (*child)
      ->WaitForLine(
          Stream::kStderr, [](std::string_view) { return false; }, absl::Seconds(1))
      .IgnoreError();
  result.stdout_text = (*child)->Text(Stream::kStdout);
  result.stderr_text = (*child)->Text(Stream::kStderr);
  return result;
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return condition();
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

int NumberAfter(std::string_view line, std::string_view marker) {
  const size_t at = line.find(marker);
  if (at == std::string_view::npos) return -1;
  const size_t start = at + marker.size();
  size_t end = start;
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  int value = -1;
  return absl::SimpleAtoi(std::string(line.substr(start, end - start)), &value) ? value : -1;
}

absl::StatusOr<StartedServer> StartServerProcess(const std::vector<std::string>& argv,
                                                 absl::Duration line_timeout, int attempts) {
  std::string last_stderr;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv);
    if (!child.ok()) return child.status();
    absl::StatusOr<std::string> line =
        (*child)->WaitForLineContaining(Stream::kStderr, "(port ", line_timeout);
    if (line.ok()) {
      StartedServer started;
      started.port = NumberAfter(*line, "(port ");
      started.start_line = *std::move(line);
      started.child = *std::move(child);
      return started;
    }
    (*child)->Wait(absl::Seconds(5)).IgnoreError();
    last_stderr = (*child)->Text(Stream::kStderr);
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no start line after ", attempts, " attempts; last stderr: ", last_stderr));
}

}  // namespace rxfleet::testing
