// rxfleet-server: flags -> FleetServerOptions -> FleetServer; SIGTERM/SIGINT -> graceful stop.

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/service_notifier.h"
#include "rxfleet/version.h"
#include "server/fleet_server.h"
#include "server/http/http_server.h"
#include "server/registry/audit_event.h"
#include "server/store/migrate.h"
#include "server/store/store.h"
#include "server/store/token_store.h"

namespace {

constexpr int kExitOk = 0;
// A second SIGTERM/SIGINT cut the drain short (128 + SIGTERM, as a killed process reports).
constexpr int kExitSecondSignal = 128 + SIGTERM;
// Sent by main to the second-signal thread when the drain is over.
constexpr int kDrainFinished = SIGUSR1;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// --drain-timeout bounds: the default stays well inside systemd's TimeoutStopSec=30s.
constexpr absl::Duration kMaxDrainTimeout = absl::Minutes(10);

// A CLI11 validator for absl durations ("300ms", "5m", "1h30m") of at least `min`.
CLI::Validator DurationValidator(absl::Duration min = absl::ZeroDuration()) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        absl::Duration d;
        if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration() ||
            d == absl::InfiniteDuration()) {
          return "must be a duration like 100ms, 30s or 5m";
        }
        if (d < min) return absl::StrCat("must be at least ", absl::FormatDuration(min));
        return "";
      },
      "DURATION");
}

// The audit actor of `rxfleet-server tokens`: "local administrator (OS user alice)"; under sudo
// the invoking user is named too: "local administrator (OS user root, via sudo from alice)".
std::string LocalAdministrator() {
  const passwd* entry = ::getpwuid(::geteuid());
  std::string user =
      entry != nullptr ? std::string(entry->pw_name) : absl::StrCat("uid ", ::geteuid());
  const char* sudo_user = std::getenv("SUDO_USER");
  if (sudo_user != nullptr && sudo_user[0] != '\0') {
    absl::StrAppend(&user, ", via sudo from ", sudo_user);
  }
  return absl::StrCat("local administrator (OS user ", user, ")");
}

// `rxfleet-server tokens create|list|revoke`: token administration on the database file, for
// the local administrator (works while the server runs; the server reads tokens per call).
int RunTokens(CLI::App& tokens, const std::string& db_path, const std::string& name,
              const std::string& role_name) {
  // Only `create` may start a new database (setting tokens up before the first server start);
  // listing or revoking on a mistyped path must not look like "no tokens".
  std::error_code exists_error;
  if (!tokens.got_subcommand("create") && !rxfleet::server::IsPostgresUri(db_path) &&
      !std::filesystem::exists(db_path, exists_error)) {
    std::cerr << "rxfleet-server tokens: no database at " << db_path
              << " (check --db; `tokens create` creates one)\n";
    return kExitRuntime;
  }
  absl::StatusOr<std::unique_ptr<rxfleet::server::Store>> store =
      rxfleet::server::Store::Open({db_path});
  if (!store.ok()) {
    std::cerr << "rxfleet-server tokens: " << store.status().message() << "\n";
    return kExitRuntime;
  }
  absl::StatusOr<std::unique_ptr<rxfleet::server::TokenStore>> opened =
      rxfleet::server::TokenStore::Open(db_path);
  if (!opened.ok()) {
    std::cerr << "rxfleet-server tokens: " << opened.status().message() << "\n";
    return kExitRuntime;
  }
  rxfleet::server::TokenStore& token_store = **opened;
  // Every change is audited like the CreateToken/RevokeToken RPCs; the server picks the event
  // up from the file (running now or at its next start).
  const std::string actor = LocalAdministrator();
  const auto audit = [&](const char* action, const absl::Status& result) {
    rxfleet::server::AuditEntry entry;
    entry.kind = "Token";
    entry.name = name;
    entry.action = action;
    entry.actor = actor;
    entry.result = result;
    if (absl::Status s =
            (*store)->AddLocalAudit(rxfleet::server::BuildAuditEvent(entry), absl::Now());
        !s.ok()) {
      std::cerr << "rxfleet-server tokens: warning: the change is not audited: " << s.message()
                << "\n";
    }
  };
  const auto fail = [](const absl::Status& status) {
    std::cerr << "rxfleet-server tokens: " << status.message() << "\n";
    return absl::IsInvalidArgument(status) ? kExitUsage : kExitRuntime;
  };
  if (tokens.got_subcommand("create")) {
    absl::StatusOr<rxfleet::server::Role> role = rxfleet::server::ParseRole(role_name);
    if (!role.ok())
      return fail(absl::InvalidArgumentError(absl::StrCat("--role: ", role.status().message())));
    absl::StatusOr<rxfleet::server::CreatedToken> created =
        token_store.Create(name, *role, actor, absl::Now());
    audit("CreateToken", created.status());
    if (!created.ok()) return fail(created.status());
    std::cerr << "created token '" << name << "' with role " << role_name
              << "; it is shown only now:\n";
    std::cout << created->token << "\n";
    return kExitOk;
  }
  if (tokens.got_subcommand("revoke")) {
    absl::StatusOr<rxfleet::server::TokenRecord> revoked = token_store.Revoke(name);
    audit("RevokeToken", revoked.status());
    if (!revoked.ok()) return fail(revoked.status());
    std::cout << "revoked token '" << revoked->name << "' (role "
              << rxfleet::server::RoleName(revoked->role) << ")\n";
    return kExitOk;
  }
  absl::StatusOr<std::vector<rxfleet::server::TokenRecord>> records = token_store.List();
  if (!records.ok()) return fail(records.status());
  std::cout << "NAME\tROLE\tCREATED\tCREATED BY\n";
  for (const rxfleet::server::TokenRecord& record : *records) {
    std::cout << record.name << "\t" << rxfleet::server::RoleName(record.role) << "\t"
              << absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", record.create_time, absl::UTCTimeZone())
              << "\t" << record.created_by << "\n";
  }
  return kExitOk;
}

