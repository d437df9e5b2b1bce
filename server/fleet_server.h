#pragma once

// rxfleet-server assembled: store, registry, policies, events, AgentService and FleetService on
// one gRPC server (callback API), the push debouncer, the registry's write-behind flusher and
// the HTTP endpoint. main.cc parses flags into FleetServerOptions; tests start it in-process.

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/link_limits.h"
#include "server/api/admission.h"
#include "server/store/database_lock.h"

namespace rxfleet::server {

class AgentServiceImpl;
class Authorizer;
class ChangeFeed;
class LeaseKeeper;
class Debouncer;
class EventLog;
class ExperimentController;
class FleetApi;
class FleetServiceImpl;
class HttpServer;
class PolicySet;
class Registry;
class Store;
class TokenStore;
class WorkQueue;
struct ServerMetrics;

/// Default gRPC listen address. 7443 ("7" for the fleet, "443" for TLS); loopback by default,
/// so a fresh install exposes nothing until it is configured.
inline constexpr std::string_view kDefaultListen = "127.0.0.1:7443";

/// Keepalive policy (docs/SERVER.md, "Keepalive"). Agents ping every 20 s without data and
/// give up after 10 s; the server accepts pings down to every 10 s without data (twice the
/// agents' rate), also with no call open, and pings idle agents itself every 60 s (20 s
/// timeout). A client pinging faster gets GOAWAY too_many_pings after two strikes.
inline constexpr absl::Duration kMinRecvPingIntervalWithoutData = absl::Seconds(10);
inline constexpr absl::Duration kServerKeepaliveTime = absl::Seconds(60);
inline constexpr absl::Duration kServerKeepaliveTimeout = absl::Seconds(20);

/// Largest message the server accepts (an inventory of 256 adapters is far smaller).
inline constexpr int kMaxReceiveMessageBytes = 4 << 20;

/// Smallest --max-bundle-bytes (bytes).
inline constexpr size_t kMinBundleBytes = 64 << 10;

struct FleetServerOptions {
  /// gRPC listen address HOST:PORT (port 0 = any free port; read grpc_port()).
  std::string listen = std::string(kDefaultListen);
  /// SQLite database file, or a PostgreSQL connection URI (see server/store/store.h).
  std::string db_path;
  /// HTTP listen address for /metrics and /sd/agents; empty disables HTTP.
  std::string http_listen;
  /// A host is stale after this long without messages or without ACKing a sent bundle.
  absl::Duration stale_after = absl::Minutes(5);
  /// Pushes start at least this far apart; a change after a quiet spell is pushed at once
  /// (server/registry/debouncer.h). [0, 10 s].
  absl::Duration push_debounce = absl::Milliseconds(100);
  /// How often registry and event changes are written to the database.
  absl::Duration flush_interval = absl::Seconds(1);
  /// Fleet (non-audit) events kept, and their maximum age.
  size_t max_events = 10000;
  absl::Duration event_max_age = absl::Hours(24 * 7);
  /// Audit events are kept this long, whatever the volume of other events (--audit-retention).
  absl::Duration audit_max_age = absl::Hours(24 * 365);
  /// Metric windows of experiments that ended longer ago than this are deleted.
  absl::Duration experiment_retention = absl::Hours(24 * 30);
  /// FleetService worker threads (handlers that read the registry and write SQLite).
  size_t api_threads = 2;
  /// Smallest interval between client pings without data that the server tolerates (see
  /// kMinRecvPingIntervalWithoutData; tests shorten it together with the agent's interval).
  absl::Duration min_recv_ping_interval = kMinRecvPingIntervalWithoutData;
  /// TLS of the gRPC port (docs/SECURITY.md); unset = insecure: plaintext and no
  /// authentication (rxfleet-server --insecure, and in-process tests). With TLS, agents must
  /// present a client certificate signed by `client_ca_file` whose CN or DNS SAN is their host
  /// id, and FleetService calls need a bearer token from the database's token table.
  struct Tls {
    std::string cert_file;       ///< server certificate chain (PEM)
    std::string key_file;        ///< its private key (PEM)
    std::string client_ca_file;  ///< CA that signs agent certificates (PEM)
  };
  std::optional<Tls> tls;
  /// An agent stream that sends no Hello this long after opening is closed.
  absl::Duration hello_timeout = absl::Seconds(30);
  /// Largest message accepted from a client (bytes).
  int max_receive_message_bytes = kMaxReceiveMessageBytes;
  /// HTTP/2 streams one client connection may have open at once (gRPC
  /// max_concurrent_streams); further streams wait in the client until one ends.
  int max_concurrent_streams = 100;
  /// Agent streams without a Hello yet, in total and per peer IP (see AgentServiceOptions).
  size_t max_pending_hello = 1024;
  size_t max_pending_hello_per_peer = 64;
  /// Completion queues (each with a thread) the agent streams are sharded over, 1..256, and
  /// whether a push starts each queue's writes on that queue's thread (AgentServiceOptions).
  size_t agent_completion_queues = 8;
  bool push_on_queue_threads = true;
  /// Extra integer gRPC channel arguments (name, value); one named like a setting of the
  /// server's own (e.g. grpc.max_concurrent_streams) replaces it; for tuning and benchmarks
  /// (--grpc-arg). Names are gRPC's ("grpc.experimental.tcp_read_chunk_size"); gRPC ignores
  /// unknown names.
  std::vector<std::pair<std::string, int>> grpc_int_args;
  /// New agent streams accepted per second (token bucket rate, > 0) and back to back (burst,
  /// >= 1), and agent streams open at once (connected or Hello-pending, >= 1); beyond them a
  /// stream is refused with a retry hint (server/api/admission.h).
  double agent_accept_rate = AdmissionOptions{}.accept_rate;
  size_t agent_accept_burst = AdmissionOptions{}.accept_burst;
  size_t max_agent_streams = AdmissionOptions{}.max_streams;
  /// Largest bundle message a host may get (bytes, 64 KiB .. common::kMaxServerMessageBytes,
  /// what agents accept): policy and experiment changes that would make one larger are
  /// refused (server/api/bundle_limit.h).
  size_t max_bundle_bytes = common::kMaxServerMessageBytes;
  /// /sd/agents publishes a metrics address only if its host is the IP address the agent's
  /// stream came from (SdTargetPolicy; --sd-require-peer-address).
  bool sd_require_peer_address = false;
  /// Adapters one host may report, across updates (RegistryOptions::max_adapters_per_host).
  size_t max_adapters_per_host = 256;
  /// Memory gRPC may use for connections and calls (a grpc::ResourceQuota, bytes); beyond it
  /// new connections and streams are refused instead of growing the process.
  size_t grpc_memory_bytes = size_t{512} << 20;
  /// gRPC server reflection (grpc.reflection.v1alpha.ServerReflection): lists the services and
  /// serves their public schema, without a token (docs/SECURITY.md). False: not served
  /// (UNIMPLEMENTED), --no-reflection.
  bool reflection = true;
  /// GRPC_ARG_MAX_CONNECTION_AGE_MS: a connection older than this is sent GOAWAY, so streams
  /// spread over the replicas behind a TCP load balancer as they reconnect; gRPC varies it by
  /// +/-10% per connection. Zero = off; else kMinConnectionAge..kMaxConnectionAge.
  absl::Duration max_connection_age = absl::ZeroDuration();
  /// GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS: how long calls on an aged connection may go on
  /// after its GOAWAY before they are cancelled (agents reconnect at once); 0..kMaxConnectionAge.
  absl::Duration max_connection_age_grace = absl::Seconds(30);
  /// PostgreSQL only: how often the server reads the configuration revision when no wake-up
  /// arrives (jittered +/-25%; server/store/change_feed.h), (0, 1 min]; --config-poll-interval.
  absl::Duration config_poll_interval = absl::Seconds(2);
  /// This process among the servers on one database (lease holder names, logs); 1..256
  /// printable ASCII characters. Empty: "<hostname>:<gRPC port>" (--replica-id).
  std::string replica_id;
  /// TTL of the singleton jobs' leases (experiment scheduling, guardrails, window retention):
  /// another server takes a job over within about ttl + ttl/3 after its holder died
  /// (server/store/lease_keeper.h). [kMinLeaseTtl, kMaxLeaseTtl]; --lease-ttl.
  absl::Duration lease_ttl = absl::Seconds(15);
};

/// Bounds of FleetServerOptions::max_connection_age (gRPC takes at most INT_MAX ms, about 24.8
/// days; ages of seconds only make sense in tests, production uses tens of minutes).
inline constexpr absl::Duration kMinConnectionAge = absl::Seconds(1);
inline constexpr absl::Duration kMaxConnectionAge = absl::Hours(24 * 24);

class FleetServer {
 public:
  /// Opens the database, loads the state and starts serving. Errors: InvalidArgument for bad
  /// options, the store's errors (see Store::Open), FailedPrecondition if another
  /// rxfleet-server holds the database (SQLite: its `<db_path>.lock`; PostgreSQL: the store's
  /// server lock), Unavailable if a port cannot be bound or the database cannot be reached.
  static absl::StatusOr<std::unique_ptr<FleetServer>> Start(const FleetServerOptions& options);

