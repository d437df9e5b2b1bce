#include "tools/emulator/emulator.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/emulator/device_model.h"
#include "tools/emulator/lab.h"
#include "tools/emulator/netdev_shaper.h"
#include "tools/emulator/sysfs_tree.h"
#include "tools/emulator/usbfs_server.h"
#include "umockdev.h"

extern char** environ;

namespace rxfleet::emulator {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTrafficTickSeconds = 0.1;
constexpr int kFirstIfindex = 3;

void Log(const std::string& message) {
  std::string line = absl::StrCat("rxfleet-emulate: ", message, "\n");
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, line.data(), line.size());
}

// The emulated devices and everything the ioctl worker thread shares with the main thread.
class Core : public DeviceRouter {
 public:
  Core(const Lab& lab, Clock::time_point start) : start_(start) {
    for (const DeviceSpec& spec : lab.devices) {
      devices_.emplace_back(spec, lab.host_class);
      last_advance_.push_back(0);
    }
  }

  double Now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void SetStart(Clock::time_point start) {
    std::lock_guard<std::mutex> lock(mu_);
    start_ = start;
  }

  std::mutex& mu() { return mu_; }
  // Callers hold mu().
  EmulatedDevice& device(size_t i) { return devices_[i]; }
  size_t size() const { return devices_.size(); }
  void AdvanceToLocked(size_t i, double t) {
    if (t > last_advance_[i]) {
      devices_[i].AdvanceTraffic(t - last_advance_[i]);
      last_advance_[i] = t;
    }
  }
  void ResetAdvanceLocked(size_t i, double t) { last_advance_[i] = t; }

  bool Resolve(const std::string& devnode, int* device, uint64_t* incarnation) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i].plugged() && devices_[i].config().DevNode() == devnode) {
        *device = static_cast<int>(i);
        *incarnation = devices_[i].incarnation();
        return true;
      }
    }
    return false;
  }

  bool Alive(int device, uint64_t incarnation) override {
    std::lock_guard<std::mutex> lock(mu_);
    const EmulatedDevice& d = devices_[static_cast<size_t>(device)];
    return d.plugged() && d.incarnation() == incarnation;
  }

  ControlOutcome Control(int device, uint64_t incarnation, const ControlSetup& setup,
                         const std::vector<uint8_t>& out_data) override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t i = static_cast<size_t>(device);
    const double t = Now();
    // Traffic so far ran at the rates of the register values before this transfer.
    AdvanceToLocked(i, t);
    return devices_[i].HandleControl(incarnation, setup, out_data, t);
  }

  std::string InterfaceDriver(int device, uint64_t incarnation, int number) override {
    std::lock_guard<std::mutex> lock(mu_);
    const EmulatedDevice& d = devices_[static_cast<size_t>(device)];
    if (!d.plugged() || d.incarnation() != incarnation) return "";
    const DeviceConfig& c = d.config();
    for (const InterfaceSpec& intf : c.interfaces) {
      if (intf.number != number || intf.alternate != 0) continue;
      if (!intf.driver.empty()) return intf.driver;
      if (c.netdev && c.netdev->interface == number) return c.netdev->driver;
    }
    return "";
  }

  double Speed(int device, uint64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    return devices_[static_cast<size_t>(device)].config().speed_mbps;
  }

 private:
  std::mutex mu_;
  Clock::time_point start_;
  std::vector<EmulatedDevice> devices_;
  std::vector<double> last_advance_;
};

// Owns the umockdev testbed; its destruction removes the testbed directory.
struct TestbedDeleter {
  void operator()(UMockdevTestbed* testbed) const { g_object_unref(testbed); }
};

std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  bool asan_seen = false;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    if (entry.rfind("RXFLEET_EMULATE_PRELOADED=", 0) == 0) continue;
    if (entry.rfind("RXFLEET_EMULATED=", 0) == 0) continue;
    if (entry.rfind("ASAN_OPTIONS=", 0) == 0) {
      asan_seen = true;
      if (entry.find("verify_asan_link_order") == std::string::npos) {
        entry += entry.size() > strlen("ASAN_OPTIONS=") ? ":verify_asan_link_order=0"
                                                        : "verify_asan_link_order=0";
      }
    }
    env.push_back(std::move(entry));
  }
  if (!asan_seen) env.push_back("ASAN_OPTIONS=verify_asan_link_order=0");
  env.push_back("RXFLEET_EMULATED=1");
  return env;
}

int ExitCodeFromStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitInternal;
}

absl::Status WriteState(const std::string& path, Core& core, const Lab& lab, double duration,
                        int exit_code, bool timed_out) {
  nlohmann::json state;
  {
    std::lock_guard<std::mutex> lock(core.mu());
    nlohmann::json devices = nlohmann::json::array();
    for (size_t i = 0; i < core.size(); ++i) devices.push_back(core.device(i).StateJson());
    state["devices"] = std::move(devices);
  }
  state["lab"] = lab.path;
  state["host_class"] = HostClassName(lab.host_class);
  state["duration_seconds"] = duration;
  state["child"] = {{"exit_code", exit_code}, {"timed_out", timed_out}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat("cannot write state file ", tmp));
    out << state.dump(2) << "\n";
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write state file ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot write state file ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

class Run {
 public:
  Run(const EmulatorOptions& options, Lab lab, std::vector<TimelineEvent> timeline)
      : options_(options),
        lab_(std::move(lab)),
        timeline_(std::move(timeline)),
        core_(lab_, Clock::now()) {}

  int Execute();

 private:
  absl::Status Setup();
  absl::Status ApplyEvent(const TimelineEvent& event);
  absl::Status PlugDevice(size_t i);
  absl::Status TickTraffic();
  absl::Status SyncShapes();
  void HandleSignal(int sig);
  void Terminate(int sig);

  const EmulatorOptions& options_;
  Lab lab_;
  std::vector<TimelineEvent> timeline_;
  Core core_;
  std::unique_ptr<UMockdevTestbed, TestbedDeleter> testbed_;
  std::unique_ptr<SysfsTree> tree_;
  std::unique_ptr<UsbfsServer> server_;
  std::unique_ptr<NetdevShaper> shaper_;  ///< set when a device has a shaped netdev
  bool child_started_ = false;
  int next_ifindex_ = kFirstIfindex;
  pid_t child_ = -1;
  bool child_exited_ = false;
  int child_code_ = 0;
  bool timed_out_ = false;
  std::optional<double> kill_at_;
};

absl::Status Run::Setup() {
  testbed_.reset(umockdev_testbed_new());
  if (!testbed_) return absl::InternalError("cannot create the umockdev testbed");
  tree_ = std::make_unique<SysfsTree>(testbed_.get());
  server_ = std::make_unique<UsbfsServer>(testbed_.get(), &core_);
  absl::StatusOr<Topology> topology = PlanTopology(lab_, timeline_);
  if (!topology.ok()) return topology.status();
  std::vector<std::pair<std::string, std::string>> peers;
  for (const DeviceSpec& d : lab_.devices) {
    if (!d.config.peer.empty()) peers.emplace_back(d.config.SysfsName(), d.config.peer);
    if (!d.config.hub_peer.empty()) peers.emplace_back(d.config.HubRootPort(), d.config.hub_peer);
  }
  for (const TimelineEvent& e : timeline_) {
    if (e.kind == EventKind::kPlug && !e.plug_config.peer.empty()) {
      peers.emplace_back(e.plug_config.SysfsName(), e.plug_config.peer);
    }
    if (e.kind == EventKind::kPlug && !e.plug_config.hub_peer.empty()) {
      peers.emplace_back(e.plug_config.HubRootPort(), e.plug_config.hub_peer);
    }
  }
  if (absl::Status s = tree_->Build(*topology, peers); !s.ok()) return s;
  for (size_t i = 0; i < lab_.devices.size(); ++i) {
    if (!lab_.devices[i].plugged) continue;
    if (absl::Status s = PlugDevice(i); !s.ok()) return s;
  }
  bool shapes = false;
  for (const DeviceSpec& d : lab_.devices) shapes |= d.config.netdev && d.config.netdev->shape;
  for (const TimelineEvent& e : timeline_) {
    shapes |= e.kind == EventKind::kPlug && e.plug_config.netdev && e.plug_config.netdev->shape;
  }
  if (shapes) {
    if (absl::Status s = CheckShapePrivileges(); !s.ok()) return s;
    shaper_ = MakeNetlinkShaper();
  }
  return SyncShapes();
}

// Brings every shaped netdev's tbf rate to what the model asks for now.
absl::Status Run::SyncShapes() {
  if (!shaper_) return absl::OkStatus();
  for (size_t i = 0; i < core_.size(); ++i) {
    ShapeSpec shape;
    uint64_t rate_bps = 0;
    std::optional<uint32_t> hold;
    {
      std::lock_guard<std::mutex> lock(core_.mu());
      EmulatedDevice& d = core_.device(i);
      // An unplugged adapter keeps its last rate: the veth is not the emulator's to remove.
      if (!d.plugged() || !d.ShapeNeedsApply(&shape, &rate_bps)) continue;
      hold = d.CurrentHoldUs();
    }
    if (absl::Status s = shaper_->SetRate(shape, rate_bps); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("device ", lab_.devices[i].name, ": netdev.shape: ", s.message()));
    }
    const double t = child_started_ ? core_.Now() : 0;
    if (options_.verbose) {
      const std::optional<TrafficSpec>& traffic = lab_.devices[i].traffic;
      const bool synthetic = traffic && !traffic->synthetic_curve.empty();
      Log(absl::StrFormat("t=%.3f shape %s: %s in %s at %d bit/s (hold %s%s)", t,
                          lab_.devices[i].name, shape.device, shape.netns, rate_bps,
                          hold ? absl::StrCat(*hold, " us") : "none",
                          synthetic ? ", synthetic curve" : ""));
    }
    std::lock_guard<std::mutex> lock(core_.mu());
    core_.device(i).RecordShapeApplied(shape, t, rate_bps);
  }
  return absl::OkStatus();
}

