// AgentService: one AgentStream per connected agent (below) on the gRPC async API, and the
// service that accepts streams on its sharded completion queues, registers them and fans
// bundles out to them (AgentServiceImpl, at the end).
// Length reason: the stream is one state machine (Hello deadline, reads, the coalescing
// outbound queue, Finish exactly once, the done step) whose invariants on mu_ hold across all
// its methods; split across files it would have to expose that state. The service part (with
// the admission bounds for streams without a Hello and the queue threads) shares the stream's
// private types.

#include "server/api/agent_service.h"

#include <grpcpp/alarm.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "absl/random/random.h"
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

// What a completion queue hands back: its thread calls Complete(ok) for every event.
class CompletionTag {
 public:
  virtual void Complete(bool ok) = 0;

 protected:
  ~CompletionTag() = default;
};

// One completion queue, its thread and its streams' Hello deadlines.
struct AgentServiceImpl::Shard {
  class WakeTag final : public CompletionTag {
   public:
    explicit WakeTag(Shard* shard) : shard_(shard) {}
    void Complete(bool /*ok*/) override { shard_->RunTasks(); }

   private:
    Shard* const shard_;
  };

  // Runs `task` on this queue's thread; false (dropped) once the queue is closing.
  bool Post(std::function<void()> task) {
    absl::MutexLock lock(&mu);
    if (closed) return false;
    tasks.push_back(std::move(task));
    if (!wake_pending) {
      wake_pending = true;
      wake.Set(cq.get(), std::chrono::system_clock::now(), static_cast<CompletionTag*>(&wake_tag));
    }
    return true;
  }

  void RunTasks() {
    std::vector<std::function<void()>> run;
    {
      absl::MutexLock lock(&mu);
      run.swap(tasks);
      wake_pending = false;
    }
    for (std::function<void()>& task : run) task();
  }

  size_t index = 0;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  std::thread thread;
  // Hello deadlines of this queue's new streams, oldest first (one timeout for all, so the
  // order of arrival is the order of expiry). Only the queue's thread uses it.
  std::deque<std::pair<absl::Time, std::weak_ptr<AgentStream>>> hello_deadlines;

  absl::Mutex mu;
  std::vector<std::function<void()>> tasks ABSL_GUARDED_BY(mu);
  bool wake_pending ABSL_GUARDED_BY(mu) = false;
  bool closed ABSL_GUARDED_BY(mu) = false;
  grpc::Alarm wake;
  WakeTag wake_tag{this};
};

// One agent stream. Lifetime: owned by `self_` from the request for a new call until every
// operation it started has completed (Done()), and by the service's stream map while
// registered; the object may outlive Done (a fan-out holding a reference), but then every
// operation is a no-op because the stream has finished.
//
// Threading: every completion of the stream arrives on its queue's thread (one at a time);
// pushes and End() come from any thread. Everything shared is guarded by mu_. Async
// operations never complete inline, so they are started with mu_ held, which keeps "is the
// stream finishing?" and "start an operation" atomic.
class AgentStream final : public std::enable_shared_from_this<AgentStream> {
 public:
  AgentStream(AgentServiceImpl* service, AgentServiceImpl::Shard* shard)
      : service_(service), deps_(service->deps_), shard_(shard), stream_(&context_) {}

  size_t ShardIndex() const { return shard_->index; }

  // Asks gRPC for the next call of AgentService.Connect on this stream's queue.
  void Request() {
    self_ = shared_from_this();
    service_->RequestConnect(&context_, &stream_, shard_->cq.get(), shard_->cq.get(),
                             static_cast<CompletionTag*>(&accept_tag_));
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
      if (gate_.finishing()) return;
      host_id = host_id_;
    }
    std::string host_fields = HostFields(host_id);
    Outgoing item;
    item.nonce = NewNonce();
    item.message = bundle->Message(item.nonce, host_fields);
    {
      absl::MutexLock lock(&mu_);
      sent_host_fields_ = std::move(host_fields);
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

  // Ends the stream with `status` (and `trailing_metadata`, sent with it) once the write in
  // flight (if any) is done. The first request wins; later ones change nothing.
  void End(const grpc::Status& status,
           std::vector<std::pair<std::string, std::string>> trailing_metadata = {}) {
    absl::MutexLock lock(&mu_);
    if (!gate_.finishing()) trailing_metadata_ = std::move(trailing_metadata);
    RequestFinishLocked(status);
  }

  // The server drains: ends the stream with UNAVAILABLE and a reconnect delay for the agent.
  void EndDraining(int64_t retry_after_ms) {
    End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server draining; reconnect"),
        {{std::string(kRetryAfterMetadataKey), absl::StrCat(retry_after_ms)}});
  }

