// rxfleet-emulate: runs an unmodified libusb program against emulated USB Wi-Fi adapters.
// See docs/EMULATOR.md.

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/emulator/emulator.h"

namespace {

constexpr char kPreload[] = "libumockdev-preload.so.0";
constexpr char kReexecMarker[] = "RXFLEET_EMULATE_PRELOADED";

constexpr char kUsage[] =
    "usage: rxfleet-emulate --lab LAB.yaml [--timeline EVENTS.yaml] [--state-out STATE.json]\n"
    "                       [--timeout SECONDS] [--verbose] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with emulated USB Wi-Fi adapters (umockdev): its libusb sees the lab's\n"
    "devices, its vendor register requests reach the emulator, and /sys shows the adapters,\n"
    "their ports and netdevs. Exits with COMMAND's exit code (128+signal if killed),\n"
    "2 for bad arguments or lab/timeline files, 124 when --timeout killed COMMAND,\n"
    "125 when the emulator itself failed. See docs/EMULATOR.md.\n";

int UsageError(const std::string& message) {
  std::cerr << "rxfleet-emulate: " << message << "\n" << kUsage;
  return rxfleet::emulator::kExitUsage;
}

bool PreloadActive() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libumockdev-preload") != std::string::npos) return true;
  }
  return false;
}

// Re-executes this program with the umockdev preload so the testbed's uevents reach the child
// (umockdev resolves devices through the preloaded libudev of the sending process).
int ReexecWithPreload(char** argv) {
  const char* old = std::getenv("LD_PRELOAD");
  std::string preload = kPreload;
  if (old != nullptr && *old != '\0') preload += std::string(" ") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv(kReexecMarker, "1", 1);
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string asan_options = asan != nullptr ? asan : "";
  if (asan_options.find("verify_asan_link_order") == std::string::npos) {
    if (!asan_options.empty()) asan_options += ":";
    asan_options += "verify_asan_link_order=0";
    setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
  }
  execv("/proc/self/exe", argv);
  std::cerr << "rxfleet-emulate: cannot re-execute with " << kPreload << ": "
            << std::strerror(errno) << "\n";
  return rxfleet::emulator::kExitInternal;
}

}  // namespace

int main(int argc, char** argv) {
  rxfleet::emulator::EmulatorOptions options;
  int i = 1;
  bool have_separator = false;
  auto value = [&](const std::string& arg, const std::string& name, std::string* out) {
    if (arg == name) {
      if (i + 1 >= argc) return -1;
      *out = argv[++i];
      return 1;
    }
    if (arg.rfind(name + "=", 0) == 0) {
      *out = arg.substr(name.size() + 1);
      return 1;
    }
    return 0;
  };
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      have_separator = true;
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
      continue;
    }
    std::string timeout_text;
    int r;
    if ((r = value(arg, "--lab", &options.lab_path)) != 0 ||
        (r = value(arg, "--timeline", &options.timeline_path)) != 0 ||
        (r = value(arg, "--state-out", &options.state_out)) != 0) {
      if (r < 0) return UsageError(arg + " needs a value");
      continue;
    }
    if ((r = value(arg, "--timeout", &timeout_text)) != 0) {
      if (r < 0) return UsageError(arg + " needs a value");
      std::istringstream in(timeout_text);
      double seconds = -1;
      in >> seconds;
      if (in.fail() || !in.eof() || seconds <= 0 || seconds > 1e7) {
        return UsageError("--timeout: expected a number of seconds > 0; got \"" + timeout_text +
                          "\"");
      }
      options.timeout_seconds = seconds;
      continue;
    }
    return UsageError("unknown option " + arg);
  }
  if (options.lab_path.empty()) return UsageError("--lab is required");
  if (!have_separator || i >= argc) return UsageError("missing -- COMMAND [ARGS...]");
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);

  // umockdev keeps its testbed under $TMPDIR and the preloaded library redirects /sys there;
  // with a relative TMPDIR that redirection fails ("uevent_sender_send: No such device") and the
  // child sees no devices, and so it does with ".." in the path: TMPDIR is made absolute and
  // normal first.
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    std::error_code error;
    const std::filesystem::path absolute = std::filesystem::absolute(tmp, error);
    if (error) return UsageError(std::string("TMPDIR ") + tmp + ": " + error.message());
    const std::string normal = absolute.lexically_normal().string();
    if (normal != tmp) setenv("TMPDIR", normal.c_str(), 1);
  }
  if (std::getenv(kReexecMarker) == nullptr) return ReexecWithPreload(argv);
  if (!PreloadActive()) {
    std::cerr << "rxfleet-emulate: " << kPreload
              << " could not be preloaded; install umockdev (Debian package umockdev)\n";
    return rxfleet::emulator::kExitInternal;
  }
  return rxfleet::emulator::RunEmulator(options);
}
