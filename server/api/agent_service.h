#pragma once

// AgentService.Connect on the gRPC async API: one AgentStream per agent stream, owning its
// outbound queue (one ServerConfig slot, one PolicyBundle slot; bundles coalesce to the
// newest). Each host's bundle carries its adapters' experiment assignments and probe slots
// (ProbeSlotTable, server/api/probe_slot_table.h), appended to the shared body; when a Hello,
// an inventory or an update changes them, the current bundle is sent again to that host. The method
// is registered raw (ByteBuffer in and out) so that a bundle is serialised once per version and its
// bytes are shared by every stream (see bundle_message.h); agent messages are parsed here.
//
// Transport: the streams are sharded over `completion_queues` server completion queues, each
// drained by its own thread, so the operations pending on one queue (every idle stream keeps a
// read pending) stay a fraction of the fleet; a push hands each queue's streams to that queue's
// thread. (Debian's libgrpc checks every pending operation of a queue at each completion, so
// one queue for all streams makes a fan-out quadratic; see docs/PERFORMANCE.md.) The other
// services of the server stay on the callback API; both share one grpc::Server.
//
// Protocol (proto/rxfleet/v1/agent_service.proto): the first message must be a valid Hello,
// else the stream ends with INVALID_ARGUMENT (DEADLINE_EXCEEDED if no message arrives within
// hello_timeout; in TLS mode the Hello must match the client certificate, see
// AgentServiceOptions). In TLS mode a stream on a connection without a verified client
// certificate is refused with UNAUTHENTICATED at once, before it can send anything; streams
// beyond the Hello-pending bounds, the accept rate or the stream cap are refused with
// RESOURCE_EXHAUSTED (the last two with a retry hint, common/retry_after.h). The server then sends
// ServerConfig and the current bundle; later bundles follow every change, each with a fresh nonce.
// ACK/NACKs whose nonce is not the stream's latest bundle are stale and ignored. A newer stream for
// the same host ends the older one with ABORTED. Shutdown ends every stream with UNAVAILABLE
// ("server draining; reconnect") and the trailing metadata kRetryAfterMetadataKey.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/retry_after.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "server/api/admission.h"
#include "server/api/bundle_message.h"
#include "server/api/log_limiter.h"
#include "server/api/probe_slot_table.h"
#include "server/auth/authorizer.h"
#include "server/http/metrics.h"
#include "server/registry/event_log.h"
#include "server/registry/policy_set.h"
#include "server/registry/registry.h"

