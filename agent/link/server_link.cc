#include "agent/link/server_link.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/link/bundle_file.h"
#include "common/link_limits.h"
#include "common/proto/time.h"
#include "common/retry_after.h"

namespace rxfleet::agent {
namespace {

// The entry of `count` a new link starts at: random, so a fleet spreads over its servers.
size_t RandomFirstEntry(size_t count) {
  if (count <= 1) return 0;
  absl::BitGen gen;
  return absl::Uniform<size_t>(gen, 0, count);
}

std::string RandomInstanceId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

int Milliseconds(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

}  // namespace

BundleSink::~BundleSink() = default;

absl::StatusOr<std::unique_ptr<ServerLink>> ServerLink::Create(ServerLinkOptions options,
                                                               BundleSink* sink) {
  if (options.server_addresses.empty()) {
    return absl::InvalidArgumentError("the server link needs a server address (HOST:PORT)");
  }
  if (options.server_addresses.size() > kMaxServerAddresses) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than ", kMaxServerAddresses, " server addresses"));
  }
  for (const std::string& address : options.server_addresses) {
    if (address.empty()) {
      return absl::InvalidArgumentError("server address must not be empty (HOST:PORT)");
    }
  }
  if (options.hello.host_id().empty()) {
    return absl::InvalidArgumentError("the server link needs a host id");
  }
  if (sink == nullptr) return absl::InvalidArgumentError("the server link needs a bundle sink");
  if (options.max_queued_windows == 0) {
    return absl::InvalidArgumentError("max_queued_windows must be at least 1");
  }
  if (options.keepalive_time <= absl::ZeroDuration() ||
      options.keepalive_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("keepalive time and timeout must be positive");
  }
  return std::unique_ptr<ServerLink>(new ServerLink(std::move(options), sink));
}

ServerLink::ServerLink(ServerLinkOptions options, BundleSink* sink)
    : options_(std::move(options)),
      sink_(sink),
      instance_id_(RandomInstanceId()),
      backoff_(options_.backoff),
      rotation_(options_.server_addresses.size(),
                RandomFirstEntry(options_.server_addresses.size())) {
  status_.set_state(v1::SERVER_LINK_STATE_CONNECTING);
  status_.set_server_address(options_.server_addresses[rotation_.current()]);
}

ServerLink::~ServerLink() { Stop(); }

void ServerLink::Log(LogLevel level, const std::string& message) const {
  if (options_.log) options_.log(level, absl::StrCat("server link: ", message));
}

void ServerLink::PublishStatus() {
  if (!options_.on_status) return;
  options_.on_status(status());
}

std::string ServerLink::BundlePath() const {
  return (std::filesystem::path(options_.state_dir) / kBundleFileName).string();
}

void ServerLink::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
  }
  if (!options_.state_dir.empty()) ApplyPersistedBundle();
  PublishStatus();
  thread_ = std::thread([this] { Loop(); });
}

void ServerLink::ApplyPersistedBundle() {
  absl::StatusOr<v1::PersistedBundle> persisted = ReadBundleFile(BundlePath());
  if (!persisted.ok()) {
    if (!absl::IsNotFound(persisted.status())) {
      Log(LogLevel::kWarning,
          absl::StrCat("ignoring the persisted bundle: ", persisted.status().message()));
    }
    return;
  }
  const std::string& host_id = options_.hello.host_id();
  switch (OwnerOfPersistedBundle(*persisted, host_id)) {
    case PersistedBundleOwner::kOtherHost:
      Log(LogLevel::kError,
          absl::StrCat("not applying the persisted bundle version ", persisted->bundle().version(),
                       " in ", BundlePath(), ": it was received for host ", persisted->host_id(),
                       ", this agent is host ", host_id,
                       " (was --state-dir copied from another host?); the local policies and "
                       "built-in defaults apply until the server sends a bundle, which "
                       "replaces the file"));
      return;
    case PersistedBundleOwner::kUnrecorded:
      Log(LogLevel::kWarning,
          absl::StrCat("the persisted bundle version ", persisted->bundle().version(), " in ",
                       BundlePath(),
                       " records no host id (written by an older agent); applying it as host ",
                       host_id, "'s until the server sends a bundle, which records the host id"));
      break;
    case PersistedBundleOwner::kThisHost:
      break;
  }
  absl::StatusOr<ServerBundle> bundle = ServerBundleFromProto(persisted->bundle());
  absl::Status applied = bundle.ok() ? sink_->ApplyServerBundle(*bundle) : bundle.status();
  if (!applied.ok()) {
    Log(LogLevel::kWarning,
        absl::StrCat("ignoring the persisted bundle ", BundlePath(), ": ", applied.message()));
    return;
  }
  Log(LogLevel::kInfo, absl::StrCat("applied the persisted bundle version ",
                                    persisted->bundle().version(), " from ", BundlePath()));
  absl::MutexLock lock(&mu_);
  status_.set_active_bundle_version(persisted->bundle().version());
  status_.clear_active_bundle_nonce();
  status_.set_active_bundle_origin(v1::BUNDLE_ORIGIN_PERSISTED);
}

