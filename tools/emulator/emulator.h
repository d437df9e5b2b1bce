#pragma once

#include <string>
#include <vector>

namespace rxfleet::emulator {

/// Exit codes of rxfleet-emulate besides the child's own.
inline constexpr int kExitUsage = 2;       ///< bad command line, lab or timeline file
inline constexpr int kExitTimeout = 124;   ///< the child was killed at --timeout
inline constexpr int kExitInternal = 125;  ///< the emulator itself failed
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;

struct EmulatorOptions {
  std::string lab_path;
  std::string timeline_path;   ///< empty = no timeline
  std::string state_out;       ///< empty = no state file
  double timeout_seconds = 0;  ///< 0 = no timeout
  double kill_grace_seconds = 2;
  bool verbose = false;
  std::vector<std::string> command;  ///< the child program and its arguments
};

/// Runs `options.command` against the lab: builds the umockdev testbed, serves the child's
/// usbfs ioctls, applies the timeline and the traffic model while it runs, writes the state
/// file when it exits and always removes the testbed. Returns the process exit code: the
/// child's (128 + signal if a signal ended it), or one of the kExit* codes above. Messages go
/// to stderr prefixed with "rxfleet-emulate: ". Must run with libumockdev-preload.so.0 in
/// LD_PRELOAD (main() re-executes itself to ensure it).
int RunEmulator(const EmulatorOptions& options);

}  // namespace rxfleet::emulator