// Creates the sysfs/dev entries of device i in its current configuration.
absl::Status Run::PlugDevice(size_t i) {
  DeviceConfig config;
  std::optional<NetdevCounters> counters;
  int ifindex = 0;
  {
    std::lock_guard<std::mutex> lock(core_.mu());
    config = core_.device(i).config();
    counters = core_.device(i).counters();
    if (config.netdev) ifindex = next_ifindex_++;
  }
  if (absl::Status s = server_->Attach(config.DevNode()); !s.ok()) return s;
  return tree_->AddDevice(config, ifindex, *counters);
}

absl::Status Run::ApplyEvent(const TimelineEvent& e) {
  const size_t i = static_cast<size_t>(e.device);
  const double t = core_.Now();
  const std::string& name = lab_.devices[i].name;
  if (options_.verbose) {
    Log(absl::StrFormat("t=%.3f %s %s", t, EventKindName(e.kind), name));
  }
  switch (e.kind) {
    case EventKind::kUnplug: {
      DeviceConfig config;
      {
        std::lock_guard<std::mutex> lock(core_.mu());
        core_.AdvanceToLocked(i, t);
        config = core_.device(i).config();
        core_.device(i).Unplug();
      }
      return tree_->RemoveDevice(config);
    }
    case EventKind::kPlug: {
      {
        std::lock_guard<std::mutex> lock(core_.mu());
        core_.device(i).Plug(e.plug_config, e.keep_registers);
        core_.ResetAdvanceLocked(i, t);
      }
      return PlugDevice(i);
    }
    case EventKind::kSetRegister: {
      std::lock_guard<std::mutex> lock(core_.mu());
      core_.AdvanceToLocked(i, t);
      core_.device(i).SetRegister(e.address, e.value);
      return absl::OkStatus();
    }
    case EventKind::kSleep:
    case EventKind::kWake: {
      std::lock_guard<std::mutex> lock(core_.mu());
      core_.AdvanceToLocked(i, t);
      core_.device(i).SetAsleep(e.kind == EventKind::kSleep);
      return absl::OkStatus();
    }
    case EventKind::kFailNext: {
      std::lock_guard<std::mutex> lock(core_.mu());
      core_.device(i).FailNext(e.count, e.mode);
      return absl::OkStatus();
    }
    case EventKind::kAdvanceTraffic: {
      {
        std::lock_guard<std::mutex> lock(core_.mu());
        core_.AdvanceToLocked(i, t);
        core_.device(i).AdvanceTraffic(e.seconds);
      }
      return TickTraffic();
    }
  }
  return absl::OkStatus();
}

