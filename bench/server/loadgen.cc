// rxfleet-loadgen: N protocol-level agents (gRPC callback API, no USB) on one rxfleet-server,
// or spread over several replicas of one fleet.
//
// Each agent opens AgentService.Connect, sends Hello and an inventory of one adapter, and ACKs
// every bundle at once. Agents are spread over C channels, each with its own TCP connection
// (distinct channel arguments and a local subchannel pool), so N = C gives one connection per
// agent like a real fleet and N > C packs N/C streams per connection (to stay under the fd
// limit). After all agents have ACKed their first bundle, the load generator applies K policy
// changes through FleetService and measures, for each, the time from the ApplyPolicy call until
// every agent has received (and answered) the new bundle. With --server-pid it also reports the
// server's resident memory before and after the agents connected.
//
// Replicas (--server A,B,C: n comma-separated addresses of servers on one database): agent i
// connects to server i % n, over channels of that server only (channel c goes to server c % n,
// so --channels must be at least n), and every ApplyPolicy goes to the first server; a change
// is complete when every agent on every server has ACKed it. --server-pid takes the servers'
// PIDs comma-separated too and reports the sum of their resident memory. The JSON then also
// has "server_agents": the number of agents on each server, in --server order, and each
// change "server_all_ms": when the last agent of each server ACKed it.
//
// Agents reconnect like rxfleet-agent when their stream ends: exponential backoff (1 s doubling
// to 60 s, scaled by a random factor in [0.5, 1]), reset by a stream that got a bundle, and at
// least the server's retry hint (trailing metadata rxfleet-retry-after-ms, plus 0-20 % jitter;
// common/retry_after.h). With N = C each attempt uses a fresh channel, as the agent does.
//
// Storm mode (--storm-rounds R): after the first connect, instead of policy changes, waits for
// R reconnect storms (the server restarted by someone else): a round starts when the first
// stream ends and is over when every agent is connected again and has ACKed a bundle at least
// as new as before the round, on its new stream. It prints "storm round K: ..." per round and
// "all N agents connected" when ready for the first restart.
//
//   rxfleet-loadgen --server 127.0.0.1:7443 --agents 1000 --channels 1000 --changes 5
//       --server-pid $(pidof rxfleet-server)
//   rxfleet-loadgen --server 127.0.0.1:7443 --agents 10000 --storm-rounds 1
//   rxfleet-loadgen --server 127.0.0.1:7443,127.0.0.1:7444,127.0.0.1:7445 --agents 3000
//       --changes 5 --server-pid 101,102,103
//
// Output: a human summary on stderr and one JSON object on stdout. Exit 0 if every change
// (every storm round) reached every agent within --timeout, 1 otherwise, 2 for bad flags.

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/retry_after.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"

