// Server replicas on one PostgreSQL database, as real processes with agents under
// rxfleet-emulate spread over them: a policy applied through one replica changes the registers
// of the agents on the other and every agent ACKs the same bundle version; each replica lists
// every host and every event, and a watch on one sees the other's; kill -9 of a replica moves
// its agents to another, where they converge, with no acknowledged write lost.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/integration/server/fleet_processes.h"
#include "tests/support/postgres.h"

namespace rxfleet {
namespace {

using namespace integration;  // NOLINT(google-build-using-namespace): the test's processes

// The replica holding `host` as `server` lists it (status.replica is HOSTNAME:PORT).
bool HeldBy(ServerProcess& viewer, const std::string& host, const ServerProcess& holder) {
  std::optional<v1::Host> listed = viewer.Host(host);
  return listed.has_value() && listed->status().connected() &&
         absl::EndsWith(listed->status().replica(), absl::StrCat(":", holder.port()));
}

// The audit events of `action` that `server` lists.
int AuditEvents(ServerProcess& server, const std::string& action) {
  v1::ListEventsRequest request;
  request.set_audit(true);
  request.set_page_size(1000);
  v1::ListEventsResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!server.fleet().ListEvents(&context, request, &response).ok()) return -1;
  int n = 0;
  for (const v1::Event& e : response.events()) n += e.audit().action() == action ? 1 : 0;
  return n;
}

TEST(ReplicasTest, APolicyThroughOneReplicaReachesTheAgentsOfAllAndAKilledReplicasAgentsMove) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  TempDir dir("rxfleet-replicas-test");
  rxfleet::testing::TestDatabase db;
  ServerProcess a(db.uri());
  ServerProcess b(db.uri());
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start()) << b.log();

  // pi5-a streams to A, pi5-b to B; pi5-c has both and starts at either.
  AgentProcess on_a(dir, "pi5-a", "rtl8922au-superspeed", "pi5");
  AgentProcess on_b(dir, "pi5-b", "rtl8922au-superspeed", "pi5");
  AgentProcess either(dir, "pi5-c", "rtl8922au-superspeed", "pi5");
  ASSERT_TRUE(on_a.Start(a.address()));
  ASSERT_TRUE(on_b.Start(b.address()));
  ASSERT_TRUE(either.Start(absl::StrCat(a.address(), ",", b.address())));
  const auto all_acked = [&](ServerProcess& viewer, uint64_t version,
                             const std::vector<std::string>& hosts) {
    for (const std::string& host : hosts) {
      if (!viewer.Acked(host, version)) return false;
    }
    return true;
  };
  const std::vector<std::string> hosts = {"pi5-a", "pi5-b", "pi5-c"};
  // Each replica lists every host, with the replica that holds it.
  ASSERT_TRUE(WaitFor(
      [&] {
        return all_acked(a, 1, hosts) && all_acked(b, 1, hosts) && HeldBy(b, "pi5-a", a) &&
               HeldBy(a, "pi5-b", b);
      },
      absl::Seconds(60)))
      << a.log() << b.log() << on_a.log() << on_b.log() << either.log();

  // A watch on B sees the events recorded through A.
  grpc::ClientContext watch_context;
  v1::WatchEventsRequest watch_request;
  watch_request.mutable_filter()->set_audit(true);
  std::unique_ptr<grpc::ClientReader<v1::Event>> watch =
      b.fleet().WatchEvents(&watch_context, watch_request);
  absl::Mutex watched_mu;
  std::vector<v1::Event> watched;
  std::thread watcher([&] {
    v1::Event event;
    while (watch->Read(&event)) {
      absl::MutexLock lock(&watched_mu);
      watched.push_back(event);
    }
  });

  // A policy applied through A reaches the agents on B: one bundle version, ACKed by all, the
  // new hold in every register, and B shows A's audit event.
  absl::StatusOr<v1::ApplyPolicyResponse> applied =
      a.Apply(HoldPolicy("pi5-usb3", 64, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!all_acked(a, 2, hosts) || !all_acked(b, 2, hosts)) return false;
        for (const std::string& host : hosts) {
          if (ObservedHold(b, host, "port-2-2") != 64u) return false;
        }
        return AuditEvents(b, "ApplyPolicy") == 1;
      },
      absl::Seconds(60)))
      << a.log() << b.log();
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::MutexLock lock(&watched_mu);
        return !watched.empty();
      },
      absl::Seconds(30)))
      << b.log();
  watch_context.TryCancel();
  watcher.join();
  ASSERT_EQ(watched.size(), 1u);
  EXPECT_EQ(watched[0].audit().action(), "ApplyPolicy");
  EXPECT_EQ(AuditEvents(a, "ApplyPolicy"), 1) << "one event, listed alike on both replicas";

  // kill -9 of the replica holding pi5-c: pi5-c moves to the other one and converges on the
  // next change made there; nothing acknowledged is lost.
  ServerProcess& holder = HeldBy(a, "pi5-c", a) ? a : b;
  ServerProcess& survivor = &holder == &a ? b : a;
  holder.Kill();
  ASSERT_TRUE(WaitFor([&] { return HeldBy(survivor, "pi5-c", survivor); }, absl::Seconds(60)))
      << survivor.log() << either.log();
  applied = survivor.Apply(HoldPolicy("pi5-usb3", 96, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  const std::string stays = &survivor == &a ? "pi5-a" : "pi5-b";
  ASSERT_TRUE(WaitFor(
      [&] {
        return all_acked(survivor, 3, {stays, "pi5-c"}) &&
               ObservedHold(survivor, "pi5-c", "port-2-2") == 96u;
      },
      absl::Seconds(60)))
      << survivor.log() << either.log();
  EXPECT_EQ(survivor.Host("pi5-c")->status().last_acked_version(), 3u);

  EXPECT_EQ(RegisterHold(either.Stop()), 96);
  EXPECT_EQ(RegisterHold((&survivor == &a ? on_a : on_b).Stop()), 96);
  (&survivor == &a ? on_b : on_a).Stop();
  EXPECT_EQ(survivor.Stop(), 0);
}

}  // namespace
}  // namespace rxfleet