absl::Status Run::TickTraffic() {
  const double t = core_.Now();
  std::vector<std::pair<DeviceConfig, NetdevCounters>> snapshots;
  {
    std::lock_guard<std::mutex> lock(core_.mu());
    for (size_t i = 0; i < core_.size(); ++i) {
      EmulatedDevice& d = core_.device(i);
      if (!d.plugged()) continue;
      core_.AdvanceToLocked(i, t);
      d.TickDriver(t);
      if (d.config().netdev) snapshots.emplace_back(d.config(), d.counters());
    }
  }
  for (const auto& [config, counters] : snapshots) {
    if (absl::Status s = tree_->WriteNetdevStatistics(config, counters); !s.ok()) return s;
  }
  // Register writes by the child since the last tick reach the shaped netdevs here.
  return SyncShapes();
}

void Run::Terminate(int sig) {
  if (child_ <= 0 || child_exited_) return;
  // The child leads its own process group: signal the group so its descendants go too.
  if (kill(-child_, sig) != 0) kill(child_, sig);
}

void Run::HandleSignal(int sig) {
  if (sig == SIGCHLD) return;  // reaped by the loop
  if (options_.verbose) Log(absl::StrCat("forwarding signal ", sig, " to the child"));
  Terminate(sig);
  const double deadline = core_.Now() + std::max(options_.kill_grace_seconds, 5.0);
  if (!kill_at_ || *kill_at_ > deadline) kill_at_ = deadline;
}