namespace {

// Resident set of a process in KiB (VmRSS), or -1.
int64_t RssKiB(int pid) {
  if (pid <= 0) return -1;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Sum of `of(pid)` over `pids` (RssKiB, CpuSeconds), or -1 if there are none or one of them is
// unreadable (negative).
template <typename F>
auto SumOver(const std::vector<int>& pids, F of) -> decltype(of(0)) {
  decltype(of(0)) sum = 0;
  for (int pid : pids) {
    const auto value = of(pid);
    if (value < 0) return -1;
    sum += value;
  }
  return pids.empty() ? -1 : sum;
}

int64_t RssKiB(const std::vector<int>& pids) {
  return SumOver(pids, [](int pid) { return RssKiB(pid); });
}

// CPU time (user + system) of a process in seconds, or -1.
double CpuSeconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return -1;
  // Fields after the command (which may hold spaces) end at the last ')'.
  const size_t end = line.rfind(')');
  if (end == std::string::npos) return -1;
  const std::vector<std::string> fields = absl::StrSplit(line.substr(end + 2), ' ');
  int64_t utime = 0;
  int64_t stime = 0;
  // utime and stime are fields 14 and 15 of proc(5), the 12th and 13th after the command.
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double CpuSeconds(const std::vector<int>& pids) {
  return SumOver(pids, [](int pid) { return CpuSeconds(pid); });
}

class Fleet;
class Agent;

// Reconnect timers of all agents on one thread (so no gRPC callback waits or creates channels).
class Scheduler {
 public:
  Scheduler() : thread_([this] { Run(); }) {}
  ~Scheduler() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  void At(absl::Time when, std::function<void()> action) {
    absl::MutexLock lock(&mu_);
    queue_.emplace(when, std::move(action));
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      const absl::Time next =
          queue_.empty() ? absl::Now() + absl::Milliseconds(100) : queue_.begin()->first;
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!queue_.empty() && queue_.begin()->first <= absl::Now());
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), next);
      while (!stopping_ && !queue_.empty() && queue_.begin()->first <= absl::Now()) {
        std::function<void()> action = std::move(queue_.begin()->second);
        queue_.erase(queue_.begin());
        mu_.Unlock();
        action();
        mu_.Lock();
      }
    }
  }
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::multimap<absl::Time, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// One stream of one agent: Hello, inventory, then an ACK for every bundle. Deletes itself.
class Attempt final
    : public grpc::ClientBidiReactor<rxfleet::v1::AgentMessage, rxfleet::v1::ServerMessage> {
 public:
  explicit Attempt(Agent* agent) : agent_(agent) {}

  void Start(rxfleet::v1::AgentService::Stub* stub, int index);
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void Queue(rxfleet::v1::AgentMessage message);

  Agent* const agent_;
  grpc::ClientContext context_;
  rxfleet::v1::ServerMessage in_;
  bool acked_ = false;  // read path only
  absl::Mutex mu_;
  std::deque<rxfleet::v1::AgentMessage> out_ ABSL_GUARDED_BY(mu_);  // front = in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
};

// Bookkeeping over all agents: which bundle version each has answered and when, which are
// connected with an ACKed bundle on their current stream ("up"), and the storm rounds.
class Fleet {
 public:
  explicit Fleet(int agents)
      : agents_(agents), versions_(agents, 0), times_(agents), stream_version_(agents, 0) {}

  // Changes are applied one at a time, so the latest version an agent got is the current
  // target's, even when it arrived before Target() was called (the push may overtake the
  // ApplyPolicy response).
  void OnBundle(int index, uint64_t version) {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    const bool was_up = IsUp(index);
    stream_version_[index] = std::max(stream_version_[index], version);
    if (!was_up && IsUp(index)) {
      ++up_;
      if (first_up_ == absl::InfinitePast()) first_up_ = now;
    }
    if (version <= versions_[index]) return;
    if (versions_[index] < target_ && version >= target_) ++reached_;
    versions_[index] = version;
    times_[index] = now;
  }

