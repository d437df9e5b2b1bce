// rxfleet-server: flags -> FleetServerOptions -> FleetServer; SIGTERM/SIGINT -> graceful stop.

#include <signal.h>
#include <systemd/sd-daemon.h>

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rxfleet/version.h"
#include "server/fleet_server.h"
#include "server/http/http_server.h"
#include "server/store/store.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// Grace for running calls at SIGTERM before they are cancelled.
constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

// A CLI11 validator for absl durations ("300ms", "5m", "1h30m").
CLI::Validator DurationValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::Duration d;
        if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
          return "must be a duration like 100ms, 30s or 5m";
        }
        return "";
      },
      "DURATION");
}

}  // namespace

int main(int argc, char** argv) {
  rxfleet::server::FleetServerOptions options;
  options.db_path = std::string(rxfleet::server::kDefaultDatabasePath);
  options.http_listen = std::string(rxfleet::server::kDefaultHttpListen);
  std::string stale_after = "5m";
  std::string push_debounce = "100ms";
  std::string experiment_retention = "720h";

  CLI::App app(
      "rxfleet-server: fleet registry of rxfleet agents, versioned RX aggregation policies "
      "pushed to them over gRPC (ACK/NACK), persisted in SQLite.\n"
      "The gRPC API is plaintext in this version: keep --listen on loopback or a trusted "
      "network.\n"
      "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime error (database, ports), 2 usage.",
      "rxfleet-server");
  app.set_version_flag("--version", std::string(rxfleet::kVersion));
  app.add_option("--listen", options.listen,
                 "gRPC listen address HOST:PORT (AgentService and FleetService)")
      ->default_val(options.listen)
      ->type_name("HOST:PORT");
  app.add_option("--db", options.db_path,
                 "SQLite database file (created with its directory if missing)")
      ->default_val(options.db_path)
      ->type_name("PATH");
  app.add_option("--http-listen", options.http_listen,
                 "HTTP listen address for /metrics, /sd/agents and /healthz, or 'none'")
      ->default_val(options.http_listen)
      ->type_name("HOST:PORT|none");
  app.add_option("--stale-after", stale_after,
                 "mark a host stale after this long without messages or without ACKing a "
                 "bundle sent to it")
      ->default_val(stale_after)
      ->check(DurationValidator());
  app.add_option("--push-debounce", push_debounce,
                 "push policy changes made within this window after the first one together "
                 "(0..10s)")
      ->default_val(push_debounce)
      ->check(DurationValidator());
  app.add_option("--experiment-retention", experiment_retention,
                 "delete the metric windows of experiments that ended longer ago than this "
                 "(the experiments themselves are kept)")
      ->default_val(experiment_retention)
      ->check(DurationValidator());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, std::cout, std::cerr);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (options.http_listen == "none") options.http_listen.clear();
  (void)absl::ParseDuration(stale_after, &options.stale_after);
  (void)absl::ParseDuration(push_debounce, &options.push_debounce);
  (void)absl::ParseDuration(experiment_retention, &options.experiment_retention);

  // Debian's Abseil is built with its debug checks, which include a lock-order graph updated on
  // every mutex acquisition (a measurable share of a 10,000-agent fan-out). The tests keep it on
  // to catch lock-order inversions; the server does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Block the stop signals before any thread starts, so every thread inherits the mask and
  // main receives them with sigwait. SIGPIPE: a peer going away is not a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<rxfleet::server::FleetServer>> server =
      rxfleet::server::FleetServer::Start(options);
  if (!server.ok()) {
    std::cerr << "rxfleet-server: " << server.status().message() << "\n";
    return absl::IsInvalidArgument(server.status()) ? kExitUsage : kExitRuntime;
  }
  // systemd (rxfleet-server.service is Type=notify with WatchdogSec): ready once the database
  // is open and both listeners are bound; then a watchdog ping at half the interval, sent
  // from this thread while it waits for a stop signal.
  sd_notify(0, "READY=1\nSTATUS=serving");
  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  const absl::Duration ping_every =
      watchdog ? absl::Microseconds(static_cast<int64_t>(watchdog_usec / 2)) : absl::Hours(24);
  int signal_number = -1;
  while (signal_number < 0) {
    const timespec wait = absl::ToTimespec(ping_every);
    signal_number = ::sigtimedwait(&signals, nullptr, &wait);
    if (signal_number < 0 && watchdog) sd_notify(0, "WATCHDOG=1");
  }
  sd_notify(0, "STOPPING=1");
  (*server)->Shutdown(kShutdownGrace);
  return kExitOk;
}
