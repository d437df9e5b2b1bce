#include "server/fleet_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/listen_error.h"
#include "common/net_address.h"
#include "rxfleet/version.h"
#include "server/api/agent_service.h"
#include "server/api/fleet_api.h"
#include "server/api/fleet_service.h"
#include "server/api/log_limiter.h"
#include "server/api/work_queue.h"
#include "server/auth/authorizer.h"
#include "server/experiments/controller.h"
#include "server/http/http_server.h"
#include "server/http/metrics.h"
#include "server/log.h"
#include "server/registry/debouncer.h"
#include "server/registry/event_log.h"
#include "server/registry/policy_set.h"
#include "server/registry/registry.h"
#include "server/store/change_feed.h"
#include "server/store/lease_keeper.h"
#include "server/store/store.h"
#include "server/store/token_store.h"

namespace rxfleet::server {
namespace {

constexpr size_t kApiBacklog = 1024;

// Removes the server reflection plugin from one builder (--no-reflection).
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                         return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(
                                    plugin.get()) != nullptr;
                       }),
        plugins->end());
  }
};

// "<hostname>:<port>": unique among servers on one database as long as hosts have distinct
// names; the same again after a restart on the same port, so a restarted server renews its own
// unexpired leases instead of waiting for them to expire.
std::string DefaultReplicaId(int port) {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return absl::StrCat("localhost:", port);
  }
  std::string host(name);
  for (char& c : host) {
    if (c <= ' ' || c >= 0x7f) c = '_';
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const char* what) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("TLS: the ", what, " file is required"));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("TLS: cannot read the ", what, " file ", path,
                                                   " (missing, unreadable or "
                                                   "not PEM)"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(
    const FleetServerOptions::Tls& tls) {
  absl::StatusOr<std::string> cert = ReadPemFile(tls.cert_file, "server certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(tls.key_file, "server key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadPemFile(tls.client_ca_file, "client CA");
  if (!ca.ok()) return ca.status();
  grpc::SslServerCredentialsOptions ssl(
      // Operators connect without a certificate (bearer token), agents with one; a certificate
      // that is sent must verify against the fleet CA.
      GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = *std::move(ca);
  ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

FleetServer::FleetServer() = default;

absl::StatusOr<std::unique_ptr<FleetServer>> FleetServer::Start(const FleetServerOptions& options) {
  if (absl::Status listen = common::ValidateHostPort(options.listen); !listen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen: ", listen.message()));
  }
  if (options.stale_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("stale-after must be positive");
  }
  if (options.push_debounce < absl::ZeroDuration() || options.push_debounce > absl::Seconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push-debounce ", absl::FormatDuration(options.push_debounce), " is out of range 0..10s"));
  }
  if (options.flush_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("flush interval must be positive");
  }
  if (options.hello_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("hello timeout must be positive");
  }
  if (options.max_adapters_per_host < 1) {
    return absl::InvalidArgumentError("max-adapters-per-host must be at least 1");
  }
  if (options.max_receive_message_bytes <= 0) {
    return absl::InvalidArgumentError("max receive message size must be positive");
  }
  if (options.max_bundle_bytes < kMinBundleBytes ||
      options.max_bundle_bytes > static_cast<size_t>(common::kMaxServerMessageBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max-bundle-bytes ", options.max_bundle_bytes, " is out of range ", kMinBundleBytes, "..",
        common::kMaxServerMessageBytes, " (agents accept no larger message)"));
  }
  if (options.max_connection_age != absl::ZeroDuration() &&
      (options.max_connection_age < kMinConnectionAge ||
       options.max_connection_age > kMaxConnectionAge)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max-connection-age ", absl::FormatDuration(options.max_connection_age),
                     " is out of range: 0 (off) or ", absl::FormatDuration(kMinConnectionAge), "..",
                     absl::FormatDuration(kMaxConnectionAge)));
  }
  if (options.replica_id.size() > 256 ||
      !std::all_of(options.replica_id.begin(), options.replica_id.end(),
                   [](char c) { return c > ' ' && c < 0x7f; })) {
    return absl::InvalidArgumentError(
        "replica-id must be 1..256 printable ASCII characters without spaces");
  }
  if (options.lease_ttl < kMinLeaseTtl || options.lease_ttl > kMaxLeaseTtl) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease-ttl ", absl::FormatDuration(options.lease_ttl), " is out of range ",
                     absl::FormatDuration(kMinLeaseTtl), "..", absl::FormatDuration(kMaxLeaseTtl)));
  }
  if (options.config_poll_interval <= absl::ZeroDuration() ||
      options.config_poll_interval > absl::Minutes(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config-poll-interval ", absl::FormatDuration(options.config_poll_interval),
                     " is out of range: more than 0, at most 1m"));
  }
  if (options.max_connection_age_grace < absl::ZeroDuration() ||
      options.max_connection_age_grace > kMaxConnectionAge) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max-connection-age-grace ", absl::FormatDuration(options.max_connection_age_grace),
        " is out of range 0..", absl::FormatDuration(kMaxConnectionAge)));
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tls = TlsCredentials(*options.tls);
    if (!tls.ok()) return tls.status();
    credentials = *std::move(tls);
  }
  std::unique_ptr<FleetServer> server(new FleetServer());
  server->options_ = options;
  FleetServer& s = *server;

  // SQLite: one server per database file (a lock file beside it). PostgreSQL: any number of
  // replicas, which hold the store's server lock shared (StoreOptions::server_lock) and follow
  // each other's writes; `rxfleet-server migrate-store` holds it exclusively.
  // `rxfleet-server tokens` takes neither.
  const bool postgres = IsPostgresUri(options.db_path);
  if (!postgres) {
    absl::StatusOr<DatabaseFileLock> db_lock = DatabaseFileLock::Acquire(options.db_path);
    if (!db_lock.ok()) return db_lock.status();
    s.db_lock_ = *std::move(db_lock);
  }

  StoreOptions store_options;
  store_options.path = options.db_path;
  store_options.server_lock = postgres ? ServerLock::kShared : ServerLock::kNone;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(store_options);
  if (!store.ok()) return store.status();
  s.store_ = *std::move(store);
  absl::StatusOr<StoredState> state = s.store_->Load(options.max_events);
  if (!state.ok()) return state.status();

  if (options.tls.has_value()) {
    absl::StatusOr<std::unique_ptr<TokenStore>> tokens = TokenStore::Open(options.db_path);
    if (!tokens.ok()) return tokens.status();
    s.tokens_ = *std::move(tokens);
  }

  s.metrics_ = std::make_unique<ServerMetrics>(std::make_shared<prometheus::Registry>());
  s.auth_ = std::make_unique<Authorizer>(s.tokens_.get(), *s.metrics_->registry);
  s.policies_ = std::make_unique<PolicySet>(state->policies, state->bundle_version);
  for (const auto& [name, reason] : s.policies_->snapshot()->invalid) {
    Log(LogLevel::kWarning, absl::StrCat("stored policy ", name,
                                         " fails validation and will be NACKed by agents: ", reason,
                                         " (fix it with ApplyPolicy or delete it)"));
  }
  EventLogOptions event_options;
  event_options.max_events = options.max_events;
  event_options.max_age = options.event_max_age;
  event_options.audit_max_age = options.audit_max_age;
  // Servers sharing a PostgreSQL database number their events in the database.
  event_options.follow_store = postgres;
  s.events_ = std::make_unique<EventLog>(event_options, std::move(state->events),
                                         state->last_event_version);
  RegistryOptions registry_options;
  registry_options.stale_after = options.stale_after;
  registry_options.max_adapters_per_host = options.max_adapters_per_host;
  registry_options.on_adapter_event = [events = s.events_.get()](v1::Event event, absl::Time now) {
    events->Record(std::move(event), now);
  };
  s.registry_ = std::make_unique<Registry>(registry_options, std::move(state->hosts));

  if (options.experiment_retention <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("experiment-retention must be positive");
  }
  AgentServiceOptions agent_options;
  // Agents send a keep-alive at least every report interval; the server marks a host stale
  // after three silent intervals.
  agent_options.report_interval = options.stale_after / 3;
  agent_options.require_client_certificate = options.tls.has_value();
  agent_options.hello_timeout = options.hello_timeout;
  agent_options.max_pending_hello = options.max_pending_hello;
  agent_options.max_pending_hello_per_peer = options.max_pending_hello_per_peer;
  agent_options.completion_queues = options.agent_completion_queues;
  agent_options.push_on_queue_threads = options.push_on_queue_threads;
  if (options.agent_completion_queues < 1 || options.agent_completion_queues > 256) {
    return absl::InvalidArgumentError("agent-completion-queues must be in 1..256");
  }
  agent_options.admission.accept_rate = options.agent_accept_rate;
  agent_options.admission.accept_burst = options.agent_accept_burst;
  agent_options.admission.max_streams = options.max_agent_streams;
  if (absl::Status invalid = ValidateAdmissionOptions(agent_options.admission); !invalid.ok()) {
    return invalid;
  }
  if (options.max_concurrent_streams < 1 || options.max_pending_hello < 1 ||
      options.max_pending_hello_per_peer < 1 || options.grpc_memory_bytes < (size_t{16} << 20)) {
    return absl::InvalidArgumentError(
        "max-concurrent-streams, max-pending-hello and max-pending-hello-per-peer must be at "
        "least 1, grpc-memory-mb at least 16");
  }
  // The debouncer's action reaches the agent service through this pointer, set below: the
  // experiment controller needs the FleetApi, which needs the debouncer.
  s.debouncer_ = std::make_unique<Debouncer>(options.push_debounce, [&s] {
    if (s.agent_service_ != nullptr) s.agent_service_->PushCurrentBundle();
  });
  s.fleet_api_ = std::make_unique<FleetApi>(FleetApiDeps{
      s.store_.get(), s.registry_.get(), s.policies_.get(), s.events_.get(), s.metrics_.get(),
      [debouncer = s.debouncer_.get()] { debouncer->Trigger(); }, options.max_bundle_bytes});
  ExperimentControllerOptions experiment_options;
  experiment_options.retention = options.experiment_retention;
  experiment_options.max_bundle_bytes = options.max_bundle_bytes;
  FleetApi* api = s.fleet_api_.get();
  absl::StatusOr<std::unique_ptr<ExperimentController>> experiments = ExperimentController::Create(
      experiment_options, ExperimentControllerDeps{
                              s.store_.get(), s.registry_.get(), s.events_.get(), s.metrics_.get(),
                              [api] { return api->BumpBundleVersion(); },
                              [api](const v1::ApplyPolicyRequest& request, std::string_view ended,
                                    std::string_view actor) {
                                return api->ApplyPolicy(request, Caller{std::string(actor)}, ended);
                              },
                              s.policies_.get(),
                              [&s]() -> std::optional<LeaseFence> {
                                // Set before the scheduler's thread starts (below).
                                return s.experiments_lease_->Fence();
                              }});
  if (!experiments.ok()) return experiments.status();
  s.experiments_ = *std::move(experiments);
  s.fleet_api_->SetExperimentLayer(s.experiments_.get());
  s.agent_service_ = std::make_unique<AgentServiceImpl>(
      agent_options, AgentServiceDeps{s.registry_.get(), s.policies_.get(), s.events_.get(),
                                      s.metrics_.get(), s.auth_.get(), s.experiments_.get()});
  s.work_ = std::make_unique<WorkQueue>(options.api_threads, kApiBacklog);
  s.fleet_service_ =
      std::make_unique<FleetServiceImpl>(s.fleet_api_.get(), s.events_.get(), s.work_.get(),
                                         s.auth_.get(), s.tokens_.get(), s.experiments_.get());

  // grpc.health.v1.Health (Check and Watch) for load balancers and probes, answered by gRPC
  // itself: no token is asked for (docs/SECURITY.md). Process-wide; must precede the builder.
  grpc::EnableDefaultHealthCheckService(true);
  // Reflection is a builder plugin registered process-wide once the library is linked; a
  // server without it drops the plugin from its own builder.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!options.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  // The server's integer channel arguments, each set once: --grpc-arg entries replace them by
  // name (gRPC would otherwise keep whichever duplicate it reads first).
  std::map<std::string, int> int_args;
  if (options.max_connection_age > absl::ZeroDuration()) {
    int_args[GRPC_ARG_MAX_CONNECTION_AGE_MS] =
        static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_age));
    int_args[GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS] =
        static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_age_grace));
  }
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would then share it
  // with the first and answer half of the calls. A port in use must be an error instead.
  int_args[GRPC_ARG_ALLOW_REUSEPORT] = 0;
  int_args[GRPC_ARG_MAX_CONCURRENT_STREAMS] = options.max_concurrent_streams;
  int_args[GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS] =
      static_cast<int>(absl::ToInt64Milliseconds(options.min_recv_ping_interval));
  int_args[GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS] = 1;
  int_args[GRPC_ARG_KEEPALIVE_TIME_MS] =
      static_cast<int>(absl::ToInt64Milliseconds(kServerKeepaliveTime));
  int_args[GRPC_ARG_KEEPALIVE_TIMEOUT_MS] =
      static_cast<int>(absl::ToInt64Milliseconds(kServerKeepaliveTimeout));
  for (const auto& [name, value] : options.grpc_int_args) int_args[name] = value;
  for (const auto& [name, value] : int_args) builder.AddChannelArgument(name, value);
  builder.AddListeningPort(options.listen, credentials, &s.grpc_port_);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  grpc::ResourceQuota quota("rxfleet-server");
  quota.Resize(options.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  s.agent_service_->AddTo(builder);  // async API: its own completion queues
  builder.RegisterService(s.fleet_service_.get());
  s.grpc_server_ = builder.BuildAndStart();
  if (s.grpc_server_ == nullptr || s.grpc_port_ == 0) {
    return common::ListenError("--listen", options.listen,
                               "gRPC could not bind it (see the gRPC lines above)");
  }
  s.replica_id_ = options.replica_id.empty() ? DefaultReplicaId(s.grpc_port_) : options.replica_id;
  if (absl::Status claimed = s.store_->ClaimReplicaId(s.replica_id_); !claimed.ok()) {
    return claimed;
  }
  s.registry_->SetReplicaId(s.replica_id_);
  s.agent_service_->Start();
  if (grpc::HealthCheckServiceInterface* health = s.grpc_server_->GetHealthCheckService();
      health != nullptr) {
    // "" (the whole server) is SERVING from the start; the services by their full names.
    health->SetServingStatus(v1::AgentService::service_full_name(), true);
    health->SetServingStatus(v1::FleetService::service_full_name(), true);
  }

  if (!options.http_listen.empty()) {
    HttpServerOptions http_options;
    http_options.address = options.http_listen;
    Registry* registry = s.registry_.get();
    SdTargetPolicy sd_policy;
    sd_policy.require_peer_address = options.sd_require_peer_address;
    // Targets left out of /sd/agents are logged, at most one line a minute (agents choose the
    // addresses, so they must not be able to flood the log through Prometheus' polling).
    auto sd_log = std::make_shared<LogLimiter>(absl::Minutes(1));
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(http_options, s.metrics_->registry, [registry, sd_policy, sd_log] {
          std::vector<std::string> refused;
          std::string body =
              ServiceDiscoveryJson(registry->MetricsTargets(absl::Now()), sd_policy, &refused);
          if (!refused.empty()) {
            sd_log->Log(LogLevel::kWarning, "sd_target_refused",
                        absl::StrCat("/sd/agents leaves out ", refused.size(),
                                     " metrics address(es): ", absl::StrJoin(refused, "; ")));
          }
          return body;
        });
    if (!http.ok()) return http.status();
    s.http_ = *std::move(http);
  }

  if (!options.tls.has_value()) {
    Log(LogLevel::kWarning,
        "running with --insecure: the gRPC API is plaintext and unauthenticated; anyone who "
        "can reach it can change policies and speak for any host (docs/SECURITY.md)");
  }
  if (postgres) {
    // Configuration committed by another process reaches this server's agents too.
    ChangeFeedOptions feed_options;
    feed_options.conninfo = options.db_path;
    feed_options.poll_interval = options.config_poll_interval;
    feed_options.connect_timeout = store_options.busy_timeout;
    absl::StatusOr<std::unique_ptr<ChangeFeed>> feed = ChangeFeed::Start(
        feed_options,
        [&s](uint64_t revision, bool resync) { return s.ReloadConfig(revision, resync); });
    if (!feed.ok()) return feed.status();
    s.changes_ = *std::move(feed);
  }
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> lease = LeaseKeeper::Start(
      s.store_.get(), {std::string(kExperimentsLease), s.replica_id_, options.lease_ttl});
  if (!lease.ok()) return lease.status();
  s.experiments_lease_ = *std::move(lease);
  s.flusher_ = std::thread([&s] { s.FlushLoop(); });
  s.experiments_->Run();
  std::shared_ptr<const PolicySnapshot> snapshot = s.policies_->snapshot();
  Log(LogLevel::kInfo,
      absl::StrCat(
          "rxfleet-server ", rxfleet::kVersion, ": gRPC on ", options.listen, " (port ",
          s.grpc_port_, ", ",
          options.tls.has_value() ? "TLS, agent certificates and operator tokens required"
                                  : "INSECURE: plaintext, no authentication",
          "), HTTP ", s.http_ != nullptr ? absl::StrCat("on port ", s.http_->port()) : "off",
          ", database ", s.store_->path(), ", bundle version ", snapshot->bundle_version, ", ",
          snapshot->policies.size(), " policies, ", s.registry_->counts().hosts, " hosts"));
  return server;
}