  // The agent's stream ended (`refused_with_hint`: RESOURCE_EXHAUSTED with a retry hint).
  void OnStreamEnd(int index, const grpc::Status& status, bool with_hint) {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    if (IsUp(index)) --up_;
    stream_version_[index] = 0;
    if (first_down_ == absl::InfinitePast()) first_down_ = now;
    ++stream_ends_;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused_;
      if (with_hint) ++refused_with_hint_;
    }
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      last_error_ = status.error_message();
    }
  }

  void OnHint(absl::Duration hint) {
    absl::MutexLock lock(&mu_);
    max_hint_ = std::max(max_hint_, hint);
  }

  void OnDone() {
    absl::MutexLock lock(&mu_);
    ++done_;
  }

  // Sets a new target version and counts the agents already there.
  void Target(uint64_t version) {
    absl::MutexLock lock(&mu_);
    target_ = version;
    reached_ = 0;
    for (int i = 0; i < agents_; ++i) {
      if (versions_[i] >= version) ++reached_;
    }
  }

  // Waits until every agent reached the target (true) or the deadline passed.
  bool AwaitAll(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reached_ == agents_; };
    mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
    return reached_ == agents_;
  }

  // Storm rounds: the current round's counters start now (all agents up).
  void BeginRound() {
    absl::MutexLock lock(&mu_);
    first_down_ = absl::InfinitePast();
    first_up_ = absl::InfinitePast();
    round_target_ = target_;
    for (uint64_t v : versions_) round_target_ = std::max(round_target_, v);
    up_ = 0;
    for (int i = 0; i < agents_; ++i) up_ += IsUp(i) ? 1 : 0;
    refused_ = refused_with_hint_ = stream_ends_ = 0;
    max_hint_ = absl::ZeroDuration();
  }
  // Waits for the first stream end of the round; false at the deadline.
  bool AwaitFirstDown(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto down = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return first_down_ != absl::InfinitePast();
    };
    return mu_.AwaitWithDeadline(absl::Condition(&down), deadline);
  }
  // Waits until every agent is up again after the first stream end; false at the deadline.
  bool AwaitAllUp(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    first_up_ = absl::InfinitePast();  // the first ACK after the stream ends began
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return up_ == agents_; };
    return mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
  }
  nlohmann::json RoundSummary(absl::Time end) {
    absl::MutexLock lock(&mu_);
    auto since = [&](absl::Time t) {
      return t == absl::InfinitePast() ? 0.0 : absl::ToDoubleSeconds(end - t);
    };
    return {{"up", up_},
            {"all_up_since_first_disconnect_seconds", since(first_down_)},
            {"all_up_since_first_reconnect_seconds", since(first_up_)},
            {"stream_ends", stream_ends_},
            {"refused", refused_},
            {"refused_with_hint", refused_with_hint_},
            {"max_hint_ms", absl::ToInt64Milliseconds(max_hint_)},
            {"version", round_target_}};
  }

  // Times at which agents got their latest bundle (the target's), relative to `start`, sorted.
  // With `stride` > 1, only agents i with i % stride == `server` (the agents of one server).
  std::vector<double> Latencies(absl::Time start, int stride = 1, int server = 0) {
    absl::MutexLock lock(&mu_);
    std::vector<double> out;
    for (int i = server; i < agents_; i += stride) {
      if (versions_[i] >= target_) out.push_back(absl::ToDoubleMilliseconds(times_[i] - start));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  int reached() {
    absl::MutexLock lock(&mu_);
    return reached_;
  }
  int up() {
    absl::MutexLock lock(&mu_);
    return up_;
  }
  std::string last_error() {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }
  bool AwaitDone(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ == agents_; };
    return mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
  }

 private:
  bool IsUp(int index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stream_version_[index] != 0 && stream_version_[index] >= round_target_;
  }

  const int agents_;
  absl::Mutex mu_;
  std::vector<uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> times_ ABSL_GUARDED_BY(mu_);
  // Newest version ACKed on the agent's current stream (0 = none, or no stream).
  std::vector<uint64_t> stream_version_ ABSL_GUARDED_BY(mu_);
  uint64_t target_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t round_target_ ABSL_GUARDED_BY(mu_) = 1;
  int reached_ ABSL_GUARDED_BY(mu_) = 0;
  int up_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time first_down_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time first_up_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int stream_ends_ ABSL_GUARDED_BY(mu_) = 0;
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
  int refused_with_hint_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration max_hint_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

// One protocol-level agent across reconnects.
class Agent {
 public:
  // `shared`: the stub of a pooled channel, or null for a fresh channel per attempt.
  Agent(Fleet* fleet, Scheduler* scheduler, int index, const std::string& server,
        rxfleet::v1::AgentService::Stub* shared)
      : fleet_(fleet), scheduler_(scheduler), index_(index), server_(server), shared_(shared) {}

  // Opens a stream now (scheduler or main thread).
  void Connect() {
    rxfleet::v1::AgentService::Stub* stub = shared_;
    if (stub == nullptr) {
      own_stub_.reset();
      own_channel_ = MakeChannel(server_, index_);
      own_stub_ = rxfleet::v1::AgentService::NewStub(own_channel_);
      stub = own_stub_.get();
    }
    Attempt* attempt = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;  // Stop() counted this agent done
      attempt_ = attempt = new Attempt(this);
    }
    attempt->Start(stub, index_);  // no reaction runs before Start's StartCall
  }

  // Cancels the open stream, or the pending reconnect; the fleet counts the agent done.
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (attempt_ != nullptr) {
      attempt_->Cancel();
    } else {
      fleet_->OnDone();
    }
  }

  void OnBundle(uint64_t version, bool first) {
    if (first) configured_ = true;
    fleet_->OnBundle(index_, version);
  }

  // The attempt ended (it deletes itself after this returns).
  void OnEnded(const grpc::Status& status, std::optional<absl::Duration> hint) {
    fleet_->OnStreamEnd(index_, status, hint.has_value());
    if (hint.has_value()) fleet_->OnHint(*hint);
    absl::MutexLock lock(&mu_);
    attempt_ = nullptr;
    if (stopping_) {
      fleet_->OnDone();
      return;
    }
    if (configured_) failures_ = 0;  // the stream got a bundle: the backoff starts over
    configured_ = false;
    const double backoff_seconds = std::min(60.0, std::pow(2.0, std::min(failures_, 10)));
    if (!hint.has_value()) ++failures_;  // a hint paces the agent; its refusals keep the backoff
    const absl::Duration delay = rxfleet::common::ReconnectDelay(
        absl::Seconds(backoff_seconds) * absl::Uniform(gen_, 0.5, 1.0), hint,
        absl::Uniform(gen_, 0.0, rxfleet::common::kRetryHintJitter));
    scheduler_->At(absl::Now() + delay, [this] { Connect(); });
  }

  // Extra integer channel arguments (--grpc-arg), applied after the agent's own.
  static std::vector<std::pair<std::string, int>>& ExtraArgs() {
    static auto* extra = new std::vector<std::pair<std::string, int>>();
    return *extra;
  }

  static std::shared_ptr<grpc::Channel> MakeChannel(const std::string& server, int index) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("rxfleet.loadgen.channel", index);  // distinct arguments: no sharing
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    for (const auto& [name, value] : ExtraArgs()) args.SetInt(name, value);
    return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
  }

 private:
  Fleet* const fleet_;
  Scheduler* const scheduler_;
  const int index_;
  const std::string server_;
  rxfleet::v1::AgentService::Stub* const shared_;
  // Fresh channel mode: the current attempt's channel (replaced on the scheduler thread).
  std::shared_ptr<grpc::Channel> own_channel_;
  std::unique_ptr<rxfleet::v1::AgentService::Stub> own_stub_;
  std::atomic<bool> configured_{false};
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Attempt* attempt_ ABSL_GUARDED_BY(mu_) = nullptr;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);
};

