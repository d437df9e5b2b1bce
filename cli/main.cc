// rxfleetctl: wires the process (signals, streams, gRPC clients) to the command tree.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "cli/app.h"

namespace {

// SIGINT/SIGTERM are blocked in every thread (gRPC's included, which start later and inherit
// the mask) and taken by one thread with sigwait: the first signal triggers the stop source,
// which ends `watch` cleanly and cancels calls in flight; a second one exits at once.
void StartSignalThread(std::stop_source stop) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals, stop]() mutable {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) return;
    stop.request_stop();
    if (sigwait(&signals, &signal) == 0) _exit(128 + signal);
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  std::stop_source stop;
  StartSignalThread(stop);
  std::vector<std::string> args(argv + 1, argv + argc);
  return rxfleet::cli::RunRxfleetctl(args, rxfleet::cli::ProcessEnvironment(stop.get_token()));
}
