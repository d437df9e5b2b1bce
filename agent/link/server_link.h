#pragma once

// The agent's side of AgentService.Connect (proto/rxfleet/v1/agent_service.proto).
//
// One long-lived stream to rxfleet-server: Hello (host id, labels, version, capabilities,
// metrics address, host facts, last good bundle version), the full adapter inventory, then
// adapter changes as they happen (coalesced per adapter) and a keep-alive update every
// ServerConfig.report_interval. Each PolicyBundle is converted and handed to the BundleSink
// (the Agent): applied -> persisted to <state-dir>/bundle.pb (atomic) and ACKed; rejected ->
// NACKed with the reason while the last good bundle stays in force. At Start() the persisted
// bundle is applied, so a restarted agent keeps the server's settings while the server is away;
// the file records the host id it was received for, and a bundle of another host (a state
// directory copied from elsewhere) is not applied (logged; see PersistedBundleOwner).
//
// Reconnects: every attempt uses a fresh channel; after a failed or ended stream the link waits
// an exponential backoff (1 s doubling to 60 s by default) scaled by a random factor in
// [0.5, 1] (jitter), reset once a stream has received its ServerConfig. A stream that ends
// with the server's retry hint (trailing metadata rxfleet-retry-after-ms, common/retry_after.h:
// admission control's RESOURCE_EXHAUSTED, a draining server's UNAVAILABLE) waits at least the
// hint, plus 0-20 % jitter, before the next attempt (common::ReconnectDelay), and such an end
// does not grow the backoff (the server paces the agent); hints are cut to
// common::kMaxRetryAfter, and a malformed one is logged and ignored.
//
// Several servers (ServerLinkOptions::server_addresses, `--server a:7443,b:7443`, replicas of
// one fleet): the link starts at a random entry, so a fleet spreads over the list, and moves to
// the next entry (wrapping) whenever an attempt ends: a failed connect, a refused stream, or a
// stream that worked and then ended (the server stopped, drained or broke). The wait before the
// next entry (ServerRotation, agent/link/server_list.h):
//   - within a round, i.e. while not every entry has failed in turn since the last stream that
//     worked: the backoff's first step with the same jitter (0.5-1 s by default), without
//     growing the backoff. So the next replica is tried promptly, and a fleet that loses one
//     replica spreads its move to the others over that window rather than arriving at once;
//   - once a whole round has failed: the exponential backoff as above (growing once per round,
//     not per entry);
//   - a retry hint is a floor in both cases, whichever entry is next (the hint paces the agent
//     against the fleet's servers, which may share the load).
// With one entry every failure ends a round: the single-server behaviour above, unchanged.
// A DNS name that resolves to several addresses is one entry: gRPC's resolver hands all of them
// to the entry's channel, whose default pick_first policy tries them in the resolver's order and
// keeps the first that connects (gRPC 1.51 does not shuffle them), so such a name gives
// failover between its addresses within one attempt, but no spread of a fleet over them; list
// replicas as separate entries for that. The link status's server_address is the entry in use
// (being connected to, connected, or the one whose attempt ended last).
//
// Metric windows: finished experiment windows (SendMetricWindow) wait in a bounded queue
// (ServerLinkOptions::max_queued_windows, oldest dropped first) and are written once the open
// stream got its ServerConfig, after the control messages, so windows cut while the server is
// unreachable are sent after the reconnect. A window leaves the queue only once the stream
// accepted it (a window written just before a stream breaks can still be lost in transit).
//
// Keepalive: HTTP/2 pings every 20 s without data, 10 s timeout, also with no call open,
// unlimited pings without data; the server accepts pings down to every 10 s (docs/SERVER.md).

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/link/credentials.h"
#include "agent/link/server_list.h"
#include "agent/reconcile/backoff.h"
#include "agent/reconcile/log.h"
#include "agent/reconcile/policy_set.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/local_status.pb.h"