void Attempt::Start(rxfleet::v1::AgentService::Stub* stub, int index) {
  stub->async()->Connect(&context_, this);
  rxfleet::v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id(absl::StrFormat("load-%05d", index));
  (*hello.mutable_hello()->mutable_labels())["board"] = index % 2 == 0 ? "pi5" : "pi1";
  (*hello.mutable_hello()->mutable_labels())["site"] = "bench";
  hello.mutable_hello()->set_agent_version("loadgen");
  hello.mutable_hello()->set_metrics_address(absl::StrFormat("load-%05d:9477", index));
  Queue(std::move(hello));
  rxfleet::v1::AgentMessage inventory;
  rxfleet::v1::Adapter* adapter = inventory.mutable_inventory()->add_adapters();
  adapter->mutable_metadata()->set_name("port-2-2");
  adapter->mutable_status()->set_chip("rtl8922au");
  adapter->mutable_status()->set_vid(0x0bda);
  adapter->mutable_status()->set_pid(0x8912);
  adapter->mutable_status()->set_usb_speed(index % 3 == 0 ? rxfleet::v1::USB_SPEED_HIGH
                                                          : rxfleet::v1::USB_SPEED_SUPER);
  adapter->mutable_status()->set_state(rxfleet::v1::ADAPTER_STATE_APPLIED);
  Queue(std::move(inventory));
  StartRead(&in_);
  StartCall();
}