void ServerLink::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void ServerLink::ReportAdapter(const v1::Adapter& adapter) {
  absl::MutexLock lock(&mu_);
  const std::string& id = adapter.metadata().name();
  adapters_[id] = adapter;
  if (stream_open_) {
    changed_[id] = adapter;
    removed_.erase(id);
  }
}

void ServerLink::ReportRemoved(const std::string& adapter_id) {
  absl::MutexLock lock(&mu_);
  adapters_.erase(adapter_id);
  if (stream_open_) {
    changed_.erase(adapter_id);
    removed_.insert(adapter_id);
  }
}

void ServerLink::SendMetricWindow(v1::MetricWindow window) {
  absl::MutexLock lock(&mu_);
  v1::AgentMessage message;
  *message.mutable_metric_window() = std::move(window);
  windows_.emplace_back(next_window_seq_++, std::move(message));
  while (windows_.size() > options_.max_queued_windows) {
    windows_.pop_front();
    ++windows_dropped_;
    if (options_.on_metric_window) options_.on_metric_window("dropped");
  }
}

size_t ServerLink::queued_metric_windows() const {
  absl::MutexLock lock(&mu_);
  return windows_.size();
}

uint64_t ServerLink::metric_windows_sent() const {
  absl::MutexLock lock(&mu_);
  return windows_sent_;
}

uint64_t ServerLink::metric_windows_dropped() const {
  absl::MutexLock lock(&mu_);
  return windows_dropped_;
}

v1::ServerLinkStatus ServerLink::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

uint64_t ServerLink::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

void ServerLink::Loop() {
  absl::BitGen gen;
  const bool several = options_.server_addresses.size() > 1;
  while (true) {
    const std::string& address = options_.server_addresses[rotation_.current()];
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      status_.set_state(v1::SERVER_LINK_STATE_CONNECTING);
      status_.set_server_address(address);
    }
    PublishStatus();
    const absl::Time started = absl::Now();
    const grpc::Status ended = Explained(RunStream(address), address);
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      status_.set_state(v1::SERVER_LINK_STATE_DISCONNECTED);
      status_.set_last_error(ended.ok()
                                 ? "the server ended the stream"
                                 : absl::StrCat(ended.error_code(), " ", ended.error_message()));
      // A stream the server accepted resets the backoff, unless it ended soon with the same
      // error as the stream before: then the cause persists (e.g. a bundle larger than the agent
      // accepts) and reconnecting at once would only repeat it.
      const std::string error = status_.last_error();
      const bool short_lived = absl::Now() - started < options_.backoff.max;
      const bool worked = stream_was_configured_ && !(short_lived && error == last_end_error_);
      if (worked) backoff_.Reset();
      last_end_error_ = error;
      // Within a round of the server list the next entry comes after the backoff's first step
      // (the file comment); once every entry failed in turn, the backoff applies.
      const bool round_failed = rotation_.EndAttempt(worked);
      // A server that says when to come back paces the agent itself: its refusals do not
      // grow the backoff (which only guards servers that give no hint).
      const absl::Duration backoff = !round_failed             ? options_.backoff.initial
                                     : retry_hint_.has_value() ? backoff_.PeekDelay()
                                                               : backoff_.NextDelay();
      delay = common::ReconnectDelay(backoff * absl::Uniform(gen, 0.5, 1.0), retry_hint_,
                                     absl::Uniform(gen, 0.0, common::kRetryHintJitter));
    }
    const std::string& next = options_.server_addresses[rotation_.current()];
    PublishStatus();
    Log(LogLevel::kWarning,
        absl::StrCat("stream to ", address, " ended (",
                     ended.ok() ? std::string("OK") : ended.error_message(), "); retrying in ",
                     absl::FormatDuration(absl::Trunc(delay, absl::Milliseconds(1))),
                     several ? absl::StrCat(" at ", next) : "",
                     retry_hint_.has_value() ? absl::StrCat(" (the server asked for at least ",
                                                            absl::FormatDuration(*retry_hint_), ")")
                                             : ""));
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
  }
}

