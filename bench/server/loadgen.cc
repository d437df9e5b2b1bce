// rxfleet-loadgen: N protocol-level agents (gRPC callback API, no USB) on one rxfleet-server.
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
//   rxfleet-loadgen --server 127.0.0.1:7443 --agents 1000 --channels 1000 --changes 5
//       --server-pid $(pidof rxfleet-server)
//
// Output: a human summary on stderr and one JSON object on stdout. Exit 0 if every change
// reached every agent within --timeout, 1 otherwise, 2 for bad flags.

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

class Fleet;

// One protocol-level agent: Hello, inventory, then an ACK for every bundle.
class LoadAgent final
    : public grpc::ClientBidiReactor<rxfleet::v1::AgentMessage, rxfleet::v1::ServerMessage> {
 public:
  LoadAgent(Fleet* fleet, int index) : fleet_(fleet), index_(index) {}

  void Start(rxfleet::v1::AgentService::Stub* stub);
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void Queue(rxfleet::v1::AgentMessage message);

  Fleet* const fleet_;
  const int index_;
  grpc::ClientContext context_;
  rxfleet::v1::ServerMessage in_;
  absl::Mutex mu_;
  std::deque<rxfleet::v1::AgentMessage> out_ ABSL_GUARDED_BY(mu_);  // front = in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
};

// Bookkeeping over all agents: which bundle version each has answered, and when.
class Fleet {
 public:
  explicit Fleet(int agents) : agents_(agents), versions_(agents, 0), times_(agents) {}

  // Changes are applied one at a time, so the latest version an agent got is the current
  // target's, even when it arrived before Target() was called (the push may overtake the
  // ApplyPolicy response).
  void OnBundle(int index, uint64_t version) {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    if (version <= versions_[index]) return;
    if (versions_[index] < target_ && version >= target_) ++reached_;
    versions_[index] = version;
    times_[index] = now;
  }

  void OnDone(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    ++done_;
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      ++failed_;
      last_error_ = status.error_message();
    }
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