  /// Shutdown(absl::Seconds(5)) if not done yet.
  ~FleetServer();
  FleetServer(const FleetServer&) = delete;
  FleetServer& operator=(const FleetServer&) = delete;

  /// Graceful stop (drain), bounded by `timeout` for the gRPC part:
  ///  1. the standard health service (grpc.health.v1.Health) answers NOT_SERVING for "",
  ///     rxfleet.v1.AgentService and rxfleet.v1.FleetService;
  ///  2. agent streams end with UNAVAILABLE("server draining; reconnect") and trailing
  ///     metadata kRetryAfterMetadataKey (uniform in 0..`agent_spread` ms), one after another
  ///     at jittered times spread over `agent_spread` (clamped to `timeout`), so agents do not
  ///     all reconnect at once; a Hello arriving meanwhile is ended the same way. Health
  ///     checks and FleetService calls are still answered during this phase;
  ///  3. WatchEvents watches end with UNAVAILABLE, gRPC stops accepting (GOAWAY) and running
  ///     calls may finish until `timeout` after the start (then they are cancelled; open
  ///     health Watch calls last until then);
  ///  4. pushes stop and the last registry changes are written to the database.
  /// Blocks for all of it. Idempotent.
  void Shutdown(absl::Duration timeout, absl::Duration agent_spread = absl::ZeroDuration());