int Run::Execute() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&mask, sig);
  // Blocked before any thread exists, so umockdev's threads inherit the mask and every one of
  // these signals is read from the signalfd.
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    Log(absl::StrCat("cannot block signals: ", std::strerror(errno)));
    return kExitInternal;
  }
  signal(SIGPIPE, SIG_IGN);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    Log(absl::StrCat("signalfd: ", std::strerror(errno)));
    return kExitInternal;
  }

  if (absl::Status s = Setup(); !s.ok()) {
    Log(std::string(s.message()));
    server_.reset();
    tree_.reset();
    testbed_.reset();
    close(sfd);
    return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitInternal;
  }

  // Start the child.
  std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> c_env;
  for (std::string& e : env) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  std::vector<std::string> args = options_.command;
  std::vector<char*> c_args;
  for (std::string& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const Clock::time_point start = Clock::now();
  core_.SetStart(start);
  child_started_ = true;
  const int rc = posix_spawnp(&child_, c_args[0], nullptr, &attr, c_args.data(), c_env.data());
  posix_spawnattr_destroy(&attr);
  int exit_code = 0;
  if (rc != 0) {
    Log(absl::StrCat("cannot run ", options_.command[0], ": ", std::strerror(rc)));
    exit_code = rc == ENOENT ? kExitNotFound : kExitNotExecutable;
    child_exited_ = true;
    child_code_ = exit_code;
  }
  // Like a shell, hand the terminal to the child's process group when we own it, so the
  // child can read the terminal and Ctrl-C reaches it.
  const bool gave_terminal = rc == 0 && isatty(STDIN_FILENO) &&
                             tcgetpgrp(STDIN_FILENO) == getpgrp() &&
                             tcsetpgrp(STDIN_FILENO, child_) == 0;

  size_t next_event = 0;
  double next_tick = kTrafficTickSeconds;
  bool sent_term_for_timeout = false;
  bool failed = false;
  while (!child_exited_) {
    const double t = core_.Now();
    while (next_event < timeline_.size() && timeline_[next_event].at_seconds <= t) {
      absl::Status applied = ApplyEvent(timeline_[next_event]);
      if (applied.ok()) applied = SyncShapes();
      if (absl::Status s = applied; !s.ok()) {
        Log(absl::StrCat("timeline event at line ", timeline_[next_event].line,
                         " failed: ", s.message()));
        failed = true;
        Terminate(SIGTERM);
        kill_at_ = t + options_.kill_grace_seconds;
      }
      ++next_event;
    }
    if (t >= next_tick) {
      if (absl::Status s = TickTraffic(); !s.ok()) {
        Log(std::string(s.message()));
        failed = true;
        Terminate(SIGTERM);
        kill_at_ = t + options_.kill_grace_seconds;
      }
      next_tick = (std::floor(t / kTrafficTickSeconds) + 1) * kTrafficTickSeconds;
    }
    if (options_.timeout_seconds > 0 && t >= options_.timeout_seconds && !sent_term_for_timeout) {
      sent_term_for_timeout = true;
      timed_out_ = true;
      Log(absl::StrFormat("%s did not exit within the %gs timeout; sending SIGTERM",
                          options_.command[0], options_.timeout_seconds));
      Terminate(SIGTERM);
      kill_at_ = t + options_.kill_grace_seconds;
    }
    if (kill_at_ && t >= *kill_at_) {
      Log(absl::StrCat(options_.command[0], " is still running; sending SIGKILL"));
      Terminate(SIGKILL);
      kill_at_.reset();
    }

    double wake = next_tick;
    if (next_event < timeline_.size()) wake = std::min(wake, timeline_[next_event].at_seconds);
    if (options_.timeout_seconds > 0 && !sent_term_for_timeout) {
      wake = std::min(wake, options_.timeout_seconds);
    }
    if (kill_at_) wake = std::min(wake, *kill_at_);
    const int wait_ms =
        std::clamp(static_cast<int>(std::ceil((wake - core_.Now()) * 1000)), 0, 1000);
    pollfd pfd{sfd, POLLIN, 0};
    poll(&pfd, 1, wait_ms);
    signalfd_siginfo info;
    while (read(sfd, &info, sizeof(info)) == sizeof(info)) {
      HandleSignal(static_cast<int>(info.ssi_signo));
    }
    int status = 0;
    const pid_t r = waitpid(child_, &status, WNOHANG);
    if (r == child_) {
      child_exited_ = true;
      child_code_ = ExitCodeFromStatus(status);
    }
  }
  if (gave_terminal) {
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, nullptr);
    tcsetpgrp(STDIN_FILENO, getpgrp());
  }
  const double duration = core_.Now();
  {
    std::lock_guard<std::mutex> lock(core_.mu());
    for (size_t i = 0; i < core_.size(); ++i) {
      if (core_.device(i).plugged()) core_.AdvanceToLocked(i, duration);
    }
  }
  // Writes the child made after the last tick still reach the shaped netdevs.
  if (absl::Status s = SyncShapes(); !s.ok()) {
    Log(std::string(s.message()));
    failed = true;
  }
  exit_code = child_code_;
  if (timed_out_) {
    Log(absl::StrFormat("%s was killed after the %gs timeout (its exit code was %d)",
                        options_.command[0], options_.timeout_seconds, child_code_));
    exit_code = kExitTimeout;
  }
  if (!options_.state_out.empty()) {
    if (absl::Status s =
            WriteState(options_.state_out, core_, lab_, duration, child_code_, timed_out_);
        !s.ok()) {
      Log(std::string(s.message()));
      failed = true;
    }
  }
  server_.reset();
  tree_.reset();
  testbed_.reset();
  close(sfd);
  if (failed && exit_code == 0) exit_code = kExitInternal;
  return exit_code;
}

}  // namespace

int RunEmulator(const EmulatorOptions& options) {
  absl::StatusOr<Lab> lab = LoadLab(options.lab_path);
  if (!lab.ok()) {
    Log(std::string(lab.status().message()));
    return kExitUsage;
  }
  std::vector<TimelineEvent> timeline;
  if (!options.timeline_path.empty()) {
    absl::StatusOr<std::vector<TimelineEvent>> loaded = LoadTimeline(options.timeline_path, *lab);
    if (!loaded.ok()) {
      Log(std::string(loaded.status().message()));
      return kExitUsage;
    }
    timeline = std::move(*loaded);
  }
  if (options.command.empty()) {
    Log("no command given after --");
    return kExitUsage;
  }
  Run run(options, std::move(*lab), std::move(timeline));
  return run.Execute();
}

}  // namespace rxfleet::emulator
