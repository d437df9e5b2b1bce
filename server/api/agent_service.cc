// AgentService: one AgentStream reactor per connected agent (below) and the service that
// registers streams and fans bundles out to them (AgentServiceImpl, at the end).
// Length reason: the reactor is one state machine (Hello deadline, reads, the coalescing
// outbound queue, Finish exactly once, OnDone) whose invariants on mu_ hold across all its
// methods; split across files it would have to expose that state. The service part (~170 lines,
// with the admission bounds for streams without a Hello) shares the stream's private types.

#include "server/api/agent_service.h"

#include <grpcpp/alarm.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/retry_after.h"
#include "common/string_view_compat.h"
#include "rxfleet/version.h"
#include "server/api/finish_gate.h"
#include "server/api/status.h"
#include "server/api/validation.h"
#include "server/experiments/controller.h"
#include "server/log.h"
#include "server/registry/outbound_queue.h"

namespace rxfleet::server {

using common::ToAbslView;

// One agent stream. Lifetime: owned by `self_` from Start() until OnDone(), and by the
// service's stream map while registered; the object may outlive OnDone (a fan-out holding a
// reference), but then every operation is a no-op because the stream has finished.
//
// Threading: reactions of one stream run one at a time per kind (one read, one write at a
// time), pushes and End() come from any thread. Everything shared is guarded by mu_. gRPC
// never runs bidi reactions inline inside StartRead/StartWrite/Finish, so those are called
// with mu_ held, which keeps "is the stream finishing?" and "start an operation" atomic.
class AgentStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                          public std::enable_shared_from_this<AgentStream> {
 public:
  // `identities`: CN and DNS SANs of the verified client certificate. The stream holds a
  // Hello-pending slot of `peer_address` (taken by the service) until its first message.
  AgentStream(AgentServiceImpl* service, grpc::CallbackServerContext* context,
              std::vector<std::string> identities, std::string peer_address)
      : service_(service),
        deps_(service->deps_),
        peer_(context->peer()),
        peer_address_(std::move(peer_address)),
        identities_(std::move(identities)) {}

  void Start() {
    self_ = shared_from_this();
    // The Hello deadline. The alarm holds only a weak reference; OnDone cancels it.
    hello_alarm_.Set(absl::ToChronoTime(absl::Now() + service_->options_.hello_timeout),
                     [weak = weak_from_this()](bool fired) {
                       if (!fired) return;
                       if (std::shared_ptr<AgentStream> stream = weak.lock())
                         stream->HelloTimeout();
                     });
    absl::MutexLock lock(&mu_);
    StartRead(&read_buffer_);
  }

  void HelloTimeout() {
    absl::MutexLock lock(&mu_);
    if (stream_id_ != 0 || gate_.finishing()) return;
    deps_.metrics->streams_rejected->Increment();
    service_->RecordRefusal(
        "hello_timeout",
        absl::StrCat("agent stream from ", peer_, " sent no Hello within ",
                     absl::FormatDuration(service_->options_.hello_timeout), "; closing it"));
    RequestFinishLocked(grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrCat("no Hello within ", absl::FormatDuration(service_->options_.hello_timeout))));
  }

  // Queues a bundle (coalescing with an unsent older one) and starts writing if idle.
  void PushBundle(const std::shared_ptr<const SharedBundle>& bundle, absl::Time pushed_at) {
    std::string host_id;
    {
      absl::MutexLock lock(&mu_);
      host_id = host_id_;
    }
    std::string assignments = AssignmentBytes(host_id);
    Outgoing item;
    item.nonce = NewNonce();
    item.message = bundle->Message(item.nonce, assignments);
    {
      absl::MutexLock lock(&mu_);
      sent_assignments_ = std::move(assignments);
    }
    item.version = bundle->version();
    item.pushed_at = pushed_at;
    Enqueue(kBundleSlot, std::move(item));
  }

  void PushConfig(grpc::ByteBuffer message) {
    Outgoing item;
    item.message = std::move(message);
    Enqueue(kConfigSlot, std::move(item));
  }

