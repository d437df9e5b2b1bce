// Integration tests of the RTT prober with real ICMP sockets. Traffic goes only to 127.0.0.1:
// in the test host's loopback, or in network namespaces the test creates for itself with
// unshare(CLONE_NEWNET) on a dedicated thread (each namespace vanishes with its thread).
// Inside such a namespace the test may flip per-namespace sysctls (icmp_echo_ignore_all to make
// a target that never answers, ping_group_range to allow ICMP datagram sockets) and drop
// CAP_NET_RAW from that thread, to drive every socket path deterministically.
#include "agent/collectors/icmp_prober.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/collectors/metric_values.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::agent::testing::SeriesValue;
using ::testing::HasSubstr;

// Which ICMP sockets this process may open right now (on the calling thread).
struct SocketPermission {
  bool datagram = false;
  bool raw = false;
  bool any() const { return datagram || raw; }
};

SocketPermission ProbeSocketPermission() {
  SocketPermission p;
  for (int type : {SOCK_DGRAM, SOCK_RAW}) {
    const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, IPPROTO_ICMP);
    if (fd >= 0) {
      (type == SOCK_DGRAM ? p.datagram : p.raw) = true;
      ::close(fd);
    }
  }
  return p;
}

class Logs {
 public:
  LogFn Fn() {
    return [this](std::string_view line) {
      absl::MutexLock lock(&mu_);
      lines_.emplace_back(line);
    };
  }
  std::vector<std::string> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  size_t CountContaining(std::string_view text) {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const std::string& l : lines_) n += l.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_;
};

double Series(const prometheus::Registry& registry, const std::string& name,
              const std::string& adapter) {
  return SeriesValue(registry, name, {{"adapter", adapter}}).value_or(-1);
}

std::unique_ptr<IcmpProber> MakeProber(prometheus::Registry& registry, Logs& logs,
                                       absl::Duration timeout) {
  IcmpProberOptions options;
  options.interval = std::max(timeout, absl::Milliseconds(100));
  options.timeout = timeout;
  options.log = logs.Fn();
  absl::StatusOr<std::unique_ptr<IcmpProber>> prober = IcmpProber::Create(registry, options);
  EXPECT_TRUE(prober.ok()) << prober.status();
  return prober.ok() ? *std::move(prober) : nullptr;
}

TEST(IcmpProberLoopbackTest, ProbesLoopbackAndRecordsRtt) {
  prometheus::Registry registry;
  Logs logs;
  std::unique_ptr<IcmpProber> prober = MakeProber(registry, logs, absl::Seconds(1));
  ASSERT_NE(prober, nullptr);
  prober->UpsertAdapter({"loop", "lo", "127.0.0.1"});
  for (int i = 0; i < 5; ++i) prober->ProbeOnce();

  const SocketPermission permission = ProbeSocketPermission();
  if (!permission.any()) {
    // Neither socket kind is allowed on this host: the prober must say so as a state.
    std::cout << "ICMP datagram and raw sockets are not permitted here; checking the "
                 "not_permitted state instead of RTT samples\n";
    EXPECT_EQ(prober->State("loop"), ProbeState::kNotPermitted);
    EXPECT_EQ(logs.CountContaining("not_permitted"), 1u);
    return;
  }
  EXPECT_EQ(prober->State("loop"), ProbeState::kOk) << ::testing::PrintToString(logs.lines());
  EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_sent_total", "loop"), 5);
  EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_lost_total", "loop"), 0);
  EXPECT_EQ(Series(registry, "rxfleet_adapter_rtt_seconds", "loop"), 5);  // sample count
  EXPECT_EQ(SeriesValue(registry, "rxfleet_adapter_probe_target_info",
                        {{"adapter", "loop"}, {"target", "127.0.0.1"}}),
            1);
  const std::map<std::string, ProbeWindowStats> window = prober->TakeWindowStats();
  ASSERT_EQ(window.at("loop").rtt_seconds.size(), 5u);
  for (double rtt : window.at("loop").rtt_seconds) {
    EXPECT_GT(rtt, 0);
    EXPECT_LT(rtt, 0.1);
  }
  EXPECT_TRUE(prober->TakeWindowStats().at("loop").rtt_seconds.empty());
  // The experiment windows keep their own copy of the same samples.
  const ProbeWindowStats experiment =
      prober->TakeWindowStats(ProbeConsumer::kExperimentWindow).at("loop");
  EXPECT_EQ(experiment.rtt_seconds, window.at("loop").rtt_seconds);
  EXPECT_EQ(experiment.sent, 5u);
  EXPECT_TRUE(
      prober->TakeWindowStats(ProbeConsumer::kExperimentWindow).at("loop").rtt_seconds.empty());
}