grpc::Status ServerLink::Explained(grpc::Status ended, const std::string& address) const {
  // Only failures to reach the server, and only with the agent's own transport (tests may
  // inject credentials the diagnosis cannot reproduce).
  if (ended.error_code() != grpc::StatusCode::UNAVAILABLE || options_.credentials != nullptr) {
    return ended;
  }
  common::TlsClientSetup setup;
  setup.tls = options_.tls.has_value();
  if (setup.tls) {
    absl::StatusOr<common::TlsClientSetup> files = LinkTlsSetup(*options_.tls);
    if (!files.ok()) return ended;
    setup = *std::move(files);
  }
  std::optional<std::string> why = common::ExplainTlsFailure(address, setup);
  if (!why.has_value()) return ended;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, *why);
}

grpc::Status ServerLink::RunStream(const std::string& address) {
  retry_hint_.reset();  // only the stream that ends now may set it
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options_.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(options_.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A fresh channel per attempt: the link's own jittered backoff decides when to reconnect.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // The bound the server checks every bundle against (common/link_limits.h).
  args.SetMaxReceiveMessageSize(common::kMaxServerMessageBytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = options_.credentials;
  if (credentials == nullptr && options_.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls = LinkCredentials(*options_.tls);
    if (!tls.ok()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("TLS: ", tls.status().message()));
    }
    credentials = *std::move(tls);
  }
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(address, credentials, args);
  std::unique_ptr<v1::AgentService::Stub> stub = v1::AgentService::NewStub(channel);
  grpc::ClientContext context;
  // Outside the lock: the provider takes the agent's lock, which calls into the link.
  std::optional<std::string> metrics_address;
  if (options_.metrics_address) metrics_address = options_.metrics_address();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
    context_ = &context;
    control_.clear();
    changed_.clear();
    removed_.clear();
    v1::AgentMessage hello;
    *hello.mutable_hello() = options_.hello;
    if (metrics_address.has_value()) hello.mutable_hello()->set_metrics_address(*metrics_address);
    hello.mutable_hello()->set_last_good_version(status_.active_bundle_version());
    hello.mutable_hello()->set_instance_id(instance_id_);
    control_.push_back(std::move(hello));
    v1::AgentMessage inventory;
    for (const auto& [id, adapter] : adapters_) {
      *inventory.mutable_inventory()->add_adapters() = adapter;
    }
    inventory.mutable_inventory();  // an empty inventory is still an inventory
    control_.push_back(std::move(inventory));
    stream_open_ = true;
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>> stream =
      stub->Connect(&context);
  std::thread writer([&] { WriteLoop(stream.get()); });
  v1::ServerMessage message;
  bool configured = false;
  while (stream->Read(&message)) {
    if (message.has_config()) {
      const absl::Duration interval = common::DurationFromProto(message.config().report_interval());
      {
        absl::MutexLock lock(&mu_);
        if (interval > absl::ZeroDuration()) report_interval_ = interval;
        stream_configured_ = true;  // the server answered: windows may go out
        if (!configured) {
          status_.set_state(v1::SERVER_LINK_STATE_CONNECTED);
          *status_.mutable_last_connect_time() = common::TimeToProto(absl::Now());
          status_.clear_last_error();
          ++streams_opened_;
        }
      }
      if (options_.on_config) options_.on_config(message.config());
      if (!configured) {
        configured = true;
        Log(LogLevel::kInfo, absl::StrCat("connected to ", address, " (server ",
                                          message.config().server_version(), ")"));
        PublishStatus();
      }
    } else if (message.has_bundle()) {
      HandleBundle(message.bundle());
    }
  }
  {
    absl::MutexLock lock(&mu_);
    stream_open_ = false;
    stream_configured_ = false;
    stream_was_configured_ = configured;
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  const std::multimap<grpc::string_ref, grpc::string_ref>& trailers =
      context.GetServerTrailingMetadata();
  auto hint = trailers.find(grpc::string_ref(common::kRetryAfterMetadataKey.data(),
                                             common::kRetryAfterMetadataKey.size()));
  if (hint != trailers.end()) {
    absl::StatusOr<absl::Duration> parsed =
        common::ParseRetryAfter(std::string_view(hint->second.data(), hint->second.size()));
    if (parsed.ok()) {
      retry_hint_ = *parsed;
    } else {
      Log(LogLevel::kWarning,
          absl::StrCat("ignoring the server's retry hint: ", parsed.status().message()));
    }
  }
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  return status;
}

void ServerLink::WriteLoop(grpc::ClientReaderWriter<v1::AgentMessage, v1::ServerMessage>* stream) {
  absl::MutexLock lock(&mu_);
  last_sent_ = absl::Now();
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !stream_open_ || !control_.empty() ||
             (stream_configured_ && !windows_.empty()) || !changed_.empty() || !removed_.empty();
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), last_sent_ + report_interval_);
    if (stopping_ || !stream_open_) return;
    v1::AgentMessage message;
    std::optional<uint64_t> window_seq;  // set when `message` is the oldest queued window
    if (!control_.empty()) {
      message = std::move(control_.front());
      control_.pop_front();
    } else if (stream_configured_ && !windows_.empty()) {
      // Copied, not moved: the window stays queued until the stream accepted it.
      window_seq = windows_.front().first;
      message = windows_.front().second;
    } else {
      // Changes since the last update, or an empty keep-alive update when nothing changed.
      v1::AdapterUpdate* update = message.mutable_adapter_update();
      for (auto& [id, adapter] : changed_) *update->add_adapters() = std::move(adapter);
      for (const std::string& id : removed_) update->add_removed_adapter_ids(id);
      changed_.clear();
      removed_.clear();
    }
    mu_.Unlock();
    const bool written = stream->Write(message);
    mu_.Lock();
    if (!written) {
      // The call is over (the server finished it or the transport broke), so the reader's Read
      // fails too. Not cancelled here: a cancel would replace the server's status and trailing
      // metadata (e.g. a refusal's retry hint) with CANCELLED.
      return;
    }
    if (window_seq.has_value()) {
      // Unless the full queue dropped it meanwhile, it is still the oldest.
      if (!windows_.empty() && windows_.front().first == *window_seq) windows_.pop_front();
      ++windows_sent_;
      if (options_.on_metric_window) options_.on_metric_window("sent");
    }
    last_sent_ = absl::Now();
  }
}