  // Ends the stream with `status` once the write in flight (if any) is done.
  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    RequestFinishLocked(status);
  }

  void OnReadDone(bool ok) override {
    ReleasePending();
    if (!ok) {  // the agent closed its side or the call was cancelled
      End(grpc::Status::OK);
      return;
    }
    v1::AgentMessage message;
    grpc::ProtoBufferReader reader(&read_buffer_);
    absl::Status status = message.ParseFromZeroCopyStream(&reader)
                              ? Handle(message)
                              : absl::InvalidArgumentError("malformed AgentMessage");
    read_buffer_.Clear();
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      deps_.metrics->streams_rejected->Increment();
      Log(LogLevel::kWarning,
          absl::StrCat("agent stream from ", peer_,
                       host_id_.empty() ? "" : absl::StrCat(" (host ", host_id_, ")"),
                       " rejected: ", status.ToString()));
      RequestFinishLocked(ToGrpcStatus(status));
      return;
    }
    if (!gate_.finishing()) StartRead(&read_buffer_);
  }

  void OnWriteDone(bool ok) override {
    uint64_t written_version = 0;
    {
      absl::MutexLock lock(&mu_);
      if (ok) written_version = writing_version_;
      // !ok: the transport is gone (agent vanished or call cancelled); nothing more is sent.
      if (!FinishIf(gate_.WriteDone(ok))) {
        if (gate_.finishing()) {
          queue_.Clear();
        } else if (std::optional<Outgoing> next = queue_.WriteDone()) {
          BeginWriteLocked(std::move(*next));
        }
      }
    }
    if (written_version != 0) RecordSent(written_version);
  }

  void OnDone() override {
    hello_alarm_.Cancel();
    ReleasePending();
    service_->admission_.Release();
    const absl::Time now = absl::Now();
    std::string host_id;
    uint64_t stream_id = 0;
    std::string reason;
    {
      absl::MutexLock lock(&mu_);
      host_id = host_id_;
      stream_id = stream_id_;
      if (gate_.finishing() && !gate_.status().ok()) reason = gate_.status().error_message();
    }
    if (stream_id != 0) {
      service_->Unregister(host_id, this);
      if (deps_.registry->Disconnect(host_id, stream_id, now)) {
        v1::Event event = HostEvent(
            host_id, v1::EVENT_TYPE_NORMAL, "Disconnected",
            reason.empty() ? "agent stream closed" : absl::StrCat("agent stream closed: ", reason));
        deps_.events->Record(std::move(event), now);
      }
    }
    self_.reset();  // may delete this; nothing may follow
  }

 private:
  static constexpr size_t kConfigSlot = 0;
  static constexpr size_t kBundleSlot = 1;

  // The first message (or the end of the stream) frees the Hello-pending slot.
  void ReleasePending() {
    if (!pending_.exchange(false)) return;
    service_->ReleasePending(peer_address_);
  }

  struct Outgoing {
    grpc::ByteBuffer message;
    uint64_t version = 0;  // 0 for ServerConfig
    std::string nonce;
    absl::Time pushed_at;
  };

  static v1::Event HostEvent(const std::string& host_id, v1::EventType type, std::string reason,
                             std::string message) {
    v1::Event event;
    event.set_type(type);
    event.set_reason(std::move(reason));
    event.set_message(std::move(message));
    event.mutable_involved_object()->set_kind("Host");
    event.mutable_involved_object()->set_name(host_id);
    event.set_host_id(host_id);
    return event;
  }

  // Runs on the fan-out thread for every stream: keep it to the queue and StartWrite. The
  // registry learns about the write when it completes (OnWriteDone).
  void Enqueue(size_t slot, Outgoing item) {
    absl::MutexLock lock(&mu_);
    if (gate_.finishing()) return;
    const uint64_t coalesced_before = queue_.coalesced();
    std::optional<Outgoing> next = queue_.Push(slot, std::move(item));
    if (queue_.coalesced() != coalesced_before) deps_.metrics->bundles_coalesced->Increment();
    if (next.has_value()) BeginWriteLocked(std::move(*next));
  }

  void BeginWriteLocked(Outgoing item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    write_buffer_ = std::move(item.message);
    writing_version_ = item.version;
    if (item.version != 0) {
      // ACK/NACKs are matched against the newest bundle started on the stream.
      sent_nonce_ = std::move(item.nonce);
      sent_version_ = item.version;
      sent_pushed_at_ = item.pushed_at;
    }
    gate_.WriteStarted();
    StartWrite(&write_buffer_);
  }

  void RecordSent(uint64_t version) {
    deps_.metrics->bundle_writes->Increment();
    std::string host_id;
    uint64_t stream_id;
    {
      absl::MutexLock lock(&mu_);
      host_id = host_id_;
      stream_id = stream_id_;
    }
    deps_.registry->RecordSent(host_id, stream_id, version, absl::Now());
  }

  void RequestFinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    FinishIf(gate_.Request(status));
  }

  // Finishes when the gate says so (see finish_gate.h); returns `now`.
  bool FinishIf(bool now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!now) return false;
    queue_.Clear();
    Finish(gate_.status());
    return true;
  }

  absl::Status Handle(const v1::AgentMessage& message) {
    const absl::Time now = absl::Now();
    if (!hello_seen_) {
      if (message.kind_case() != v1::AgentMessage::kHello) {
        return absl::InvalidArgumentError(
            "the first message of a stream must be a Hello (see AgentService.Connect)");
      }
      return HandleHello(message.hello(), now);
    }
    switch (message.kind_case()) {
      case v1::AgentMessage::kHello:
        return absl::InvalidArgumentError("Hello may only be the first message of a stream");
      case v1::AgentMessage::kInventory: {
        const size_t max_adapters = deps_.registry->max_adapters_per_host();
        if (absl::Status s = ValidateAdapters(message.inventory().adapters(), max_adapters);
            !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("inventory.", s.message()));
        }
        absl::Status refused;
        deps_.registry->ReplaceAdapters(
            host_id_, stream_id_,
            {message.inventory().adapters().begin(), message.inventory().adapters().end()}, now,
            &refused);
        if (!refused.ok()) return refused;
        RepushIfAssignmentsChanged(now);
        return absl::OkStatus();
      }
      case v1::AgentMessage::kAdapterUpdate: {
        const v1::AdapterUpdate& update = message.adapter_update();
        if (absl::Status s = ValidateAdapterUpdate(update, deps_.registry->max_adapters_per_host());
            !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("adapter_update.", s.message()));
        }
        absl::Status refused;
        deps_.registry->UpdateAdapters(
            host_id_, stream_id_, {update.adapters().begin(), update.adapters().end()},
            {update.removed_adapter_ids().begin(), update.removed_adapter_ids().end()}, now,
            &refused);
        if (!refused.ok()) return refused;
        RepushIfAssignmentsChanged(now);
        return absl::OkStatus();
      }
      case v1::AgentMessage::kAck:
        HandleAck(message.ack(), now);
        return absl::OkStatus();
      case v1::AgentMessage::kNack:
        HandleNack(message.nack(), now);
        return absl::OkStatus();
      case v1::AgentMessage::kMetricWindow: {
        deps_.registry->Touch(host_id_, stream_id_, now);
        // A bad window is dropped and counted; it never ends the stream.
        if (deps_.experiments == nullptr) {
          deps_.metrics->metric_windows_rejected->Increment();
          return absl::OkStatus();
        }
        // The reason is counted, not logged: a misbehaving agent must not flood the log.
        (void)deps_.experiments->AcceptWindow(host_id_, message.metric_window());
        return absl::OkStatus();
      }
      case v1::AgentMessage::KIND_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError("AgentMessage without a kind (or of a newer protocol)");
  }

  // TLS mode: the Hello must speak for the host named by the client certificate.
  absl::Status CheckIdentity(const v1::Hello& hello) {
    if (!service_->options_.require_client_certificate) return absl::OkStatus();
    absl::Status denied;
    std::string reason;
    if (identities_.empty()) {
      reason = "no_client_certificate";
      denied = absl::UnauthenticatedError(
          "agents must present a client certificate signed by the fleet CA (rxfleet-agent "
          "--tls-cert/--tls-key; see docs/SECURITY.md)");
    } else if (std::find(identities_.begin(), identities_.end(), hello.host_id()) ==
               identities_.end()) {
      reason = "host_id_mismatch";
      denied = absl::PermissionDeniedError(absl::StrCat("Hello claims host_id '", hello.host_id(),
                                                        "' but the client certificate is for '",
                                                        identities_.front(), "'"));
    } else {
      return absl::OkStatus();
    }
    if (deps_.auth != nullptr) {
      deps_.auth->RecordAgentDenial(
          reason, absl::StrCat("agent stream from ", peer_, ": ", denied.message()));
    }
    return denied;
  }

  absl::Status HandleHello(const v1::Hello& hello, absl::Time now) {
    if (absl::Status s = ValidateHello(hello); !s.ok()) return s;
    if (absl::Status s = CheckIdentity(hello); !s.ok()) return s;
    const uint64_t stream_id = deps_.registry->Connect(hello, peer_, now);
    {
      absl::MutexLock lock(&mu_);
      host_id_ = hello.host_id();
      stream_id_ = stream_id;
    }
    hello_seen_ = true;
    bool refused = false;
    std::shared_ptr<AgentStream> replaced =
        service_->Register(hello.host_id(), shared_from_this(), &refused);
    if (refused) {
      deps_.registry->Disconnect(hello.host_id(), stream_id, now);
      return absl::UnavailableError("server shutting down");
    }
    if (replaced != nullptr) {
      deps_.metrics->streams_replaced->Increment();
      replaced->End(grpc::Status(
          grpc::StatusCode::ABORTED,
          absl::StrCat("replaced by a newer stream of host ", hello.host_id(), " from ", peer_)));
    }
    deps_.metrics->streams_opened->Increment();
    deps_.events->Record(HostEvent(hello.host_id(), v1::EVENT_TYPE_NORMAL, "Connected",
                                   absl::StrCat("agent ", hello.agent_version(), " connected")),
                         now);
    PushConfig(service_->ConfigMessage());
    PushBundle(service_->CurrentBundle(), now);
    return absl::OkStatus();
  }

  std::string AssignmentBytes(const std::string& host_id) const {
    if (deps_.experiments == nullptr || host_id.empty()) return "";
    return deps_.experiments->AssignmentBytes(host_id);
  }

  // The host's adapters changed: if that changes its assignments, the current bundle goes out
  // again with them (same version, fresh nonce).
  void RepushIfAssignmentsChanged(absl::Time now) {
    if (deps_.experiments == nullptr) return;
    const std::string assignments = AssignmentBytes(host_id_);
    {
      absl::MutexLock lock(&mu_);
      if (assignments == sent_assignments_) return;
    }
    PushBundle(service_->CurrentBundle(), now);
  }

  // True if (version, nonce) answer the latest bundle written to this stream.
  bool IsLatest(uint64_t version, const std::string& nonce, absl::Time* pushed_at) {
    absl::MutexLock lock(&mu_);
    *pushed_at = sent_pushed_at_;
    return !sent_nonce_.empty() && nonce == sent_nonce_ && version == sent_version_;
  }

  void HandleAck(const v1::Ack& ack, absl::Time now) {
    absl::Time pushed_at;
    if (!IsLatest(ack.version(), ack.nonce(), &pushed_at)) {
      deps_.metrics->stale_replies->Increment();
      deps_.registry->Touch(host_id_, stream_id_, now);
      return;
    }
    deps_.metrics->acks->Increment();
    deps_.metrics->push_to_ack_seconds->Observe(absl::ToDoubleSeconds(now - pushed_at));
    const std::string persist_error = ack.persist_error().substr(0, kMaxNackDetailLength);
    if (!persist_error.empty()) deps_.metrics->acks_not_persisted->Increment();
    if (!deps_.registry->RecordAck(host_id_, stream_id_, ack.version(), now, persist_error)) {
      return;
    }
    if (persist_error.empty()) {
      deps_.events->Record(HostEvent(host_id_, v1::EVENT_TYPE_NORMAL, "BundleAcked",
                                     absl::StrCat("applied bundle version ", ack.version())),
                           now);
    } else {
      deps_.events->Record(HostEvent(host_id_, v1::EVENT_TYPE_WARNING, "BundleNotPersisted",
                                     absl::StrCat("applied bundle version ", ack.version(),
                                                  " but could not save it: ", persist_error)),
                           now);
    }
  }

  void HandleNack(const v1::Nack& nack, absl::Time now) {
    absl::Time pushed_at;
    if (!IsLatest(nack.version(), nack.nonce(), &pushed_at)) {
      deps_.metrics->stale_replies->Increment();
      deps_.registry->Touch(host_id_, stream_id_, now);
      return;
    }
    deps_.metrics->nacks->Increment();
    v1::NackRecord record;
    record.set_version(nack.version());
    record.set_nonce(nack.nonce());
    record.set_error_detail(nack.error_detail().substr(0, kMaxNackDetailLength));
    *record.mutable_time() = common::TimeToProto(now);
    // One event per pushed bundle: repeated NACKs of the same nonce (an agent flooding
    // distinct details) update the host's last NACK but add no events.
    const bool first = std::exchange(nacked_nonce_, nack.nonce()) != nack.nonce();
    if (deps_.registry->RecordNack(host_id_, stream_id_, record, now) && first) {
      deps_.events->Record(
          HostEvent(host_id_, v1::EVENT_TYPE_WARNING, "BundleNacked",
                    absl::StrCat("rejected bundle version ", nack.version(), " (keeps version ",
                                 nack.active_version(), "): ", record.error_detail())),
          now);
    }
  }

  AgentServiceImpl* const service_;
  const AgentServiceDeps deps_;
  const std::string peer_;
  const std::string peer_address_;
  std::atomic<bool> pending_{true};
  // CN and DNS SANs of the verified client certificate (empty without one).
  const std::vector<std::string> identities_;
  grpc::Alarm hello_alarm_;

  // Read path only (reads of one stream never overlap). host_id_/stream_id_ are written once,
  // under mu_, before the stream is registered for pushes.
  grpc::ByteBuffer read_buffer_;
  bool hello_seen_ = false;
  std::string nacked_nonce_;  // nonce of the last NACK that recorded an event

  absl::Mutex mu_;
  std::string host_id_;     // set once at Hello (guarded for the write path and OnDone)
  uint64_t stream_id_ = 0;  // registry stream id, 0 before Hello
  OutboundQueue<Outgoing, 2> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer write_buffer_ ABSL_GUARDED_BY(mu_);  // the write in flight
  uint64_t writing_version_ ABSL_GUARDED_BY(mu_) = 0;   // its bundle version, 0 for config
  std::string sent_nonce_ ABSL_GUARDED_BY(mu_);
  std::string sent_assignments_ ABSL_GUARDED_BY(mu_);  // of the newest bundle queued
  uint64_t sent_version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time sent_pushed_at_ ABSL_GUARDED_BY(mu_);
  FinishGate gate_ ABSL_GUARDED_BY(mu_);

  std::shared_ptr<AgentStream> self_;
};