TEST(IcmpProberLoopbackTest, VanishedNetdevIsAState) {
  if (!ProbeSocketPermission().any()) GTEST_SKIP() << "ICMP sockets not permitted here";
  prometheus::Registry registry;
  Logs logs;
  std::unique_ptr<IcmpProber> prober = MakeProber(registry, logs, absl::Milliseconds(100));
  ASSERT_NE(prober, nullptr);
  // SO_BINDTODEVICE fails with ENODEV before anything is sent.
  prober->UpsertAdapter({"gone", "rxfnosuchdev0", "127.0.0.1"});
  prober->ProbeOnce();
  prober->ProbeOnce();
  EXPECT_EQ(prober->State("gone"), ProbeState::kNoNetdev);
  EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_sent_total", "gone"), 0);
  EXPECT_EQ(logs.CountContaining("no_netdev"), 1u);
}

// --- network namespace helpers ---

// Reads a sysctl file as seen by the calling thread's network namespace.
std::string ReadSysctl(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[128] = {};
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool WriteSysctl(const char* path, const std::string& value) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  ::close(fd);
  return ok;
}

ino_t NetnsInode(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? st.st_ino : 0;
}

bool BringLoopbackUp() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  ok = ok && ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  ::close(fd);
  return ok;
}

// Drops CAP_NET_RAW from the calling thread's effective set (capabilities are per thread).
bool DropNetRawOnThisThread() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_NET_RAW / 32].effective &= ~(1u << (CAP_NET_RAW % 32));
  return ::syscall(SYS_capset, &header, data) == 0;
}

// Runs `body` on a new thread inside a fresh network namespace with its loopback up.
// Returns a reason string if the namespace cannot be created here (the test then skips).
std::string RunInOwnNetns(const std::function<void()>& body) {
  const ino_t host_ns = NetnsInode("/proc/self/ns/net");
  std::string skip_reason;
  std::thread thread([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      skip_reason = std::string("cannot create a network namespace (unshare(CLONE_NEWNET): ") +
                    std::strerror(errno) + "); needs CAP_SYS_ADMIN";
      return;
    }
    const ino_t own_ns = NetnsInode("/proc/thread-self/ns/net");
    if (own_ns == 0 || own_ns == host_ns) {
      skip_reason = "network namespace of the test thread could not be verified";
      return;
    }
    if (!BringLoopbackUp()) {
      skip_reason =
          std::string("cannot bring lo up in the test namespace: ") + std::strerror(errno);
      return;
    }
    body();
  });
  thread.join();
  return skip_reason;
}

constexpr char kEchoIgnoreAll[] = "/proc/sys/net/ipv4/icmp_echo_ignore_all";
constexpr char kPingGroupRange[] = "/proc/sys/net/ipv4/ping_group_range";

class IcmpProberNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_echo_ignore_ = ReadSysctl(kEchoIgnoreAll);
    host_ping_range_ = ReadSysctl(kPingGroupRange);
  }
  void TearDown() override {
    // The namespace's sysctls must never leak into the host's.
    EXPECT_EQ(ReadSysctl(kEchoIgnoreAll), host_echo_ignore_);
    EXPECT_EQ(ReadSysctl(kPingGroupRange), host_ping_range_);
  }
  std::string host_echo_ignore_;
  std::string host_ping_range_;
};

TEST_F(IcmpProberNetnsTest, TargetThatNeverAnswersCountsLossAndTurnsUnreachable) {
  prometheus::Registry registry;
  Logs logs;
  bool ran = false;
  const std::string skip = RunInOwnNetns([&] {
    if (!ProbeSocketPermission().any()) {
      std::cout << "ICMP sockets not permitted in the test namespace; loss not testable\n";
      return;
    }
    ASSERT_TRUE(WriteSysctl(kEchoIgnoreAll, "1"));  // this namespace only
    ran = true;
    std::unique_ptr<IcmpProber> prober = MakeProber(registry, logs, absl::Milliseconds(100));
    ASSERT_NE(prober, nullptr);
    prober->UpsertAdapter({"silent", "lo", "127.0.0.1"});
    prober->ProbeOnce();
    prober->ProbeOnce();
    EXPECT_EQ(prober->State("silent"), ProbeState::kPending);  // 2 < unreachable_after (3)
    prober->ProbeOnce();
    EXPECT_EQ(prober->State("silent"), ProbeState::kUnreachable);
    prober->ProbeOnce();
    EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_sent_total", "silent"), 4);
    EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_lost_total", "silent"), 4);
    EXPECT_EQ(Series(registry, "rxfleet_adapter_rtt_seconds", "silent"), 0);
    EXPECT_EQ(logs.CountContaining("-> unreachable"), 1u);  // one line per change
    EXPECT_EQ(SeriesValue(registry, "rxfleet_adapter_probe_state",
                          {{"adapter", "silent"}, {"state", "unreachable"}}),
              1);
    const ProbeWindowStats window = prober->TakeWindowStats().at("silent");
    EXPECT_EQ(window.sent, 4u);
    EXPECT_EQ(window.lost, 4u);
    EXPECT_TRUE(window.rtt_seconds.empty());

    // The target answers again: back to ok, one more log line.
    ASSERT_TRUE(WriteSysctl(kEchoIgnoreAll, "0"));
    prober->ProbeOnce();
    EXPECT_EQ(prober->State("silent"), ProbeState::kOk);
    EXPECT_EQ(logs.CountContaining("unreachable -> ok"), 1u);
  });
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (!ran) GTEST_SKIP() << "ICMP sockets not permitted in the test namespace";
}