  int grpc_port() const { return grpc_port_; }
  /// FleetServerOptions::replica_id, or its default once the port is bound.
  const std::string& replica_id() const { return replica_id_; }
  /// 0 when HTTP is disabled.
  int http_port() const;

 private:
  FleetServer();
  void FlushLoop();
  /// Writes dirty hosts and new events; logs (once per failure streak) and retries later on
  /// failure. Returns whether the write succeeded.
  bool Flush();
  /// PostgreSQL: reads the hosts other replicas wrote since the last call
  /// (Store::LoadHostChanges) into the registry, so every replica lists the whole fleet; logs
  /// once per failure streak and retries with the next flush.
  void FollowRegistry();
  /// PostgreSQL: brings the events every server stored since the last call into the event
  /// log (Store::LoadEventsAfter, EventLog::ApplyStored), in version order; logs once per
  /// failure streak and retries with the next flush.
  void FollowEvents();
  /// The change feed's callback: re-reads the experiments (ExperimentController::Reload) and
  /// the configuration (Store::LoadConfig) and, when its bundle version is newer than the one
  /// in memory, replaces the policies and pushes.
  absl::Status ReloadConfig(uint64_t revision, bool resync);

  FleetServerOptions options_;
  int grpc_port_ = 0;
  /// `<db_path>.lock` for the server's lifetime, so a second server cannot share the database
  /// (SQLite only; released after the store is closed).
  std::optional<DatabaseFileLock> db_lock_;

  // Construction order = dependency order; destroyed in reverse.
  std::unique_ptr<Store> store_;
  std::unique_ptr<TokenStore> tokens_;  // null in insecure mode
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<PolicySet> policies_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<FleetApi> fleet_api_;
  std::unique_ptr<ExperimentController> experiments_;
  std::unique_ptr<WorkQueue> work_;
  std::unique_ptr<FleetServiceImpl> fleet_service_;
  std::unique_ptr<Debouncer> debouncer_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<ChangeFeed> changes_;  // PostgreSQL only
  std::unique_ptr<LeaseKeeper> experiments_lease_;
  std::string replica_id_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool flush_failing_ = false;  // flush thread only (and Shutdown after joining it)
  // Local audit events (Store::PendingLocalAudit) already recorded in events_ but not yet
  // deleted from the file by a successful save. Flush thread only, like flush_failing_.
  std::set<int64_t> local_audit_recorded_;
  // FollowRegistry's position (HostChanges::cursor) and failure streak. Flush thread only.
  uint64_t registry_cursor_ = 0;
  bool follow_failing_ = false;
  bool follow_events_failing_ = false;
  std::thread flusher_;
};

}  // namespace rxfleet::server