void ServerLink::HandleBundle(const v1::PolicyBundle& bundle) {
  absl::StatusOr<ServerBundle> converted = ServerBundleFromProto(bundle);
  const absl::Status applied =
      converted.ok() ? sink_->ApplyServerBundle(*converted) : converted.status();
  v1::AgentMessage reply;
  std::string persist_error;
  if (applied.ok()) {
    v1::Ack* ack = reply.mutable_ack();
    if (!options_.state_dir.empty()) {
      if (absl::Status saved = WriteBundleFile(BundlePath(), bundle, options_.hello.host_id());
          !saved.ok()) {
        // Still an ACK (the bundle is in effect; a NACK would say the old one is), saying
        // that it is not saved (docs/API.md).
        Log(LogLevel::kWarning,
            absl::StrCat("bundle version ", bundle.version(),
                         " applied but not persisted (a restart without the server falls back "
                         "to the previous file): ",
                         saved.message()));
        persist_error = absl::StrCat(saved.message());
        ack->set_persist_error(persist_error);
        if (options_.on_bundle_persist_failure) options_.on_bundle_persist_failure();
      }
    }
    ack->set_version(bundle.version());
    ack->set_nonce(bundle.nonce());
    *ack->mutable_apply_time() = common::TimeToProto(absl::Now());
    Log(LogLevel::kInfo, absl::StrCat("applied bundle version ", bundle.version(), " (",
                                      bundle.policies_size(), " policies)"));
  } else {
    Log(LogLevel::kWarning,
        absl::StrCat("rejected bundle version ", bundle.version(), ": ", applied.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (applied.ok()) {
      status_.set_active_bundle_version(bundle.version());
      status_.set_active_bundle_nonce(bundle.nonce());
      status_.set_active_bundle_origin(v1::BUNDLE_ORIGIN_SERVER);
      status_.set_active_bundle_persist_error(persist_error);
    } else {
      v1::Nack* nack = reply.mutable_nack();
      nack->set_version(bundle.version());
      nack->set_nonce(bundle.nonce());
      nack->set_error_detail(std::string(applied.message()));
      nack->set_active_version(status_.active_bundle_version());
      status_.set_last_nacked_version(bundle.version());
      status_.set_last_nack_detail(std::string(applied.message()));
    }
    if (stream_open_) control_.push_back(std::move(reply));
  }
  PublishStatus();
}

}  // namespace rxfleet::agent
