// rxfleet-agent: flags -> options -> Agent; signals -> Stop/ReloadLocalPolicies.

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <iostream>
#include <thread>
#include <variant>

#include "agent/app/agent.h"
#include "agent/app/command_line.h"
#include "agent/app/report.h"
#include "agent/link/agent_binding.h"
#include "agent/reconcile/log.h"

namespace {

using rxfleet::agent::Agent;
using rxfleet::agent::AgentMode;
using rxfleet::agent::CommandLine;

int ExitCodeFor(const absl::Status& status) {
  return absl::IsInternal(status) || absl::IsUnavailable(status) ? rxfleet::agent::kExitRuntime
                                                                 : rxfleet::agent::kExitUsage;
}

int RunOnce(Agent& agent, rxfleet::agent::OutputFormat output) {
  auto snapshots = agent.RunOnce();
  if (!snapshots.ok()) {
    std::cerr << "rxfleet-agent: " << snapshots.status().message() << "\n";
    return rxfleet::agent::kExitRuntime;
  }
  std::cout << (output == rxfleet::agent::OutputFormat::kJson
                    ? rxfleet::agent::RenderAdaptersJson(*snapshots)
                    : rxfleet::agent::RenderAdaptersTable(*snapshots))
            << std::flush;
  return rxfleet::agent::kExitOk;
}

// Runs the loop with SIGTERM/SIGINT (stop) and SIGHUP (reload) delivered through a signalfd on
// a dedicated thread, so no work happens in signal handlers.
int RunLoop(Agent& agent, const sigset_t& signals) {
  const int signal_fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::cerr << "rxfleet-agent: cannot receive signals (signalfd failed)\n";
    return rxfleet::agent::kExitRuntime;
  }
  std::thread signal_thread([&agent, signal_fd] {
    signalfd_siginfo info;
    while (::read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (info.ssi_signo == SIGHUP) {
        agent.ReloadLocalPolicies();
        continue;
      }
      agent.Stop();
      return;
    }
    agent.Stop();
  });
  const absl::Status status = agent.Run();
  // Run returns after Stop; make sure the signal thread is done too.
  if (signal_thread.joinable()) {
    ::pthread_kill(signal_thread.native_handle(), SIGTERM);  // blocked: queued for the fd
    signal_thread.join();
  }
  ::close(signal_fd);
  if (!status.ok()) {
    std::cerr << "rxfleet-agent: " << status.message() << "\n";
    return rxfleet::agent::kExitRuntime;
  }
  return rxfleet::agent::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::variant<CommandLine, int> parsed =
      rxfleet::agent::ParseCommandLine(argc, argv, std::cout, std::cerr);
  if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  CommandLine& command = std::get<CommandLine>(parsed);

  // Block the signals before any thread starts, so every thread inherits the mask and only the
  // signal thread receives them. SIGPIPE: a client going away is not a reason to die.
  sigset_t signals;
  sigemptyset(&signals);
  ::signal(SIGPIPE, SIG_IGN);
  if (command.options.mode == AgentMode::kRun) {
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }

  auto agent = Agent::Create(command.options, nullptr, rxfleet::agent::StderrLogSink());
  if (!agent.ok()) {
    std::cerr << "rxfleet-agent: " << agent.status().message() << "\n";
    return ExitCodeFor(agent.status());
  }
  if (command.options.mode == AgentMode::kOnce) return RunOnce(**agent, command.output);
  std::unique_ptr<rxfleet::agent::AgentLinkBinding> link;
  if (!command.servers.empty()) {
    auto binding = rxfleet::agent::AgentLinkBinding::Create(
        agent->get(), command.servers, command.server_tls, rxfleet::agent::StderrLogSink());
    if (!binding.ok()) {
      std::cerr << "rxfleet-agent: --server: " << binding.status().message() << "\n";
      return rxfleet::agent::kExitUsage;
    }
    link = *std::move(binding);
    link->Start();
  }
  const int exit_code = RunLoop(**agent, signals);
  if (link != nullptr) link->Stop();
  return exit_code;
}