void Attempt::Queue(rxfleet::v1::AgentMessage message) {
  const rxfleet::v1::AgentMessage* start = nullptr;
  {
    absl::MutexLock lock(&mu_);
    out_.push_back(std::move(message));  // deque: references to other elements stay valid
    if (!writing_) {
      writing_ = true;
      start = &out_.front();
    }
  }
  if (start != nullptr) StartWrite(start);
}

void Attempt::OnWriteDone(bool ok) {
  const rxfleet::v1::AgentMessage* next = nullptr;
  {
    absl::MutexLock lock(&mu_);
    out_.pop_front();
    if (ok && !out_.empty()) {
      next = &out_.front();
    } else {
      writing_ = false;
    }
  }
  if (next != nullptr) StartWrite(next);
}

void Attempt::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  if (in_.has_bundle()) {
    rxfleet::v1::AgentMessage ack;
    ack.mutable_ack()->set_version(in_.bundle().version());
    ack.mutable_ack()->set_nonce(in_.bundle().nonce());
    const uint64_t version = in_.bundle().version();
    Queue(std::move(ack));
    agent_->OnBundle(version, !std::exchange(acked_, true));
  }
  StartRead(&in_);
}

void Attempt::OnDone(const grpc::Status& status) {
  std::optional<absl::Duration> hint;
  const auto& trailers = context_.GetServerTrailingMetadata();
  auto it = trailers.find(grpc::string_ref(rxfleet::common::kRetryAfterMetadataKey.data(),
                                           rxfleet::common::kRetryAfterMetadataKey.size()));
  if (it != trailers.end()) {
    absl::StatusOr<absl::Duration> parsed =
        rxfleet::common::ParseRetryAfter(std::string_view(it->second.data(), it->second.size()));
    if (parsed.ok()) hint = *parsed;  // a malformed hint is ignored, as the agent does
  }
  agent_->OnEnded(status, hint);
  delete this;
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = "127.0.0.1:7443";
  int agents = 100;
  int channels = 0;
  int changes = 5;
  std::string server_pid;
  double timeout_seconds = 300;
  double settle_seconds = 3;
  int storm_rounds = 0;
  CLI::App app("rxfleet-loadgen: protocol-level agents for rxfleet-server fan-out benchmarks",
               "rxfleet-loadgen");
  app.add_option("--server", server,
                 "rxfleet-server gRPC address, or comma-separated addresses of replicas: agent i "
                 "goes to the (i mod n)-th, ApplyPolicy to the first")
      ->default_val(server);
  app.add_option("--agents", agents, "number of agents (streams)")
      ->default_val(agents)
      ->check(CLI::Range(1, 100000));
  app.add_option("--channels", channels,
                 "channels (TCP connections) the agents are spread over; 0 = one per agent")
      ->default_val(channels)
      ->check(CLI::Range(0, 100000));
  app.add_option("--changes", changes, "policy changes to time")
      ->default_val(changes)
      ->check(CLI::Range(1, 1000));
  app.add_option("--server-pid", server_pid,
                 "PID of the server (comma-separated PIDs of the replicas), to report its "
                 "resident memory (their sum)");
  app.add_option("--timeout", timeout_seconds, "seconds to wait for connects and for each change")
      ->default_val(timeout_seconds);
  app.add_option("--settle", settle_seconds,
                 "seconds to wait after all agents connected before measuring memory")
      ->default_val(settle_seconds);
  app.add_option("--storm-rounds", storm_rounds,
                 "instead of policy changes: wait for this many server restarts and time how long "
                 "until every agent is connected and has ACKed again")
      ->default_val(storm_rounds)
      ->check(CLI::Range(0, 1000));
  std::vector<std::string> grpc_args;
  app.add_option("--grpc-arg", grpc_args,
                 "extra integer gRPC channel argument NAME=VALUE for the agents' channels, after "
                 "the agent's own (repeatable)");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& arg : grpc_args) {
    const std::vector<std::string> parts = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    int value = 0;
    if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &value)) {
      std::fprintf(stderr, "rxfleet-loadgen: --grpc-arg: expected NAME=INTEGER, got %s\n",
                   arg.c_str());
      return 2;
    }
    Agent::ExtraArgs().emplace_back(parts[0], value);
  }
  // As in rxfleet-server: no lock-order graph on every mutex acquisition (one mutex per
  // stream made it the hottest code at 10,000 streams).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (channels == 0 || channels > agents) channels = agents;
  const std::vector<std::string> servers = absl::StrSplit(server, ',', absl::SkipEmpty());
  const int n_servers = static_cast<int>(servers.size());
  if (n_servers == 0 || n_servers > agents || n_servers > channels) {
    std::fprintf(stderr,
                 "rxfleet-loadgen: --server needs 1 to min(--agents, --channels) addresses\n");
    return 2;
  }
  std::vector<int> server_pids;
  for (absl::string_view pid : absl::StrSplit(server_pid, ',', absl::SkipEmpty())) {
    int parsed = 0;
    if (!absl::SimpleAtoi(pid, &parsed) || parsed < 0) {
      std::fprintf(stderr, "rxfleet-loadgen: --server-pid: not a PID: %s\n",
                   std::string(pid).c_str());
      return 2;
    }
    server_pids.push_back(parsed);  // 0 = unknown: no memory figures, as before
  }

  // Streams per process are bounded by file descriptors (one per channel here).
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  const int64_t rss_idle = RssKiB(server_pids);
  // One agent per channel: a fresh channel per attempt, as rxfleet-agent does. Otherwise a
  // pool of C channels whose subchannels reconnect on their own.
  const bool fresh_channels = channels == agents;
  std::vector<std::shared_ptr<grpc::Channel>> pool;
  std::vector<std::unique_ptr<rxfleet::v1::AgentService::Stub>> stubs;
  for (int c = 0; !fresh_channels && c < channels; ++c) {
    pool.push_back(Agent::MakeChannel(servers[c % n_servers], c));
    stubs.push_back(rxfleet::v1::AgentService::NewStub(pool.back()));
  }

  Fleet fleet(agents);
  std::vector<std::unique_ptr<Agent>> load;
  Scheduler scheduler;  // destroyed (joined) before the agents its timers refer to
  const absl::Time connect_start = absl::Now();
  fleet.Target(1);
  // Agent i on server s = i % n is the j = i / n-th agent of that server and uses its channels
  // s, s + n, s + 2n, ... in turn (with one server: channel i % C).
  std::vector<int> server_agents(n_servers, 0);
  for (int i = 0; i < agents; ++i) {
    const int s = i % n_servers;
    const int j = i / n_servers;
    const int server_channels = (channels - s + n_servers - 1) / n_servers;
    ++server_agents[s];
    load.push_back(std::make_unique<Agent>(
        &fleet, &scheduler, i, servers[s],
        fresh_channels ? nullptr : stubs[s + n_servers * (j % server_channels)].get()));
    load.back()->Connect();
  }
  const bool connected = fleet.AwaitAll(connect_start + absl::Seconds(timeout_seconds));
  const absl::Duration connect_time = absl::Now() - connect_start;
  const std::string last_error = fleet.last_error();
  std::fprintf(
      stderr, "%d/%d agents connected and ACKed their first bundle in %s%s\n", fleet.reached(),
      agents, absl::FormatDuration(connect_time).c_str(),
      last_error.empty() ? "" : absl::StrCat(" (last stream error: ", last_error, ")").c_str());
  if (connected && storm_rounds > 0) {
    std::fprintf(stderr, "all %d agents connected; waiting for %d reconnect storm(s)\n", agents,
                 storm_rounds);
  }
  absl::SleepFor(absl::Seconds(settle_seconds));
  const int64_t rss_connected = RssKiB(server_pids);

  auto fleet_channel = grpc::CreateChannel(servers[0], grpc::InsecureChannelCredentials());
  auto fleet_stub = rxfleet::v1::FleetService::NewStub(fleet_channel);
  nlohmann::json runs = nlohmann::json::array();
  bool all_ok = connected;
  nlohmann::json rounds = nlohmann::json::array();
  for (int r = 0; connected && r < storm_rounds; ++r) {
    fleet.BeginRound();
    if (!fleet.AwaitFirstDown(absl::Now() + absl::Seconds(timeout_seconds))) {
      std::fprintf(stderr, "storm round %d: no stream ended within %.0f s\n", r + 1,
                   timeout_seconds);
      all_ok = false;
      break;
    }
    const bool up = fleet.AwaitAllUp(absl::Now() + absl::Seconds(timeout_seconds));
    nlohmann::json round = fleet.RoundSummary(absl::Now());
    std::fprintf(stderr,
                 "storm round %d: %d/%d agents connected and ACKed bundle %llu again, %.1f s "
                 "after the first disconnect, %.1f s after the first reconnect; %d streams "
                 "refused (%d with a retry hint, longest %lld ms)\n",
                 r + 1, round["up"].get<int>(), agents,
                 static_cast<unsigned long long>(round["version"].get<uint64_t>()),
                 round["all_up_since_first_disconnect_seconds"].get<double>(),
                 round["all_up_since_first_reconnect_seconds"].get<double>(),
                 round["refused"].get<int>(), round["refused_with_hint"].get<int>(),
                 static_cast<long long>(round["max_hint_ms"].get<int64_t>()));
    rounds.push_back(round);
    all_ok = all_ok && up;
    if (!up) break;
  }
  const double server_cpu_before = CpuSeconds(server_pids);
  const double own_cpu_before = CpuSeconds(getpid());
  for (int k = 0; connected && storm_rounds == 0 && k < changes; ++k) {
    rxfleet::v1::ApplyPolicyRequest request;
    rxfleet::v1::Policy* policy = request.mutable_policy();
    policy->mutable_metadata()->set_name("loadgen-usb3");
    policy->mutable_spec()->mutable_selector()->add_usb_speeds(rxfleet::v1::USB_SPEED_SUPER);
    policy->mutable_spec()->mutable_settings()->set_hold_us(k % 2 == 0 ? 64 : 96);
    rxfleet::v1::ApplyPolicyResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    const absl::Time start = absl::Now();
    const grpc::Status status = fleet_stub->ApplyPolicy(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "ApplyPolicy failed: %s\n", status.error_message().c_str());
      all_ok = false;
      break;
    }
    const absl::Duration apply_time = absl::Now() - start;
    fleet.Target(response.bundle_version());
    const bool reached = fleet.AwaitAll(start + absl::Seconds(timeout_seconds));
    std::vector<double> latencies = fleet.Latencies(start);
    auto percentile = [&](double p) {
      if (latencies.empty()) return 0.0;
      return latencies[std::min(latencies.size() - 1,
                                static_cast<size_t>(p * static_cast<double>(latencies.size())))];
    };
    const double all_ms = latencies.empty() ? 0 : latencies.back();
    const double first_ms = latencies.empty() ? 0 : latencies.front();
    std::fprintf(stderr,
                 "change %d (bundle %llu): ApplyPolicy %.1f ms; %d/%d agents; first %.1f ms, p50 "
                 "%.1f ms, p99 %.1f ms, all %.1f ms\n",
                 k + 1, static_cast<unsigned long long>(response.bundle_version()),
                 absl::ToDoubleMilliseconds(apply_time), fleet.reached(), agents, first_ms,
                 percentile(0.5), percentile(0.99), all_ms);
    runs.push_back({{"bundle_version", response.bundle_version()},
                    {"apply_ms", absl::ToDoubleMilliseconds(apply_time)},
                    {"reached", fleet.reached()},
                    {"first_ms", first_ms},
                    {"p50_ms", percentile(0.5)},
                    {"p99_ms", percentile(0.99)},
                    {"all_ms", all_ms}});
    if (n_servers > 1) {
      // When the last agent of each server ACKed: the first server pushes after its own
      // commit, the others after the change notification and a reload.
      nlohmann::json server_all = nlohmann::json::array();
      for (int s = 0; s < n_servers; ++s) {
        const std::vector<double> own = fleet.Latencies(start, n_servers, s);
        server_all.push_back(own.empty() ? 0.0 : own.back());
      }
      runs.back()["server_all_ms"] = server_all;
    }
    all_ok = all_ok && reached;
    absl::SleepFor(absl::Seconds(1));  // let the ACK storm's writes settle between changes
  }

  // CPU per change, including the 1 s pauses between changes (keepalive and timers only).
  const double server_cpu = CpuSeconds(server_pids) - server_cpu_before;
  const double own_cpu = CpuSeconds(getpid()) - own_cpu_before;
  const double n_changes = static_cast<double>(std::max<size_t>(1, runs.size()));
  nlohmann::json summary = {
      {"agents", agents},
      {"channels", channels},
      {"connect_seconds", absl::ToDoubleSeconds(connect_time)},
      {"server_rss_idle_kib", rss_idle},
      {"server_rss_connected_kib", rss_connected},
      {"server_kib_per_agent",
       rss_idle > 0 && rss_connected > 0
           ? static_cast<double>(rss_connected - rss_idle) / static_cast<double>(agents)
           : 0.0},
      {"server_cpu_seconds_per_change",
       server_cpu_before >= 0 && !runs.empty() ? server_cpu / n_changes : 0.0},
      {"loadgen_cpu_seconds_per_change", !runs.empty() ? own_cpu / n_changes : 0.0},
      {"changes", runs},
      {"storm_rounds", rounds}};
  if (n_servers > 1) summary["server_agents"] = server_agents;
  std::cout << summary.dump() << std::endl;
  if (rss_idle > 0) {
    std::fprintf(stderr, "server RSS %lld KiB idle -> %lld KiB with %d agents: %.1f KiB/agent\n",
                 static_cast<long long>(rss_idle), static_cast<long long>(rss_connected), agents,
                 summary["server_kib_per_agent"].get<double>());
  }
  if (!runs.empty()) {
    std::fprintf(stderr, "CPU per change: server %.3f s, load generator %.3f s\n",
                 summary["server_cpu_seconds_per_change"].get<double>(),
                 summary["loadgen_cpu_seconds_per_change"].get<double>());
  }
  for (std::unique_ptr<Agent>& agent : load) agent->Stop();
  fleet.AwaitDone(absl::Now() + absl::Seconds(30));
  // Exit without destroying the agents or running gRPC's teardown: a reactor counts itself
  // done inside Attempt::OnDone, which still unlocks its agent's mutex and deletes itself after
  // that, on gRPC's threads, so a normal return raced them (SIGSEGV at exit, seen in the
  // storm test after every measurement was printed). Everything is written already.
  std::fflush(nullptr);
  std::_Exit(all_ok ? 0 : 1);
}