  // Waits until every agent reached the target (true) or the deadline passed / streams failed.
  bool AwaitAll(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return reached_ == agents_ || failed_ > 0;
    };
    mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
    return reached_ == agents_;
  }

  // Times at which agents got their latest bundle (the target's), relative to `start`, sorted.
  std::vector<double> Latencies(absl::Time start) {
    absl::MutexLock lock(&mu_);
    std::vector<double> out;
    for (int i = 0; i < agents_; ++i) {
      if (versions_[i] >= target_) out.push_back(absl::ToDoubleMilliseconds(times_[i] - start));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  int reached() {
    absl::MutexLock lock(&mu_);
    return reached_;
  }
  int failed() {
    absl::MutexLock lock(&mu_);
    return failed_;
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
  const int agents_;
  absl::Mutex mu_;
  std::vector<uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> times_ ABSL_GUARDED_BY(mu_);
  uint64_t target_ ABSL_GUARDED_BY(mu_) = 1;
  int reached_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

void LoadAgent::Start(rxfleet::v1::AgentService::Stub* stub) {
  stub->async()->Connect(&context_, this);
  rxfleet::v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id(absl::StrFormat("load-%05d", index_));
  (*hello.mutable_hello()->mutable_labels())["board"] = index_ % 2 == 0 ? "pi5" : "pi1";
  (*hello.mutable_hello()->mutable_labels())["site"] = "bench";
  hello.mutable_hello()->set_agent_version("loadgen");
  hello.mutable_hello()->set_metrics_address(absl::StrFormat("load-%05d:9477", index_));
  Queue(std::move(hello));
  rxfleet::v1::AgentMessage inventory;
  rxfleet::v1::Adapter* adapter = inventory.mutable_inventory()->add_adapters();
  adapter->mutable_metadata()->set_name("port-2-2");
  adapter->mutable_status()->set_chip("rtl8922au");
  adapter->mutable_status()->set_vid(0x0bda);
  adapter->mutable_status()->set_pid(0x8912);
  adapter->mutable_status()->set_usb_speed(index_ % 3 == 0 ? rxfleet::v1::USB_SPEED_HIGH
                                                           : rxfleet::v1::USB_SPEED_SUPER);
  adapter->mutable_status()->set_state(rxfleet::v1::ADAPTER_STATE_APPLIED);
  Queue(std::move(inventory));
  StartRead(&in_);
  StartCall();
}

void LoadAgent::Queue(rxfleet::v1::AgentMessage message) {
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

void LoadAgent::OnWriteDone(bool ok) {
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

void LoadAgent::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  if (in_.has_bundle()) {
    rxfleet::v1::AgentMessage ack;
    ack.mutable_ack()->set_version(in_.bundle().version());
    ack.mutable_ack()->set_nonce(in_.bundle().nonce());
    const uint64_t version = in_.bundle().version();
    Queue(std::move(ack));
    fleet_->OnBundle(index_, version);
  }
  StartRead(&in_);
}

void LoadAgent::OnDone(const grpc::Status& status) { fleet_->OnDone(status); }

}  // namespace

int main(int argc, char** argv) {
  std::string server = "127.0.0.1:7443";
  int agents = 100;
  int channels = 0;
  int changes = 5;
  int server_pid = 0;
  double timeout_seconds = 300;
  double settle_seconds = 3;
  CLI::App app("rxfleet-loadgen: protocol-level agents for rxfleet-server fan-out benchmarks",
               "rxfleet-loadgen");
  app.add_option("--server", server, "rxfleet-server gRPC address")->default_val(server);
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
  app.add_option("--server-pid", server_pid, "PID of the server, to report its resident memory");
  app.add_option("--timeout", timeout_seconds, "seconds to wait for connects and for each change")
      ->default_val(timeout_seconds);
  app.add_option("--settle", settle_seconds,
                 "seconds to wait after all agents connected before measuring memory")
      ->default_val(settle_seconds);
  CLI11_PARSE(app, argc, argv);
  // As in rxfleet-server: no lock-order graph on every mutex acquisition (one mutex per
  // stream made it the hottest code at 10,000 streams).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (channels == 0 || channels > agents) channels = agents;

  // Streams per process are bounded by file descriptors (one per channel here).
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  const int64_t rss_idle = RssKiB(server_pid);
  std::vector<std::shared_ptr<grpc::Channel>> pool;
  std::vector<std::unique_ptr<rxfleet::v1::AgentService::Stub>> stubs;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("rxfleet.loadgen.channel", c);  // distinct arguments: no sharing
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    pool.push_back(grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
    stubs.push_back(rxfleet::v1::AgentService::NewStub(pool.back()));
  }

  Fleet fleet(agents);
  std::vector<std::unique_ptr<LoadAgent>> load;
  const absl::Time connect_start = absl::Now();
  fleet.Target(1);
  for (int i = 0; i < agents; ++i) {
    load.push_back(std::make_unique<LoadAgent>(&fleet, i));
    load.back()->Start(stubs[i % channels].get());
  }
  const bool connected = fleet.AwaitAll(connect_start + absl::Seconds(timeout_seconds));
  const absl::Duration connect_time = absl::Now() - connect_start;
  std::fprintf(
      stderr, "%d/%d agents connected and ACKed their first bundle in %s%s\n", fleet.reached(),
      agents, absl::FormatDuration(connect_time).c_str(),
      fleet.failed() > 0
          ? absl::StrCat(" (", fleet.failed(), " streams failed: ", fleet.last_error(), ")").c_str()
          : "");
  absl::SleepFor(absl::Seconds(settle_seconds));
  const int64_t rss_connected = RssKiB(server_pid);

  auto fleet_channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  auto fleet_stub = rxfleet::v1::FleetService::NewStub(fleet_channel);
  nlohmann::json runs = nlohmann::json::array();
  bool all_ok = connected;
  for (int k = 0; connected && k < changes; ++k) {
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
    std::fprintf(stderr,
                 "change %d (bundle %llu): ApplyPolicy %.1f ms; %d/%d agents; p50 %.1f ms, p99 "
                 "%.1f ms, all %.1f ms\n",
                 k + 1, static_cast<unsigned long long>(response.bundle_version()),
                 absl::ToDoubleMilliseconds(apply_time), fleet.reached(), agents, percentile(0.5),
                 percentile(0.99), all_ms);
    runs.push_back({{"bundle_version", response.bundle_version()},
                    {"apply_ms", absl::ToDoubleMilliseconds(apply_time)},
                    {"reached", fleet.reached()},
                    {"p50_ms", percentile(0.5)},
                    {"p99_ms", percentile(0.99)},
                    {"all_ms", all_ms}});
    all_ok = all_ok && reached;
    absl::SleepFor(absl::Seconds(1));  // let the ACK storm's writes settle between changes
  }

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
      {"changes", runs}};
  std::cout << summary.dump() << std::endl;
  if (rss_idle > 0) {
    std::fprintf(stderr, "server RSS %lld KiB idle -> %lld KiB with %d agents: %.1f KiB/agent\n",
                 static_cast<long long>(rss_idle), static_cast<long long>(rss_connected), agents,
                 summary["server_kib_per_agent"].get<double>());
  }
  for (std::unique_ptr<LoadAgent>& agent : load) agent->Cancel();
  fleet.AwaitDone(absl::Now() + absl::Seconds(30));
  return all_ok ? 0 : 1;
}