AgentServiceImpl::AgentServiceImpl(AgentServiceOptions options, AgentServiceDeps deps)
    : options_(std::move(options)), deps_(deps), admission_(options_.admission) {}

AgentServiceImpl::~AgentServiceImpl() = default;

namespace {

// A stream refused before any per-stream state exists: it finishes at once and deletes itself.
// With `retry_after`, the status carries the retry hint as trailing metadata.
class RefusedStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  RefusedStream(grpc::CallbackServerContext* context, const grpc::Status& status,
                absl::Duration retry_after) {
    context->AddTrailingMetadata(std::string(common::kRetryAfterMetadataKey),
                                 common::FormatRetryAfter(retry_after));
    Finish(status);
  }
  void OnDone() override { delete this; }
};

}  // namespace

std::string PeerAddress(std::string_view peer) {
  if (!absl::StartsWith(ToAbslView(peer), "ipv4:") &&
      !absl::StartsWith(ToAbslView(peer), "ipv6:")) {
    return std::string(peer);
  }
  const size_t colon = peer.rfind(':');
  return std::string(colon > 5 ? peer.substr(0, colon) : peer);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* AgentServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  std::vector<std::string> identities = HostIdentities(*context->auth_context());
  if (options_.require_client_certificate && identities.empty()) {
    if (deps_.auth != nullptr) deps_.auth->CountAgentDenial("no_client_certificate");
    RecordRefusal("no_client_certificate",
                  absl::StrCat("agent stream from ", context->peer(),
                               " refused: no verified client certificate"));
    return new RefusedStream(grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        "agents must present a client certificate signed by the fleet CA (rxfleet-agent "
        "--tls-cert/--tls-key; see docs/SECURITY.md)"));
  }
  if (AdmissionDecision admission = admission_.TryAdmit(); !admission.admitted) {
    RecordRefusal(admission.reason, absl::StrCat("agent stream from ", context->peer(),
                                                 " refused: ", admission.message));
    return new RefusedStream(context,
                             grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, admission.message),
                             admission.retry_after);
  }
  std::string peer_address = PeerAddress(context->peer());
  std::string reason;
  if (!AcquirePending(peer_address, &reason)) {
    admission_.Release();
    RecordRefusal(reason, absl::StrCat("agent stream from ", context->peer(), " refused: ",
                                       reason == "hello_pending_peer"
                                           ? "too many streams of this address without a Hello"
                                           : "too many streams without a Hello"));
    return new RefusedStream(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("too many agent streams without a Hello (",
                     reason == "hello_pending_peer"
                         ? absl::StrCat(options_.max_pending_hello_per_peer, " from ", peer_address)
                         : absl::StrCat(options_.max_pending_hello, " in total"),
                     "); send the Hello first, then open more streams")));
  }
  auto stream =
      std::make_shared<AgentStream>(this, context, std::move(identities), std::move(peer_address));
  stream->Start();
  return stream.get();
}