 private:
  static constexpr size_t kConfigSlot = 0;
  static constexpr size_t kBundleSlot = 1;

  class Tag final : public CompletionTag {
   public:
    Tag(AgentStream* stream, void (AgentStream::*method)(bool))
        : stream_(stream), method_(method) {}
    void Complete(bool ok) override { (stream_->*method_)(ok); }

   private:
    AgentStream* const stream_;
    void (AgentStream::*const method_)(bool);
  };

  // gRPC matched a new call to this stream (ok false: the server is shutting down).
  void OnAccepted(bool ok) {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      done_ = true;  // no call: nothing to finish, nothing to report
    } else {
      service_->RequestStream(*shard_);
      peer_ = context_.peer();
      std::vector<std::pair<std::string, std::string>> trailing_metadata;
      const grpc::Status admitted =
          service_->Admit(context_, &identities_, &peer_address_, &trailing_metadata);
      absl::MutexLock lock(&mu_);
      if (!admitted.ok()) {
        trailing_metadata_ = std::move(trailing_metadata);
        RequestFinishLocked(admitted);
        return;
      }
      admitted_ = true;  // holds an admission slot until Done()
      pending_ = true;
      shard_->hello_deadlines.emplace_back(absl::Now() + service_->options_.hello_timeout,
                                           weak_from_this());
      StartReadLocked();
      return;
    }
    AgentServiceImpl* service = service_;
    std::shared_ptr<AgentStream> self = std::move(self_);
    service->StreamDone();
  }

  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    read_pending_ = true;
    stream_.Read(&read_buffer_, static_cast<CompletionTag*>(&read_tag_));
  }

  void OnReadDone(bool ok) {
    ReleasePending();
    if (!ok) {  // the agent closed its side or the call was cancelled
      {
        absl::MutexLock lock(&mu_);
        read_pending_ = false;
        RequestFinishLocked(grpc::Status::OK);
      }
      MaybeDone();
      return;
    }
    v1::AgentMessage message;
    grpc::ProtoBufferReader reader(&read_buffer_);
    absl::Status status = message.ParseFromZeroCopyStream(&reader)
                              ? Handle(message)
                              : absl::InvalidArgumentError("malformed AgentMessage");
    read_buffer_.Clear();
    {
      absl::MutexLock lock(&mu_);
      read_pending_ = false;
      if (!status.ok()) {
        deps_.metrics->streams_rejected->Increment();
        Log(LogLevel::kWarning,
            absl::StrCat("agent stream from ", peer_,
                         host_id_.empty() ? "" : absl::StrCat(" (host ", host_id_, ")"),
                         " rejected: ", status.ToString()));
        RequestFinishLocked(ToGrpcStatus(status));
      } else if (!gate_.finishing()) {
        StartReadLocked();
      }
    }
    MaybeDone();
  }

  void OnWriteDone(bool ok) {
    uint64_t written_version = 0;
    {
      absl::MutexLock lock(&mu_);
      if (ok) written_version = writing_version_;
      write_buffer_.Clear();
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

  void OnFinishDone(bool /*ok*/) {
    {
      absl::MutexLock lock(&mu_);
      finish_done_ = true;
    }
    MaybeDone();
  }

  // Runs Done() once the stream has finished and no read is pending any more.
  void MaybeDone() {
    {
      absl::MutexLock lock(&mu_);
      if (done_ || !finish_done_ || read_pending_) return;
      done_ = true;
    }
    Done();
  }

  // The stream's last step (the callback API's OnDone): unregisters it and records the
  // disconnection, exactly once.
  void Done() {
    ReleasePending();
    if (admitted_) service_->admission_.Release();
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
    AgentServiceImpl* service = service_;
    std::shared_ptr<AgentStream> self = std::move(self_);
    service->StreamDone();
    // `self` may delete this on return.
  }

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

  // Runs on the fan-out thread for every stream: keep it to the queue and the write. The
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
    stream_.Write(write_buffer_, static_cast<CompletionTag*>(&write_tag_));
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
    for (const auto& [key, value] : trailing_metadata_) context_.AddTrailingMetadata(key, value);
    trailing_metadata_.clear();
    stream_.Finish(gate_.status(), static_cast<CompletionTag*>(&finish_tag_));
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
        RepushIfHostFieldsChanged(now);
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
        RepushIfHostFieldsChanged(now);
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
      EndDraining(service_->DrainRetryAfterMs());
      return absl::OkStatus();  // ending already; nothing is sent
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
    // Labels and capabilities come with the Hello: they may move the host's probe slots.
    service_->probe_slots_.UpdateHost(hello.host_id());
    PushBundle(service_->CurrentBundle(), now);
    return absl::OkStatus();
  }

  // The host's own PolicyBundle fields: its experiment assignments (field 4), then its probe
  // slots (field 6), serialised; empty when it has neither.
  std::string HostFields(const std::string& host_id) const {
    if (host_id.empty()) return "";
    std::string fields;
    if (deps_.experiments != nullptr) fields = deps_.experiments->AssignmentBytes(host_id);
    fields += service_->probe_slots_.HostBytes(host_id);
    return fields;
  }

  // The host's adapters changed: if that changes its assignments or its probe slots (only this
  // host's slots move, server/registry/probe_slots.h), the current bundle goes out again with
  // them (same version, fresh nonce).
  void RepushIfHostFieldsChanged(absl::Time now) {
    service_->probe_slots_.UpdateHost(host_id_);
    const std::string host_fields = HostFields(host_id_);
    {
      absl::MutexLock lock(&mu_);
      if (host_fields == sent_host_fields_) return;
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
    bool recovered = false;
    if (!deps_.registry->RecordAck(host_id_, stream_id_, ack.version(), now, persist_error,
                                   &recovered)) {
      return;
    }
    // A plain ACK is host status (last_acked_version, last_ack_time) and metrics, not an event:
    // at fleet scale an event per host and change would replace the whole event log with
    // routine ACKs on every change. Events mark what an operator must see: a failure, and the
    // ACK that ends one.
    if (!persist_error.empty()) {
      deps_.events->Record(HostEvent(host_id_, v1::EVENT_TYPE_WARNING, "BundleNotPersisted",
                                     absl::StrCat("applied bundle version ", ack.version(),
                                                  " but could not save it: ", persist_error)),
                           now);
    } else if (recovered) {
      deps_.events->Record(HostEvent(host_id_, v1::EVENT_TYPE_NORMAL, "BundleAcked",
                                     absl::StrCat("applied bundle version ", ack.version(),
                                                  " after an earlier NACK or persist error")),
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
  AgentServiceImpl::Shard* const shard_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  Tag accept_tag_{this, &AgentStream::OnAccepted};
  Tag read_tag_{this, &AgentStream::OnReadDone};
  Tag write_tag_{this, &AgentStream::OnWriteDone};
  Tag finish_tag_{this, &AgentStream::OnFinishDone};

  // Set on the queue thread when the call is accepted, before any other thread sees the stream.
  std::string peer_;
  std::string peer_address_;
  // CN and DNS SANs of the verified client certificate (empty without one).
  std::vector<std::string> identities_;
  std::atomic<bool> pending_{false};
  // Set with mu_ held when Admit accepted the stream (it then holds an admission slot); read by
  // Done() on the same queue thread.
  bool admitted_ = false;

  // Read path only (reads of one stream never overlap). host_id_/stream_id_ are written once,
  // under mu_, before the stream is registered for pushes.
  grpc::ByteBuffer read_buffer_;
  bool hello_seen_ = false;
  std::string nacked_nonce_;  // nonce of the last NACK that recorded an event

  absl::Mutex mu_;
  std::string host_id_;     // set once at Hello (guarded for the write path and Done)
  uint64_t stream_id_ = 0;  // registry stream id, 0 before Hello
  OutboundQueue<Outgoing, 2> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer write_buffer_ ABSL_GUARDED_BY(mu_);  // the write in flight
  uint64_t writing_version_ ABSL_GUARDED_BY(mu_) = 0;   // its bundle version, 0 for config
  std::string sent_nonce_ ABSL_GUARDED_BY(mu_);
  std::string sent_host_fields_ ABSL_GUARDED_BY(mu_);  // of the newest bundle queued
  uint64_t sent_version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time sent_pushed_at_ ABSL_GUARDED_BY(mu_);
  FinishGate gate_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> trailing_metadata_ ABSL_GUARDED_BY(mu_);
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;

  std::shared_ptr<AgentStream> self_;
};

AgentServiceImpl::AgentServiceImpl(AgentServiceOptions options, AgentServiceDeps deps)
    : options_(options), deps_(deps), admission_(options_.admission), probe_slots_(deps.registry) {}

AgentServiceImpl::~AgentServiceImpl() { Stop(); }

std::string PeerAddress(std::string_view peer) {
  if (!absl::StartsWith(ToAbslView(peer), "ipv4:") &&
      !absl::StartsWith(ToAbslView(peer), "ipv6:")) {
    return std::string(peer);
  }
  const size_t colon = peer.rfind(':');
  return std::string(colon > 5 ? peer.substr(0, colon) : peer);
}

void AgentServiceImpl::AddTo(grpc::ServerBuilder& builder) {
  builder.RegisterService(this);
  const size_t queues = std::clamp<size_t>(options_.completion_queues, 1, 256);
  for (size_t i = 0; i < queues; ++i) {
    auto shard = std::make_unique<Shard>();
    shard->index = i;
    shard->cq = builder.AddCompletionQueue();
    shards_.push_back(std::move(shard));
  }
}

void AgentServiceImpl::Start() {
  started_ = true;
  for (std::unique_ptr<Shard>& shard : shards_) {
    RequestStream(*shard);
    shard->thread = std::thread([this, s = shard.get()] { RunShard(*s); });
  }
}

void AgentServiceImpl::RunShard(Shard& shard) {
  for (;;) {
    absl::Time deadline = absl::Now() + absl::Seconds(1);
    if (!shard.hello_deadlines.empty()) {
      deadline = std::min(deadline, shard.hello_deadlines.front().first);
    }
    void* tag = nullptr;
    bool ok = false;
    const grpc::CompletionQueue::NextStatus next =
        shard.cq->AsyncNext(&tag, &ok, absl::ToChronoTime(deadline));
    if (next == grpc::CompletionQueue::SHUTDOWN) return;
    if (next == grpc::CompletionQueue::GOT_EVENT) static_cast<CompletionTag*>(tag)->Complete(ok);
    const absl::Time now = absl::Now();
    while (!shard.hello_deadlines.empty() && shard.hello_deadlines.front().first <= now) {
      std::shared_ptr<AgentStream> stream = shard.hello_deadlines.front().second.lock();
      shard.hello_deadlines.pop_front();
      if (stream != nullptr) stream->HelloTimeout();
    }
  }
}

void AgentServiceImpl::RequestStream(Shard& shard) {
  {
    absl::MutexLock lock(&live_mu_);
    ++live_;
  }
  std::make_shared<AgentStream>(this, &shard)->Request();
}

void AgentServiceImpl::StreamDone() {
  absl::MutexLock lock(&live_mu_);
  --live_;
}

void AgentServiceImpl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (!started_) {
    // The server never started (e.g. its port was taken): nothing was requested on the
    // queues. Their destructors shut them down; CompletionQueue::Shutdown here would only log
    // "shutdown before its server" once per queue under the bind error.
    return;
  }
  {
    // grpc::Server::Shutdown has ended every call and failed the outstanding requests; their
    // last completions are on the queues, which the threads still drain.
    absl::MutexLock lock(&live_mu_);
    auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(live_mu_) { return live_ == 0; };
    while (!live_mu_.AwaitWithTimeout(absl::Condition(&none), absl::Seconds(10))) {
      Log(LogLevel::kWarning, absl::StrCat("waiting for ", live_, " agent streams to end"));
    }
  }
  for (std::unique_ptr<Shard>& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    shard->closed = true;
    shard->mu.Await(absl::Condition(
        +[](Shard* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return !s->wake_pending; },
        shard.get()));
  }
  for (std::unique_ptr<Shard>& shard : shards_) shard->cq->Shutdown();
  // Started: every queue has its thread, which returns once its queue is drained.
  for (std::unique_ptr<Shard>& shard : shards_) shard->thread.join();
}

grpc::Status AgentServiceImpl::Admit(
    grpc::ServerContext& context, std::vector<std::string>* identities, std::string* peer_address,
    std::vector<std::pair<std::string, std::string>>* trailing_metadata) {
  *identities = HostIdentities(*context.auth_context());
  if (options_.require_client_certificate && identities->empty()) {
    if (deps_.auth != nullptr) deps_.auth->CountAgentDenial("no_client_certificate");
    RecordRefusal("no_client_certificate",
                  absl::StrCat("agent stream from ", context.peer(),
                               " refused: no verified client certificate"));
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "agents must present a client certificate signed by the fleet CA "
                        "(rxfleet-agent --tls-cert/--tls-key; see docs/SECURITY.md)");
  }
  if (AdmissionDecision admission = admission_.TryAdmit(); !admission.admitted) {
    RecordRefusal(admission.reason, absl::StrCat("agent stream from ", context.peer(),
                                                 " refused: ", admission.message));
    trailing_metadata->emplace_back(std::string(common::kRetryAfterMetadataKey),
                                    common::FormatRetryAfter(admission.retry_after));
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, admission.message);
  }
  *peer_address = PeerAddress(context.peer());
  std::string reason;
  if (!AcquirePending(*peer_address, &reason)) {
    admission_.Release();
    RecordRefusal(reason, absl::StrCat("agent stream from ", context.peer(), " refused: ",
                                       reason == "hello_pending_peer"
                                           ? "too many streams of this address without a Hello"
                                           : "too many streams without a Hello"));
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("too many agent streams without a Hello (",
                                     reason == "hello_pending_peer"
                                         ? absl::StrCat(options_.max_pending_hello_per_peer,
                                                        " from ", *peer_address)
                                         : absl::StrCat(options_.max_pending_hello, " in total"),
                                     "); send the Hello first, then open more streams"));
  }
  return grpc::Status::OK;
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
  // Before any stream reads its host's slots for this version.
  probe_slots_.Sync(*snapshot);
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
  std::vector<std::vector<std::shared_ptr<AgentStream>>> by_shard(shards_.size());
  size_t total = 0;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    total = streams_.size();
    for (const auto& [host, stream] : streams_) {
      by_shard[stream->ShardIndex()].push_back(stream);
    }
  }
  // The last queue to have started its writes records the fan-out.
  struct Round {
    std::atomic<size_t> remaining{0};
    std::function<void()> done;
  };
  auto round = std::make_shared<Round>();
  round->done = [this, bundle, start, total] {
    const absl::Duration took = absl::Now() - start;
    deps_.metrics->pushes->Increment();
    deps_.metrics->fanout_seconds->Observe(absl::ToDoubleSeconds(took));
    Log(LogLevel::kInfo,
        absl::StrCat("pushed bundle version ", bundle->version(), " (", bundle->body_size(),
                     " bytes) to ", total, " agents in ", absl::FormatDuration(took)));
  };
  if (!options_.push_on_queue_threads || !started_) {
    for (const std::vector<std::shared_ptr<AgentStream>>& streams : by_shard) {
      for (const std::shared_ptr<AgentStream>& stream : streams) {
        stream->PushBundle(bundle, bundle->published());
      }
    }
    round->done();
    return;
  }
  for (const std::vector<std::shared_ptr<AgentStream>>& streams : by_shard) {
    if (!streams.empty()) ++round->remaining;
  }
  if (round->remaining == 0) {
    round->done();
    return;
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (by_shard[i].empty()) continue;
    auto task = [round, bundle, streams = std::move(by_shard[i])] {
      for (const std::shared_ptr<AgentStream>& stream : streams) {
        stream->PushBundle(bundle, bundle->published());
      }
      if (--round->remaining == 0) round->done();
    };
    // A closed queue belongs to a server that is stopping: its streams are ending anyway.
    if (!shards_[i]->Post(std::move(task)) && --round->remaining == 0) round->done();
  }
}