namespace rxfleet::server {

class AgentStream;
class CompletionTag;
class ExperimentController;

/// The trailing metadata key of the statuses that end or refuse agent streams with a retry
/// hint (draining, accept rate, stream cap): decimal milliseconds (common/retry_after.h).
using common::kRetryAfterMetadataKey;

struct AgentServiceOptions {
  /// ServerConfig.report_interval: how often agents send a keep-alive update at most.
  absl::Duration report_interval = absl::Seconds(100);
  /// ServerConfig.metric_window_length.
  absl::Duration metric_window_length = absl::Seconds(60);
  /// A stream that has not sent its Hello this long after opening is ended with
  /// DEADLINE_EXCEEDED, so idle connections cannot pin server memory.
  absl::Duration hello_timeout = absl::Seconds(30);
  /// TLS mode: the Hello's host_id must be the CN or a DNS SAN of the stream's verified client
  /// certificate; a stream without one is refused with UNAUTHENTICATED, a Hello for another
  /// host with PERMISSION_DENIED (both counted and logged by `deps.auth`).
  bool require_client_certificate = false;
  /// Streams that have not sent their Hello yet, in total and per peer IP address. A new
  /// stream beyond either bound is refused with RESOURCE_EXHAUSTED before any per-stream state
  /// exists (counted in rxfleet_server_streams_refused_total, logged at most every 10 s).
  size_t max_pending_hello = 1024;
  size_t max_pending_hello_per_peer = 64;
  /// Server completion queues (and threads) the agent streams are sharded over, 1..256.
  size_t completion_queues = 8;
  /// true: a push hands each queue's streams to that queue's thread (the writes are started
  /// in parallel); false: the pushing thread starts every write itself.
  bool push_on_queue_threads = true;
  /// Accept rate and stream cap (server/api/admission.h): a new stream beyond either is refused
  /// with RESOURCE_EXHAUSTED and trailing metadata rxfleet-retry-after-ms (counted in
  /// rxfleet_server_streams_refused_total{reason="accept_rate"|"max_agent_streams"}). Must be
  /// valid (ValidateAdmissionOptions).
  AdmissionOptions admission;
};

/// The IP address part of a gRPC peer string ("ipv4:10.0.0.5:51234" -> "ipv4:10.0.0.5",
/// "ipv6:[::1]:5" -> "ipv6:[::1]"); other forms are returned unchanged.
std::string PeerAddress(std::string_view peer);

/// The components the service works with; all must outlive it.
struct AgentServiceDeps {
  Registry* registry;
  PolicySet* policies;
  EventLog* events;
  ServerMetrics* metrics;
  /// Counts and logs refused streams; may be null when require_client_certificate is false.
  Authorizer* auth = nullptr;
  /// Experiments: assignments for bundles and metric window ingestion. Null = no experiments
  /// (windows are rejected and counted).
  ExperimentController* experiments = nullptr;
};

/// Lifecycle: AddTo(builder) before builder.BuildAndStart(), Start() after it; Shutdown()
/// before grpc::Server::Shutdown, Stop() after it (the destructor stops too).
class AgentServiceImpl final
    : public v1::AgentService::WithRawMethod_Connect<v1::AgentService::Service> {
 public:
  AgentServiceImpl(AgentServiceOptions options, AgentServiceDeps deps);
  ~AgentServiceImpl() override;

  /// Registers the service and adds its completion queues to `builder`. Call once.
  void AddTo(grpc::ServerBuilder& builder);
  /// Starts the queue threads and accepting streams, once, after BuildAndStart succeeded.
  void Start();
  /// After grpc::Server::Shutdown (which ends every call): waits until every stream is done,
  /// then shuts the completion queues down and joins their threads. Idempotent.
  void Stop();

  /// Queues the current bundle on every stream that said Hello (the debouncer's action). The
  /// bundle is serialised once; the stream list is copied under the lock and the loop runs
  /// without it, so slow streams and new connections never wait for each other.
  void PushCurrentBundle();

  /// Ends every stream with UNAVAILABLE("server draining; reconnect") and trailing metadata
  /// kRetryAfterMetadataKey (a delay uniform in 0..`spread`, in ms), and ends streams whose
  /// Hello arrives later the same way. The streams end one by one at jittered times spread
  /// evenly over `spread` (in random order); the call blocks until the last has been asked to
  /// end (at most `spread`; at once for zero). Call before grpc::Server::Shutdown.
  void Shutdown(absl::Duration spread = absl::ZeroDuration());

  /// Streams that have said Hello and not ended.
  size_t connected() const;

 private:
  friend class AgentStream;
  class ExperimentController;
  struct Shard;

  /// The one admission point: decides whether a new stream (its context, before any message)
  /// is accepted. OK: accepted, *identities and *peer_address are filled and the stream holds
  /// an admission slot (admission_, until its Done) and a Hello-pending slot of *peer_address.
  /// Otherwise the status to end the stream with, and in *trailing_metadata the retry hint to
  /// send with it when there is one (accept rate, stream cap); counted and logged here.
  grpc::Status Admit(grpc::ServerContext& context, std::vector<std::string>* identities,
                     std::string* peer_address,
                     std::vector<std::pair<std::string, std::string>>* trailing_metadata);
  /// Requests the next stream on `shard` (one request outstanding per queue).
  void RequestStream(Shard& shard);
  /// The loop of one queue's thread: completions, then expired Hello deadlines.
  void RunShard(Shard& shard);
  /// A stream was accepted or refused by gRPC (`ok` false: the server is shutting down).
  void StreamDone();

  /// The current bundle as a SharedBundle, created once per bundle version.
  std::shared_ptr<const SharedBundle> CurrentBundle();
  /// Makes `stream` the host's stream; returns the stream it replaces (or null), or null and
  /// sets *refused when the service is shutting down.
  std::shared_ptr<AgentStream> Register(const std::string& host_id,
                                        std::shared_ptr<AgentStream> stream, bool* refused);
  void Unregister(const std::string& host_id, const AgentStream* stream);
  /// A retry delay for a stream ended by Shutdown: uniform in 0..drain_spread_, ms.
  int64_t DrainRetryAfterMs();
  grpc::ByteBuffer ConfigMessage() const;
  /// Takes a Hello-pending slot for `peer` (a PeerAddress); false (nothing taken) and the
  /// refusal reason in *reason when a bound is reached.
  bool AcquirePending(const std::string& peer, std::string* reason);
  void ReleasePending(const std::string& peer);
  /// Counts a refused stream by reason and logs it (rate-limited).
  void RecordRefusal(std::string_view reason, std::string_view message);

  const AgentServiceOptions options_;
  const AgentServiceDeps deps_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<AgentStream>> streams_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration drain_spread_ ABSL_GUARDED_BY(mu_);

  absl::Mutex pending_mu_;
  size_t pending_total_ ABSL_GUARDED_BY(pending_mu_) = 0;
  std::map<std::string, size_t> pending_ ABSL_GUARDED_BY(pending_mu_);
  LogLimiter log_;
  Admission admission_;         // one slot per admitted AgentStream, taken in Admit, freed in Done
  ProbeSlotTable probe_slots_;  // synced to the policies by CurrentBundle

  absl::Mutex bundle_mu_;
  std::shared_ptr<const SharedBundle> bundle_ ABSL_GUARDED_BY(bundle_mu_);

  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<bool> started_{false};  // read by pushes from other threads
  bool stopped_ = false;
  // AgentStream objects that have an operation pending (requested, accepted, not done).
  absl::Mutex live_mu_;
  size_t live_ ABSL_GUARDED_BY(live_mu_) = 0;
};

}  // namespace rxfleet::server