bool AgentServiceImpl::AcquirePending(const std::string& peer, std::string* reason) {
  absl::MutexLock lock(&pending_mu_);
  if (pending_total_ >= options_.max_pending_hello) {
    *reason = "hello_pending_total";
    return false;
  }
  size_t& count = pending_[peer];
  if (count >= options_.max_pending_hello_per_peer) {
    *reason = "hello_pending_peer";
    if (count == 0) pending_.erase(peer);
    return false;
  }
  ++count;
  ++pending_total_;
  return true;
}

void AgentServiceImpl::ReleasePending(const std::string& peer) {
  absl::MutexLock lock(&pending_mu_);
  auto it = pending_.find(peer);
  if (it == pending_.end()) return;
  --pending_total_;
  if (--it->second == 0) pending_.erase(it);
}

void AgentServiceImpl::RecordRefusal(std::string_view reason, std::string_view message) {
  deps_.metrics->streams_refused->Add({{"reason", std::string(reason)}}).Increment();
  log_.Log(LogLevel::kWarning, reason, message);
}

std::shared_ptr<const SharedBundle> AgentServiceImpl::CurrentBundle() {
  std::shared_ptr<const PolicySnapshot> snapshot = deps_.policies->snapshot();
  absl::MutexLock lock(&bundle_mu_);
  if (bundle_ == nullptr || bundle_->version() < snapshot->bundle_version) {
    bundle_ = std::make_shared<const SharedBundle>(snapshot->Bundle(), absl::Now());
  }
  return bundle_;
}