namespace rxfleet::agent {

/// Keepalive of the agent's channel (see the file comment).
inline constexpr absl::Duration kAgentKeepaliveTime = absl::Seconds(20);
inline constexpr absl::Duration kAgentKeepaliveTimeout = absl::Seconds(10);

/// Where the link delivers bundles: the Agent in production, a fake in tests.
class BundleSink {
 public:
  virtual ~BundleSink();
  /// Validates the complete bundle and applies it, or rejects it whole and keeps the bundle in
  /// force. A rejection's message is sent to the server as the NACK's error_detail.
  virtual absl::Status ApplyServerBundle(const ServerBundle& bundle) = 0;
};

struct ServerLinkOptions {
  /// gRPC targets of rxfleet-server, HOST:PORT each (ParseServerAddresses validates a --server
  /// value into this), tried in turn from a random one (see the file comment). Required: 1 to
  /// kMaxServerAddresses non-empty entries.
  std::vector<std::string> server_addresses;
  /// Directory of the persisted last good bundle (kBundleFileName); empty = not persisted.
  std::string state_dir;
  /// Hello fields: host_id (required), labels, agent_version, capabilities, metrics_address,
  /// host_info. last_good_version and instance_id are filled by the link.
  v1::Hello hello;
  /// The Prometheus endpoint to announce (Hello.metrics_address), asked before every connect:
  /// the bound HOST:PORT once the endpoint listens (an ephemeral port is known only then), ""
  /// for none. Unset: hello.metrics_address as given. Must not call into the link.
  std::function<std::string()> metrics_address;
  /// Reconnect backoff before jitter.
  BackoffPolicy backoff = {absl::Seconds(1), absl::Seconds(60), 2.0};
  /// HTTP/2 keepalive pings without data, and how long to wait for their ACK.
  absl::Duration keepalive_time = kAgentKeepaliveTime;
  absl::Duration keepalive_timeout = kAgentKeepaliveTimeout;
  /// Channel credentials, for tests; null = use `tls`.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  /// TLS files (agent/link/credentials.h), read again before every connection attempt so
  /// rotated certificates take effect at the next reconnect. Unset (and no `credentials`) =
  /// plaintext (rxfleet-agent --insecure).
  std::optional<LinkTlsFiles> tls;
  /// Log lines; null = none.
  LogSink log;
  /// Called after every change of the link status (from the link's thread or Start()).
  std::function<void(const v1::ServerLinkStatus&)> on_status;
  /// Called with every ServerConfig the server sends (from the link's thread), e.g. to adopt
  /// its metric_window_length. Must not block.
  std::function<void(const v1::ServerConfig&)> on_config;
  /// Most finished metric windows kept while they cannot be sent; >= 1. The oldest is dropped
  /// when a new one arrives at a full queue.
  size_t max_queued_windows = 1000;
  /// Counts metric windows by result: "sent" (the stream accepted it) or "dropped" (pushed out
  /// of the full queue). Called with the link's lock held: must not call into the link.
  std::function<void(std::string_view result)> on_metric_window;
  /// Called (from the link's thread) for every server bundle applied but not saved in
  /// `state_dir`; its ACK then carries persist_error. Must not call into the link.
  std::function<void()> on_bundle_persist_failure;
};

class ServerLink {
 public:
  /// InvalidArgument if server_addresses is empty, has an empty entry or more than
  /// kMaxServerAddresses, or hello.host_id is empty. `sink` must outlive the link.
  static absl::StatusOr<std::unique_ptr<ServerLink>> Create(ServerLinkOptions options,
                                                            BundleSink* sink);
  /// Stop().
  ~ServerLink();
  ServerLink(const ServerLink&) = delete;
  ServerLink& operator=(const ServerLink&) = delete;

  /// Applies the persisted bundle if there is one and it is this host's or records no host (a
  /// rejected, unreadable or other host's file is logged and ignored), then starts the
  /// connection thread. Call once.
  void Start();
  /// Cancels the stream and joins the thread. Idempotent.
  void Stop();

  /// An adapter is new or its status changed (complete adapter, as AdapterSnapshotToProto
  /// makes it). Sent in the next inventory and, while connected, as an update. Any thread.
  void ReportAdapter(const v1::Adapter& adapter);
  /// An adapter is gone for good. Any thread.
  void ReportRemoved(const std::string& adapter_id);
  /// Queues one finished experiment metric window for the server (see the file comment). Any
  /// thread; never blocks.
  void SendMetricWindow(v1::MetricWindow window);

  /// Metric windows waiting to be sent.
  size_t queued_metric_windows() const;
  /// Metric windows the stream accepted / dropped from the full queue since Start().
  uint64_t metric_windows_sent() const;
  uint64_t metric_windows_dropped() const;

  /// The link status (state, the server address in use, last connect, last error, bundle in
  /// effect, last NACK).
  v1::ServerLinkStatus status() const;
  /// Streams that got as far as the server's ServerConfig since Start().
  uint64_t streams_opened() const;

 private:
  ServerLink(ServerLinkOptions options, BundleSink* sink);
  void Log(LogLevel level, const std::string& message) const;
  void PublishStatus() ABSL_LOCKS_EXCLUDED(mu_);
  void Loop();
  // `ended` (an attempt at `address`) with an UNAVAILABLE failure explained in plain words when
  // TLS is the cause (common::ExplainTlsFailure), unchanged otherwise.
  grpc::Status Explained(grpc::Status ended, const std::string& address) const;
  /// One stream to `address` from connect to end; returns its final status.
  grpc::Status RunStream(const std::string& address);
  void WriteLoop(grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>* stream);
  void HandleBundle(const v1::PolicyBundle& bundle);
  /// Start(): applies <state-dir>/bundle.pb unless it is missing, unreadable, invalid or
  /// another host's (each logged).
  void ApplyPersistedBundle();
  std::string BundlePath() const;

  const ServerLinkOptions options_;
  BundleSink* const sink_;
  const std::string instance_id_;
  Backoff backoff_;          // connection thread only
  ServerRotation rotation_;  // connection thread only
  // The retry hint of the stream that ended last (connection thread only).
  std::optional<absl::Duration> retry_hint_;
  // Whether the last stream got the server's config, and how the stream before ended
  // (status_.last_error); under mu_.
  bool stream_was_configured_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_end_error_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;       // the open stream's
  std::map<std::string, v1::Adapter> adapters_ ABSL_GUARDED_BY(mu_);  // everything reported
  // Outbox of the open stream.
  bool stream_open_ ABSL_GUARDED_BY(mu_) = false;
  // The open stream got the server's ServerConfig; metric windows wait for it.
  bool stream_configured_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::AgentMessage> control_ ABSL_GUARDED_BY(mu_);  // Hello, inventory, ACK/NACK
  std::map<std::string, v1::Adapter> changed_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> removed_ ABSL_GUARDED_BY(mu_);
  // Finished metric windows with their sequence numbers; kept across streams.
  std::deque<std::pair<uint64_t, v1::AgentMessage>> windows_ ABSL_GUARDED_BY(mu_);
  uint64_t next_window_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t windows_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t windows_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_sent_ ABSL_GUARDED_BY(mu_);
  absl::Duration report_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(100);
  v1::ServerLinkStatus status_ ABSL_GUARDED_BY(mu_);
  uint64_t streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace rxfleet::agent