void AgentServiceImpl::Shutdown(absl::Duration spread) {
  spread = std::max(spread, absl::ZeroDuration());
  std::vector<std::shared_ptr<AgentStream>> streams;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    drain_spread_ = spread;
    for (const auto& [host, stream] : streams_) streams.push_back(stream);
  }
  absl::BitGen gen;
  std::shuffle(streams.begin(), streams.end(), gen);
  // Stream k of n ends at a uniform time within the k-th of n equal slots of the window, so
  // agents that reconnect at once (ignoring the retry delay) still come back spread out.
  const absl::Time start = absl::Now();
  const double n = static_cast<double>(streams.size());
  for (size_t k = 0; k < streams.size(); ++k) {
    const absl::Time at =
        start + spread * ((static_cast<double>(k) + absl::Uniform(gen, 0.0, 1.0)) / n);
    if (const absl::Duration wait = at - absl::Now(); wait > absl::ZeroDuration()) {
      absl::SleepFor(wait);
    }
    streams[k]->EndDraining(DrainRetryAfterMs());
  }
}

int64_t AgentServiceImpl::DrainRetryAfterMs() {
  absl::Duration spread;
  {
    absl::MutexLock lock(&mu_);
    spread = drain_spread_;
  }
  thread_local absl::BitGen gen;
  return absl::Uniform<int64_t>(absl::IntervalClosedClosed, gen, 0,
                                absl::ToInt64Milliseconds(spread));
}

size_t AgentServiceImpl::connected() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

}  // namespace rxfleet::server
