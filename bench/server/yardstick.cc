// rxfleet-fanout-yardstick: the smallest server that does rxfleet-server's fan-out job, to
// measure rxfleet-server against in the same benchmark run (bench/server/fanout.sh).
//
// gRPC callback API, one ServerBidiReactor per AgentService.Connect stream, each owning an
// outbound queue. It speaks just enough of the protocol for rxfleet-loadgen: after a stream's
// first message it sends the current bundle (~200 bytes); FleetService.ApplyPolicy makes a new
// bundle version and pushes it to every stream at once (no debounce, no registry, no events,
// no persistence) and answers with that version; ACKs are counted. Everything else is
// UNIMPLEMENTED.
//
//   rxfleet-fanout-yardstick --listen 127.0.0.1:0
//
// Logs "listening (port N, ...)" on stderr and one line per push and per fully ACKed version.

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"

namespace {

using rxfleet::v1::AgentMessage;
using rxfleet::v1::ServerMessage;

class Hub;

class Stream final : public grpc::ServerBidiReactor<AgentMessage, ServerMessage>,
                     public std::enable_shared_from_this<Stream> {
 public:
  explicit Stream(Hub* hub) : hub_(hub) {}
  void Start() {
    self_ = shared_from_this();
    StartRead(&in_);
  }
  // Queues `message` (from any thread) and starts writing if idle.
  void Push(const ServerMessage& message);
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  Hub* const hub_;
  AgentMessage in_;
  bool registered_ = false;  // read path only
  absl::Mutex mu_;
  std::deque<ServerMessage> out_ ABSL_GUARDED_BY(mu_);  // front = in flight
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Stream> self_;
};

// The streams and the current bundle version.
class Hub {
 public:
  ServerMessage Bundle(uint64_t version) {
    ServerMessage message;
    message.mutable_bundle()->set_version(version);
    message.mutable_bundle()->set_nonce(absl::StrCat("nonce-", version));
    rxfleet::v1::Policy* policy = message.mutable_bundle()->add_policies();
    policy->mutable_metadata()->set_name("yardstick-usb3");
    (*policy->mutable_metadata()->mutable_annotations())["note"] = std::string(140, 'x');  // ~200 B
    policy->mutable_spec()->mutable_settings()->set_hold_us(version % 2 == 0 ? 64 : 96);
    return message;
  }

  void Add(const std::shared_ptr<Stream>& stream) {
    uint64_t version;
    {
      absl::MutexLock lock(&mu_);
      streams_.push_back(stream);
      version = version_;
    }
    stream->Push(Bundle(version));
  }
  void Remove(const Stream* stream) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (streams_[i].get() != stream) continue;
      streams_[i] = std::move(streams_.back());
      streams_.pop_back();
      return;
    }
  }
  void Ack(uint64_t version) {
    absl::MutexLock lock(&mu_);
    if (version != version_ || ++acks_ != streams_.size()) return;
    std::fprintf(stderr, "version %llu ACKed by all %zu streams %.1f ms after the push\n",
                 static_cast<unsigned long long>(version), streams_.size(),
                 absl::ToDoubleMilliseconds(absl::Now() - pushed_at_));
  }

  // A new version to every stream: the list is copied under the lock, the loop runs without.
  uint64_t PushNew() {
    std::vector<std::shared_ptr<Stream>> streams;
    uint64_t version;
    const absl::Time start = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      version = ++version_;
      acks_ = 0;
      pushed_at_ = start;
      streams = streams_;
    }
    const ServerMessage message = Bundle(version);
    for (const std::shared_ptr<Stream>& stream : streams) stream->Push(message);
    std::fprintf(stderr, "pushed version %llu to %zu streams in %.1f ms\n",
                 static_cast<unsigned long long>(version), streams.size(),
                 absl::ToDoubleMilliseconds(absl::Now() - start));
    return version;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  size_t acks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time pushed_at_ ABSL_GUARDED_BY(mu_);
};

void Stream::Push(const ServerMessage& message) {
  absl::MutexLock lock(&mu_);
  if (finishing_) return;
  out_.push_back(message);
  if (out_.size() == 1) StartWrite(&out_.front());
}

void Stream::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    if (!finishing_) {
      finishing_ = true;
      if (out_.empty()) Finish(grpc::Status::OK);
    }
    return;
  }
  if (!registered_) {  // the first message (the Hello) registers the stream
    registered_ = true;
    hub_->Add(shared_from_this());
  } else if (in_.has_ack()) {
    hub_->Ack(in_.ack().version());
  }
  StartRead(&in_);
}

void Stream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  out_.pop_front();
  if (!ok) finishing_ = true;
  if (finishing_) {
    out_.clear();
    Finish(ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
  } else if (!out_.empty()) {
    StartWrite(&out_.front());
  }
}

void Stream::OnDone() {
  hub_->Remove(this);
  self_.reset();
}

class AgentService final : public rxfleet::v1::AgentService::CallbackService {
 public:
  explicit AgentService(Hub* hub) : hub_(hub) {}
  grpc::ServerBidiReactor<AgentMessage, ServerMessage>* Connect(
      grpc::CallbackServerContext* /*context*/) override {
    auto stream = std::make_shared<Stream>(hub_);
    stream->Start();
    return stream.get();
  }

 private:
  Hub* const hub_;
};

class FleetService final : public rxfleet::v1::FleetService::CallbackService {
 public:
  explicit FleetService(Hub* hub) : hub_(hub) {}
  grpc::ServerUnaryReactor* ApplyPolicy(grpc::CallbackServerContext* context,
                                        const rxfleet::v1::ApplyPolicyRequest* /*request*/,
                                        rxfleet::v1::ApplyPolicyResponse* response) override {
    response->set_bundle_version(hub_->PushNew());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  Hub* const hub_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  CLI::App app("rxfleet-fanout-yardstick: a minimal fan-out server for benchmarks",
               "rxfleet-fanout-yardstick");
  app.add_option("--listen", listen, "gRPC address")->default_val(listen);
  CLI11_PARSE(app, argc, argv);
  // As in rxfleet-server: no lock-order graph on every mutex acquisition (one mutex per
  // stream made it the hottest code at 10,000 streams).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  Hub hub;
  AgentService agents(&hub);
  FleetService fleet(&hub);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  // The keepalive settings of rxfleet-server, so the load generator's pings are accepted.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  builder.RegisterService(&agents);
  builder.RegisterService(&fleet);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "rxfleet-fanout-yardstick: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::fprintf(stderr, "rxfleet-fanout-yardstick listening (port %d, insecure)\n", port);
  server->Wait();  // until killed
  return 0;
}