std::shared_ptr<AgentStream> AgentServiceImpl::Register(const std::string& host_id,
                                                        std::shared_ptr<AgentStream> stream,
                                                        bool* refused) {
  absl::MutexLock lock(&mu_);
  *refused = shutting_down_;
  if (shutting_down_) return nullptr;
  std::shared_ptr<AgentStream>& slot = streams_[host_id];
  std::shared_ptr<AgentStream> previous = std::move(slot);
  slot = std::move(stream);
  return previous;
}

void AgentServiceImpl::Unregister(const std::string& host_id, const AgentStream* stream) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(host_id);
  if (it != streams_.end() && it->second.get() == stream) streams_.erase(it);
}

grpc::ByteBuffer AgentServiceImpl::ConfigMessage() const {
  v1::ServerMessage message;
  v1::ServerConfig* config = message.mutable_config();
  *config->mutable_metric_window_length() = common::DurationToProto(options_.metric_window_length);
  *config->mutable_report_interval() = common::DurationToProto(options_.report_interval);
  config->set_server_version(std::string(rxfleet::kVersion));
  std::string bytes;
  message.SerializeToString(&bytes);
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

void AgentServiceImpl::PushCurrentBundle() {
  const std::shared_ptr<const SharedBundle> bundle = CurrentBundle();
  const absl::Time start = absl::Now();
  std::vector<std::shared_ptr<AgentStream>> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.reserve(streams_.size());
    for (const auto& [host, stream] : streams_) streams.push_back(stream);
  }
  for (const std::shared_ptr<AgentStream>& stream : streams) {
    stream->PushBundle(bundle, bundle->published());
  }
  deps_.metrics->pushes->Increment();
  deps_.metrics->fanout_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  Log(LogLevel::kInfo, absl::StrCat("pushed bundle version ", bundle->version(), " (",
                                    bundle->body_size(), " bytes) to ", streams.size(),
                                    " agents in ", absl::FormatDuration(absl::Now() - start)));
}

void AgentServiceImpl::Shutdown() {
  std::vector<std::shared_ptr<AgentStream>> streams;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (const auto& [host, stream] : streams_) streams.push_back(stream);
  }
  for (const std::shared_ptr<AgentStream>& stream : streams) {
    stream->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }
}

size_t AgentServiceImpl::connected() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

}  // namespace rxfleet::server