TEST_F(IcmpProberNetnsTest, StopInterruptsARoundWaitingForReplies) {
  prometheus::Registry registry;
  Logs logs;
  bool ran = false;
  const std::string skip = RunInOwnNetns([&] {
    if (!ProbeSocketPermission().any()) return;
    ASSERT_TRUE(WriteSysctl(kEchoIgnoreAll, "1"));
    ran = true;
    IcmpProberOptions options;
    options.interval = absl::Seconds(30);
    options.timeout = absl::Seconds(30);  // a round would wait 30 s for the lost reply
    options.log = logs.Fn();
    std::unique_ptr<IcmpProber> prober = *IcmpProber::Create(registry, options);
    prober->UpsertAdapter({"silent", "lo", "127.0.0.1"});
    prober->Start();  // the probe thread inherits this thread's namespace
    // The first round starts at once and then waits up to 30 s for a reply that never comes.
    EXPECT_FALSE(prober->WaitForRounds(1, absl::Milliseconds(300)));
    const auto stop_start = std::chrono::steady_clock::now();
    prober->Stop();
    EXPECT_LT(std::chrono::steady_clock::now() - stop_start, std::chrono::seconds(2));
    // The interrupted probe was sent but is neither answered nor lost.
    EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_sent_total", "silent"), 1);
    EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_lost_total", "silent"), 0);
    EXPECT_EQ(prober->rounds(), 1u);
  });
  (void)ran;
  if (!skip.empty()) GTEST_SKIP() << skip;
}

TEST_F(IcmpProberNetnsTest, DatagramSocketWhenPingGroupRangeAllowsAndNoRawCapability) {
  prometheus::Registry registry;
  Logs logs;
  const std::string skip = RunInOwnNetns([&] {
    ASSERT_TRUE(WriteSysctl(kPingGroupRange, "0 2147483647"));  // this namespace only
    ASSERT_TRUE(DropNetRawOnThisThread());
    const SocketPermission permission = ProbeSocketPermission();
    ASSERT_FALSE(permission.raw);
    ASSERT_TRUE(permission.datagram);
    std::unique_ptr<IcmpProber> prober = MakeProber(registry, logs, absl::Seconds(1));
    ASSERT_NE(prober, nullptr);
    prober->UpsertAdapter({"dgram", "lo", "127.0.0.1"});
    prober->ProbeOnce();
    prober->ProbeOnce();
    EXPECT_EQ(prober->State("dgram"), ProbeState::kOk) << ::testing::PrintToString(logs.lines());
    EXPECT_EQ(Series(registry, "rxfleet_adapter_rtt_seconds", "dgram"), 2);
    EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_lost_total", "dgram"), 0);
  });
  if (!skip.empty()) GTEST_SKIP() << skip;
}

TEST_F(IcmpProberNetnsTest, NotPermittedWithoutRawCapabilityOrPingGroup) {
  prometheus::Registry registry;
  Logs logs;
  const std::string skip = RunInOwnNetns([&] {
    ASSERT_TRUE(WriteSysctl(kPingGroupRange, "1 0"));  // nobody: the kernel default
    ASSERT_TRUE(DropNetRawOnThisThread());
    ASSERT_FALSE(ProbeSocketPermission().any());
    std::unique_ptr<IcmpProber> prober = MakeProber(registry, logs, absl::Milliseconds(100));
    ASSERT_NE(prober, nullptr);
    prober->UpsertAdapter({"denied", "lo", "127.0.0.1"});
    prober->ProbeOnce();
    prober->ProbeOnce();
    EXPECT_EQ(prober->State("denied"), ProbeState::kNotPermitted);
    EXPECT_EQ(logs.CountContaining("-> not_permitted"), 1u);
    EXPECT_EQ(logs.CountContaining("ping_group_range"), 1u);
    EXPECT_EQ(Series(registry, "rxfleet_adapter_probes_sent_total", "denied"), 0);
  });
  if (!skip.empty()) GTEST_SKIP() << skip;
}

}  // namespace
}  // namespace rxfleet::agent