// `rxfleet-server migrate-store --from sqlite:PATH --to postgresql://...`: copies a stopped
// single server's SQLite database into an empty PostgreSQL database.
// The URI is never echoed: it may hold a password.
int RunMigrateStore(const std::string& from, const std::string& to) {
  absl::StatusOr<std::string> path = rxfleet::server::SqlitePathOfSource(from);
  if (!path.ok()) {
    std::cerr << "rxfleet-server migrate-store: " << path.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<rxfleet::server::MigrateSummary> summary =
      rxfleet::server::MigrateStore(*path, to);
  if (!summary.ok()) {
    std::cerr << "rxfleet-server migrate-store: " << summary.status().message() << "\n";
    return absl::IsInvalidArgument(summary.status()) ? kExitUsage : kExitRuntime;
  }
  std::cout << "copied " << summary->from << " into " << summary->to << ": " << summary->policies
            << " policies, " << summary->hosts << " hosts, " << summary->adapters << " adapters, "
            << summary->events << " events, " << summary->experiments << " experiments, "
            << summary->tunings << " hold tunings, " << summary->windows << " metric windows, "
            << summary->local_audit << " pending local audit events, " << summary->tokens
            << " tokens; revision " << summary->revision << ", bundle version "
            << summary->bundle_version << "\n"
            << "start the server(s) with --db and the URI given to --to\n";
  return kExitOk;
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
      "pushed to them over gRPC (ACK/NACK), persisted in SQLite or in PostgreSQL (shared by "
      "replicas).\n"
      "TLS is required: pass --tls-cert, --tls-key and --tls-client-ca (agents authenticate with "
      "client certificates, operators with bearer tokens: `rxfleet-server tokens create`), or "
      "--insecure for plaintext without authentication (demos, tests). See docs/SECURITY.md.\n"
      "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime error (database, ports), 2 usage.",
      "rxfleet-server");
  app.set_version_flag("--version", std::string(rxfleet::kVersion));
  app.add_option("--listen", options.listen,
                 "gRPC listen address HOST:PORT (AgentService and FleetService)")
      ->default_val(options.listen)
      ->type_name("HOST:PORT");
  app.add_option("--db", options.db_path,
                 "SQLite database file (created with its directory if missing), or a "
                 "PostgreSQL connection URI postgresql://USER@HOST:PORT/DBNAME (the database "
                 "must exist; unset parts from the PG* environment variables)")
      ->default_val(options.db_path)
      ->type_name("PATH|URI");
  app.add_option("--http-listen", options.http_listen,
                 "HTTP listen address for /metrics, /sd/agents and /healthz, or 'none'")
      ->default_val(options.http_listen)
      ->type_name("HOST:PORT|none");
  app.add_option("--stale-after", stale_after,
                 "mark a host stale after this long without messages or without ACKing a "
                 "bundle sent to it (at least 1s)")
      ->default_val(stale_after)
      ->check(DurationValidator(absl::Seconds(1)));
  app.add_option("--push-debounce", push_debounce,
                 "start pushes at least this far apart: a change after a quiet spell is pushed at "
                 "once, later ones within the window ride along with the next push (0..10s)")
      ->default_val(push_debounce)
      ->check(DurationValidator());
  app.add_option("--experiment-retention", experiment_retention,
                 "delete the metric windows of experiments that ended longer ago than this "
                 "(the experiments themselves are kept)")
      ->default_val(experiment_retention)
      ->check(DurationValidator());
  std::string audit_retention = "8760h";
  app.add_option("--audit-retention", audit_retention,
                 "keep audit events this long (never dropped for the volume of other events; "
                 "at least 1h)")
      ->default_val(audit_retention)
      ->check(DurationValidator(absl::Hours(1)));
  app.add_option("--max-concurrent-streams", options.max_concurrent_streams,
                 "gRPC streams one client connection may have open at once")
      ->default_val(options.max_concurrent_streams)
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-pending-hello", options.max_pending_hello,
                 "agent streams without a Hello yet, in total; more are refused")
      ->default_val(options.max_pending_hello)
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-pending-hello-per-peer", options.max_pending_hello_per_peer,
                 "agent streams without a Hello yet from one IP address; more are refused")
      ->default_val(options.max_pending_hello_per_peer)
      ->check(CLI::Range(1, 1000000));
  app.add_option("--agent-completion-queues", options.agent_completion_queues,
                 "completion queues (one thread each) the agent streams are sharded over")
      ->default_val(options.agent_completion_queues)
      ->check(CLI::Range(1, 256));
  app.add_option("--push-on-queue-threads", options.push_on_queue_threads,
                 "start a push's writes on each completion queue's own thread (false: all on "
                 "the pushing thread)")
      ->default_val(options.push_on_queue_threads);
  std::vector<std::string> grpc_args;
  app.add_option("--grpc-arg", grpc_args,
                 "extra integer gRPC channel argument NAME=VALUE, overriding the server's own "
                 "(for tuning and benchmarks; repeatable)")
      ->check([](const std::string& arg) -> std::string {
        const size_t eq = arg.find('=');
        int value = 0;
        if (eq == 0 || eq == std::string::npos || !absl::SimpleAtoi(arg.substr(eq + 1), &value)) {
          return "expected NAME=INTEGER (a 32-bit signed integer)";
        }
        return "";
      });
  app.add_option("--agent-accept-rate", options.agent_accept_rate,
                 "new agent streams accepted per second on average; more are refused with "
                 "RESOURCE_EXHAUSTED and a retry hint the agents honour (reconnect storms)")
      ->default_val(options.agent_accept_rate)
      ->check(CLI::Range(0.01, 1e6));
  app.add_option("--agent-accept-burst", options.agent_accept_burst,
                 "new agent streams accepted back to back after a quiet period")
      ->default_val(options.agent_accept_burst)
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-agent-streams", options.max_agent_streams,
                 "agent streams this server holds at once (connected or waiting for their "
                 "Hello); more are refused with RESOURCE_EXHAUSTED and a retry hint")
      ->default_val(options.max_agent_streams)
      ->check(CLI::Range(1, 10000000));
  app.add_option("--max-bundle-bytes", options.max_bundle_bytes,
                 "largest bundle message a host may get; policy and experiment changes that "
                 "would make one larger are refused (agents accept at most 4194304)")
      ->default_val(options.max_bundle_bytes)
      ->check(CLI::Range(size_t{rxfleet::server::kMinBundleBytes},
                         static_cast<size_t>(rxfleet::common::kMaxServerMessageBytes)));
  app.add_flag("--sd-require-peer-address", options.sd_require_peer_address,
               "/sd/agents lists an agent's metrics address only if its host is the IP address "
               "the agent connects from (link-local and other unscrapable addresses are always "
               "left out)");
  app.add_option("--max-adapters-per-host", options.max_adapters_per_host,
                 "adapters one host may report (across updates); an inventory or update "
                 "beyond it is refused and ends the agent's stream")
      ->default_val(options.max_adapters_per_host)
      ->check(CLI::Range(1, 65536));
  size_t grpc_memory_mb = options.grpc_memory_bytes >> 20;
  app.add_option("--grpc-memory-mb", grpc_memory_mb,
                 "memory gRPC may use for connections and calls (MiB); beyond it new "
                 "connections and streams are refused")
      ->default_val(grpc_memory_mb)
      ->check(CLI::Range(16, 1 << 20));
  std::string drain_timeout = "10s";
  app.add_option("--drain-timeout", drain_timeout,
                 "at SIGTERM/SIGINT: health NOT_SERVING, agent streams ended with a retry delay "
                 "over the first half of this, then running calls may finish until it ends "
                 "(0..10m)")
      ->default_val(drain_timeout)
      ->check(DurationValidator());
  std::string max_connection_age = "0s";
  app.add_option("--max-connection-age", max_connection_age,
                 "send GOAWAY to connections older than this (+/-10% jitter), so agent streams "
                 "rebalance across replicas behind a TCP load balancer; 0 = off, else 1s..576h")
      ->default_val(max_connection_age)
      ->check(DurationValidator());
  std::string max_connection_age_grace = "30s";
  app.add_option("--max-connection-age-grace", max_connection_age_grace,
                 "after that GOAWAY, calls on the old connection may go on this long before "
                 "they are cancelled")
      ->default_val(max_connection_age_grace)
      ->check(DurationValidator());
  std::string config_poll_interval = "2s";
  app.add_option("--config-poll-interval", config_poll_interval,
                 "PostgreSQL: read the configuration revision at least this often (+/-25% "
                 "jitter) besides the NOTIFY wake-ups, so a change made through another process "
                 "is never missed for longer (0..1m, exclusive of 0)")
      ->default_val(config_poll_interval)
      ->check(DurationValidator());
  std::string replica_id;
  app.add_option("--replica-id", replica_id,
                 "this server among the servers on one database, in lease holders and logs "
                 "(default: HOSTNAME:GRPC-PORT)");
  std::string lease_ttl = "15s";
  app.add_option("--lease-ttl", lease_ttl,
                 "lease of the experiment scheduler: another server takes over within about "
                 "1.33x this after its holder is gone (1s..10m)")
      ->default_val(lease_ttl)
      ->check(DurationValidator());
  bool no_reflection = false;
  app.add_flag("--no-reflection", no_reflection,
               "do not serve gRPC server reflection (the public API schema, for grpcurl and "
               "similar tools; on by default)");
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool insecure = false;
  app.add_option("--tls-cert", tls_cert, "TLS: server certificate chain (PEM)")->type_name("PATH");
  app.add_option("--tls-key", tls_key, "TLS: server private key (PEM)")->type_name("PATH");
  app.add_option("--tls-client-ca", tls_client_ca,
                 "TLS: CA certificate(s) that sign agent certificates (PEM)")
      ->type_name("PATH");
  app.add_flag("--insecure", insecure,
               "Plaintext gRPC without any authentication: anyone who reaches the port can "
               "change policies. For demos and tests only");

  std::string token_name;
  std::string token_role;
  CLI::App* tokens = app.add_subcommand(
      "tokens", "Operator bearer tokens in the database (works while the server runs)");
  tokens->require_subcommand(1);
  CLI::App* create = tokens->add_subcommand(
      "create", "Create a token and print it once on stdout: tokens create NAME --role ROLE");
  create->add_option("NAME", token_name, "Token name ([A-Za-z0-9._-], up to 64)")->required();
  create->add_option("--role", token_role, "viewer, operator or admin")->required();
  CLI::App* list = tokens->add_subcommand("list", "List tokens (names and roles, no secrets)");
  CLI::App* revoke = tokens->add_subcommand("revoke", "Revoke a token at once: tokens revoke NAME");
  revoke->add_option("NAME", token_name, "Token name")->required();
  for (CLI::App* sub : {create, list, revoke}) {
    sub->add_option("--db", options.db_path,
                    "Database of the server: SQLite file or postgresql:// URI")
        ->default_val(options.db_path)
        ->type_name("PATH|URI");
  }

  std::string migrate_from;
  std::string migrate_to;
  CLI::App* migrate = app.add_subcommand(
      "migrate-store",
      "Copy a stopped server's SQLite database into an empty PostgreSQL database (then start "
      "the servers with --db postgresql://...)");
  migrate->add_option("--from", migrate_from, "The SQLite database: sqlite:PATH")
      ->required()
      ->type_name("sqlite:PATH");
  migrate
      ->add_option("--to", migrate_to,
                   "The empty PostgreSQL database: postgresql://user@host:port/dbname "
                   "(unset parts from the PG* environment variables)")
      ->required()
      ->type_name("URI");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, std::cout, std::cerr);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (tokens->parsed()) return RunTokens(*tokens, options.db_path, token_name, token_role);
  if (migrate->parsed()) return RunMigrateStore(migrate_from, migrate_to);

  const bool any_tls = !tls_cert.empty() || !tls_key.empty() || !tls_client_ca.empty();
  if (insecure && any_tls) {
    std::cerr << "rxfleet-server: --insecure cannot be combined with --tls-* files; choose one\n";
    return kExitUsage;
  }
  if (!insecure) {
    if (tls_cert.empty() || tls_key.empty() || tls_client_ca.empty()) {
      std::cerr << "rxfleet-server: TLS is required: pass --tls-cert, --tls-key and "
                   "--tls-client-ca (see docs/SECURITY.md; scripts/rxfleet-certs makes them), or "
                   "--insecure for plaintext without authentication\n";
      return kExitUsage;
    }
    options.tls = rxfleet::server::FleetServerOptions::Tls{tls_cert, tls_key, tls_client_ca};
  }
  if (options.http_listen == "none") options.http_listen.clear();
  options.grpc_memory_bytes = grpc_memory_mb << 20;
  for (const std::string& arg : grpc_args) {
    const size_t eq = arg.find('=');
    int value = 0;
    (void)absl::SimpleAtoi(arg.substr(eq + 1), &value);  // checked above
    options.grpc_int_args.emplace_back(arg.substr(0, eq), value);
  }
  (void)absl::ParseDuration(stale_after, &options.stale_after);
  (void)absl::ParseDuration(audit_retention, &options.audit_max_age);
  (void)absl::ParseDuration(push_debounce, &options.push_debounce);
  (void)absl::ParseDuration(experiment_retention, &options.experiment_retention);
  (void)absl::ParseDuration(max_connection_age, &options.max_connection_age);
  (void)absl::ParseDuration(max_connection_age_grace, &options.max_connection_age_grace);
  (void)absl::ParseDuration(config_poll_interval, &options.config_poll_interval);
  (void)absl::ParseDuration(lease_ttl, &options.lease_ttl);
  options.replica_id = replica_id;
  options.reflection = !no_reflection;
  absl::Duration drain;
  (void)absl::ParseDuration(drain_timeout, &drain);
  if (drain > kMaxDrainTimeout) {
    std::cerr << "rxfleet-server: --drain-timeout " << drain_timeout << " is out of range 0..10m\n";
    return kExitUsage;
  }

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
  sigset_t blocked = signals;
  sigaddset(&blocked, kDrainFinished);
  ::pthread_sigmask(SIG_BLOCK, &blocked, nullptr);

  absl::StatusOr<std::unique_ptr<rxfleet::server::FleetServer>> server =
      rxfleet::server::FleetServer::Start(options);
  if (!server.ok()) {
    std::cerr << "rxfleet-server: " << server.status().message() << "\n";
    return absl::IsInvalidArgument(server.status()) ? kExitUsage : kExitRuntime;
  }
  // systemd (rxfleet-server.service is Type=notify with WatchdogSec): ready once the database
  // is open and both listeners are bound; then watchdog pings from this thread while it waits
  // for a stop signal.
  rxfleet::common::ServiceNotifier notifier(absl::Now());
  notifier.Ready("serving");
  int signal_number = -1;
  while (signal_number < 0) {
    notifier.PingIfDue(absl::Now());
    const absl::Duration until_ping = notifier.NextPing() - absl::Now();
    const timespec wait =
        absl::ToTimespec(std::clamp(until_ping, absl::ZeroDuration(), absl::Hours(24)));
    signal_number = ::sigtimedwait(&signals, nullptr, &wait);
  }
  notifier.Stopping();
  // A second stop signal during the drain means "now" (an operator's second Ctrl-C, or a
  // supervisor that does not wait): exit at once, as a kill would. Every write the store
  // acknowledged is already committed; what the drain would still have done is lost.
  std::thread second_signal([&blocked] {
    int second = -1;
    if (::sigwait(&blocked, &second) == 0 && second != kDrainFinished) {
      std::cerr << "rxfleet-server: second stop signal during the drain: exiting now\n";
      std::_Exit(kExitSecondSignal);
    }
  });
  // Agent streams end over the first half of the drain, so running calls keep the rest.
  (*server)->Shutdown(drain, drain / 2);
  // Wake the waiting thread with a signal of its set, sent to it alone.
  ::pthread_kill(second_signal.native_handle(), kDrainFinished);
  second_signal.join();
  return kExitOk;
}