FleetServer::~FleetServer() { Shutdown(absl::Seconds(5)); }

int FleetServer::http_port() const { return http_ != nullptr ? http_->port() : 0; }

void FleetServer::Shutdown(absl::Duration timeout, absl::Duration agent_spread) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || grpc_server_ == nullptr) return;
    stopping_ = true;
  }
  timeout = std::max(timeout, absl::ZeroDuration());
  const absl::Time deadline = absl::Now() + timeout;
  agent_spread = std::clamp(agent_spread, absl::ZeroDuration(), timeout);
  const size_t agents = agent_service_->connected();
  Log(LogLevel::kInfo, absl::StrCat("draining: health NOT_SERVING, ending ", agents,
                                    " agent stream(s) over ", absl::FormatDuration(agent_spread),
                                    ", then stopping within ", absl::FormatDuration(timeout)));
  // Load balancers and probes see NOT_SERVING first, while calls are still answered.
  if (grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
      health != nullptr) {
    health->SetServingStatus(false);
  }
  if (http_ != nullptr) http_->SetServing(false);
  agent_service_->Shutdown(agent_spread);
  fleet_service_->Shutdown();
  grpc_server_->Shutdown(absl::ToChronoTime(deadline));
  agent_service_->Stop();    // the agent streams' queues, after the server ended their calls
  work_.reset();             // finishes queued API calls
  experiments_->Shutdown();  // no more ticks; buffered windows written
  if (experiments_lease_ != nullptr) experiments_lease_->Stop();  // another may schedule now
  if (changes_ != nullptr) changes_->Stop();                      // no more reloads
  debouncer_.reset();                                             // no more pushes
  if (flusher_.joinable()) flusher_.join();
  Flush();  // the last registry changes
  http_.reset();
  Log(LogLevel::kInfo, "stopped");
}

}  // namespace rxfleet::server
