// rxfleet-server and rxfleet-agent as real processes on loopback, the agents under
// rxfleet-emulate: policies reach exactly the matching adapters' registers, invalid bundles are
// NACKed while the old settings stay, agents ride out server outages (and their own restarts)
// on the persisted bundle and converge when the server is back; kill -9 during a burst of
// policy writes loses no acknowledged write; the bundle version never goes backwards.

#include <SQLiteCpp/SQLiteCpp.h>
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/proto/time.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "server/store/store.h"
#include "tests/integration/server/fleet_processes.h"
#include "tests/support/paths.h"
#include "tests/support/postgres.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using namespace integration;  // NOLINT(google-build-using-namespace): the test's processes

class FleetTest : public ::testing::Test {
 protected:
  void PolicyChangesExactlyTheMatchingAdapters(ServerProcess& server);
  void KillDuringAPolicyBurst(ServerProcess& server);

  TempDir dir_{"rxfleet-fleet-test"};
};

TEST_F(FleetTest, APolicyChangesExactlyTheMatchingAdaptersAndEveryAgentAcks) {
  ServerProcess server(dir_);
  PolicyChangesExactlyTheMatchingAdapters(server);
}

// The same on a server whose database is PostgreSQL (the ctest fixture's server).
TEST_F(FleetTest, OnPostgresAPolicyChangesExactlyTheMatchingAdapters) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  rxfleet::testing::TestDatabase db;
  ServerProcess server(db.uri());
  PolicyChangesExactlyTheMatchingAdapters(server);
}

void FleetTest::PolicyChangesExactlyTheMatchingAdapters(ServerProcess& server) {
  ASSERT_TRUE(server.Start());
  // Ids: the SuperSpeed and high-speed RTL8922AU labs share the peer pair 2-2/3-3.
  AgentProcess usb3(dir_, "pi5-a", "rtl8922au-superspeed", "pi5");
  AgentProcess usb2(dir_, "pi5-b", "rtl8922au-highspeed", "pi5");
  AgentProcess other(dir_, "pi1-a", "rtl8852bu-superspeed", "pi1");
  for (AgentProcess* agent : {&usb3, &usb2, &other}) ASSERT_TRUE(agent->Start(server.address()));
  ASSERT_TRUE(WaitFor(
      [&] {
        return server.Acked("pi5-a", 1) && server.Acked("pi5-b", 1) && server.Acked("pi1-a", 1) &&
               ObservedHold(server, "pi5-a", "port-2-2") == 32u &&
               ObservedHold(server, "pi5-b", "port-2-2") == 1024u &&
               ObservedHold(server, "pi1-a", "port-2-1") == 32u;
      },
      absl::Seconds(60)))
      << server.log() << usb3.log();

  // Only SuperSpeed adapters of pi5 hosts: pi5-a's.
  absl::StatusOr<v1::ApplyPolicyResponse> applied =
      server.Apply(HoldPolicy("pi5-usb3", 64, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->bundle_version(), 2u);
  ASSERT_EQ(applied->affected_adapters_size(), 1);
  EXPECT_EQ(applied->affected_adapters(0).adapter().host_id(), "pi5-a");

  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::ExplainAdapterResponse> e = server.Explain("pi5-a", "port-2-2");
        return server.Acked("pi5-a", 2) && server.Acked("pi5-b", 2) && server.Acked("pi1-a", 2) &&
               e.has_value() && e->in_sync() && ObservedHold(server, "pi5-a", "port-2-2") == 64u;
      },
      absl::Seconds(60)))
      << server.log() << usb3.log();
  std::optional<v1::ExplainAdapterResponse> explained = server.Explain("pi5-a", "port-2-2");
  EXPECT_EQ(explained->expected().settings().hold_us(), 64u);
  EXPECT_EQ(explained->expected().provenance().at("hold_us").name(), "pi5-usb3");
  EXPECT_EQ(explained->adapter().status().desired().provenance().at("hold_us").source(),
            v1::SETTING_SOURCE_SERVER_POLICY);
  EXPECT_EQ(ObservedHold(server, "pi5-b", "port-2-2"), 1024u);
  EXPECT_EQ(ObservedHold(server, "pi1-a", "port-2-1"), 32u);

  // The emulated registers: only pi5-a's changed.
  EXPECT_EQ(RegisterHold(usb3.Stop()), 64);
  const nlohmann::json usb2_state = usb2.Stop();
  EXPECT_EQ(RegisterHold(usb2_state), 1024);
  EXPECT_THAT(WrittenHolds(usb2_state), ::testing::Each(1024));
  const nlohmann::json other_state = other.Stop();
  EXPECT_EQ(RegisterHold(other_state), 32);
  EXPECT_THAT(WrittenHolds(other_state), ::testing::Each(32));
  EXPECT_EQ(server.Stop(), 0);
}

// A policy committed to the database by another process (as a replica does) reaches this
// server's agents: the server is woken by the commit's NOTIFY, reloads the configuration and
// pushes the database's bundle version.
TEST_F(FleetTest, OnPostgresAPolicyCommittedByAnotherProcessReachesTheAgents) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  rxfleet::testing::TestDatabase db;
  ServerProcess server(db.uri());
  ASSERT_TRUE(server.Start());
  AgentProcess agent(dir_, "pi5-a", "rtl8922au-superspeed", "pi5");
  ASSERT_TRUE(agent.Start(server.address()));
  ASSERT_TRUE(WaitFor([&] { return server.Acked("pi5-a", 1); }, absl::Seconds(60)))
      << server.log() << agent.log();

  absl::StatusOr<std::unique_ptr<server::Store>> other = server::Store::Open({db.uri()});
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<server::PolicyWriteResult> written = (*other)->ApplyPolicy(
      HoldPolicy("pi5-usb3", 64, {{"board", "pi5"}}, {v1::USB_SPEED_SUPER}), absl::Now());
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->bundle_version, 2u);
  ASSERT_TRUE(WaitFor(
      [&] { return server.Acked("pi5-a", 2) && ObservedHold(server, "pi5-a", "port-2-2") == 64u; },
      absl::Seconds(60)))
      << server.log() << agent.log();
  std::optional<v1::ExplainAdapterResponse> explained = server.Explain("pi5-a", "port-2-2");
  ASSERT_TRUE(explained.has_value());
  EXPECT_EQ(explained->expected().provenance().at("hold_us").name(), "pi5-usb3");
  // The host shows the server holding its session: HOSTNAME:PORT by default.
  EXPECT_THAT(server.Host("pi5-a")->status().replica(),
              ::testing::EndsWith(absl::StrCat(":", server.port())));

  // The database ends every session of the server (a failover, an administrator): a policy
  // deleted meanwhile is found by the listener's resync or the next poll.
  ASSERT_TRUE(
      rxfleet::testing::RunSql("postgres", absl::StrCat("SELECT pg_terminate_backend(pid) FROM "
                                                        "pg_stat_activity WHERE datname = '",
                                                        db.name(), "' AND pid <> pg_backend_pid()"))
          .ok());
  absl::StatusOr<server::PolicyDeleteResult> deleted = (*other)->DeletePolicy("pi5-usb3", "");
  if (!deleted.ok()) deleted = (*other)->DeletePolicy("pi5-usb3", "");  // its session went too
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  ASSERT_TRUE(WaitFor(
      [&] { return server.Acked("pi5-a", 3) && ObservedHold(server, "pi5-a", "port-2-2") == 32u; },
      absl::Seconds(60)))
      << server.log() << agent.log();
  EXPECT_EQ(RegisterHold(agent.Stop()), 32);
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_THAT(server.log(), ::testing::HasSubstr("configuration changed in the database"));
}

// Hosts whose agents stream to another replica on the same database are listed here too, as
// that replica saved them; the server's own agents keep their entries, and a host the other
// replica lets go of shows it.
TEST_F(FleetTest, OnPostgresHostsHeldByAnotherReplicaAreListed) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  rxfleet::testing::TestDatabase db;
  ServerProcess server(db.uri());
  ASSERT_TRUE(server.Start());
  AgentProcess agent(dir_, "pi5-a", "rtl8922au-superspeed", "pi5");
  ASSERT_TRUE(agent.Start(server.address()));
  ASSERT_TRUE(WaitFor([&] { return server.Acked("pi5-a", 1); }, absl::Seconds(60)))
      << server.log() << agent.log();

  absl::StatusOr<std::unique_ptr<server::Store>> other = server::Store::Open({db.uri()});
  ASSERT_TRUE(other.ok()) << other.status();
  const auto save = [&](const std::string& id, bool connected, bool open, uint64_t epoch) {
    server::HostRecord record;
    record.host.mutable_metadata()->set_name(id);
    record.host.mutable_status()->set_connected(connected);
    record.host.mutable_status()->set_replica("replica-b:7443");
    *record.host.mutable_status()->mutable_last_seen_time() = common::TimeToProto(absl::Now());
    v1::Adapter& adapter = record.adapters.emplace_back();
    adapter.mutable_metadata()->set_name("port-1-1");
    adapter.set_host_id(id);
    record.session_replica = "replica-b:7443";
    record.open_session = open;
    record.session_epoch = epoch;
    return (*other)->SaveRegistry({record}, {}, 100, absl::InfinitePast(), {},
                                  absl::InfinitePast());
  };
  // Replica B's agent pi4-b connects; pi5-a stays this server's.
  ASSERT_TRUE(save("pi4-b", true, true, 0).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::Host> host = server.Host("pi4-b");
        return host.has_value() && host->status().replica() == "replica-b:7443" &&
               host->status().connected() && host->status().adapter_count() == 1;
      },
      absl::Seconds(30)))
      << server.log();
  EXPECT_THAT(server.Host("pi5-a")->status().replica(),
              ::testing::EndsWith(absl::StrCat(":", server.port())));

  // B's agent disconnects: shown here too.
  ASSERT_TRUE(save("pi4-b", false, false, 1).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::Host> host = server.Host("pi4-b");
        return host.has_value() && !host->status().connected();
      },
      absl::Seconds(30)))
      << server.log();
  // This server saves only its own hosts: B's record is as B wrote it.
  absl::StatusOr<server::StoredState> stored = (*other)->Load(10);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->hosts.size(), 2u);
  EXPECT_EQ(stored->hosts[0].host.status().replica(), "replica-b:7443");
  EXPECT_EQ(RegisterHold(agent.Stop()), 32);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(FleetTest, AnInvalidBundleIsNackedAndTheAgentKeepsItsSettings) {
  ServerProcess server(dir_);
  ASSERT_TRUE(server.Start());
  AgentProcess agent(dir_, "pi5-a", "rtl8922au-superspeed", "pi5");
  ASSERT_TRUE(agent.Start(server.address()));
  ASSERT_TRUE(server.Apply(HoldPolicy("usb3-64", 64, {}, {v1::USB_SPEED_SUPER})).ok());
  ASSERT_TRUE(WaitFor(
      [&] { return server.Acked("pi5-a", 2) && ObservedHold(server, "pi5-a", "port-2-2") == 64u; },
      absl::Seconds(60)))
      << agent.log();

  // A policy with a hold over the range, written into the database past the API's validation.
  ASSERT_EQ(server.Stop(), 0);
  {
    SQLite::Database db(server.db(), SQLite::OPEN_READWRITE);
    v1::Policy policy = HoldPolicy("too-long", 9000, {}, {});
    policy.mutable_metadata()->set_resource_version("99");
    policy.mutable_metadata()->set_generation(1);
    const std::string record = policy.SerializeAsString();
    SQLite::Statement insert(db, "INSERT INTO policies VALUES ('too-long', 99, ?)");
    insert.bind(1, record.data(), static_cast<int>(record.size()));
    insert.exec();
    db.exec("UPDATE meta SET value = value + 1 WHERE key = 'bundle_version'");
  }
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<v1::Host> host = server.Host("pi5-a");
        return host.has_value() && host->status().connected() && host->status().has_last_nack();
      },
      absl::Seconds(90)))
      << server.log() << agent.log();
  std::optional<v1::Host> host = server.Host("pi5-a");
  EXPECT_EQ(host->status().last_nack().version(), 3u);
  EXPECT_THAT(host->status().last_nack().error_detail(), HasSubstr("policy 'too-long'"));
  EXPECT_THAT(host->status().last_nack().error_detail(), HasSubstr("9000"));
  EXPECT_EQ(host->status().last_acked_version(), 2u);
  EXPECT_THAT(server.log(), HasSubstr("stored policy too-long fails validation"));

  // The agent keeps bundle 2's settings.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(ObservedHold(server, "pi5-a", "port-2-2"), 64u);
  const nlohmann::json state = agent.Stop();
  EXPECT_EQ(RegisterHold(state), 64);
  EXPECT_THAT(agent.log(), HasSubstr("rejected bundle version 3"));
}

TEST_F(FleetTest, AgentsRideOutServerOutagesAndConvergeWhenItIsBack) {
  ServerProcess server(dir_);
  ASSERT_TRUE(server.Start());
  AgentProcess agent(dir_, "pi5-a", "rtl8922au-superspeed", "pi5");
  ASSERT_TRUE(agent.Start(server.address()));
  ASSERT_TRUE(server.Apply(HoldPolicy("usb3-64", 64, {}, {v1::USB_SPEED_SUPER})).ok());
  ASSERT_TRUE(WaitFor(
      [&] { return server.Acked("pi5-a", 2) && ObservedHold(server, "pi5-a", "port-2-2") == 64u; },
      absl::Seconds(60)))
      << agent.log();

  // Server down: the agent keeps its settings, then restarts itself while the server is away
  // (the emulated adapter comes back with the driver's default 1024 µs).
  ASSERT_EQ(server.Stop(), 0);
  ASSERT_TRUE(
      agent.child()
          .WaitForLineContaining(Stream::kStderr, "server link: stream to", absl::Seconds(30))
          .ok());
  const nlohmann::json first_run = agent.Stop();
  EXPECT_EQ(RegisterHold(first_run), 64);
  ASSERT_TRUE(agent.Start(server.address()));
  ASSERT_TRUE(agent.child()
                  .WaitForLineContaining(Stream::kStderr, "applied the persisted bundle version 2",
                                         absl::Seconds(30))
                  .ok())
      << agent.log();
  // The persisted bundle is applied to the fresh register without the server.
  ASSERT_TRUE(
      agent.child().WaitForLineContaining(Stream::kStderr, "hold 64", absl::Seconds(30)).ok())
      << agent.log();

  // Server back on the same port: the agent reconnects by itself and follows a new change.
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(WaitFor([&] { return server.Acked("pi5-a", 2); }, absl::Seconds(90))) << agent.log();
  ASSERT_TRUE(server.Apply(HoldPolicy("usb3-64", 96, {}, {v1::USB_SPEED_SUPER})).ok());
  ASSERT_TRUE(WaitFor(
      [&] { return server.Acked("pi5-a", 3) && ObservedHold(server, "pi5-a", "port-2-2") == 96u; },
      absl::Seconds(60)))
      << agent.log();
  const nlohmann::json second_run = agent.Stop();
  EXPECT_EQ(RegisterHold(second_run), 96);
  const std::vector<int64_t> writes = WrittenHolds(second_run);
  ASSERT_FALSE(writes.empty());
  EXPECT_EQ(writes.front(), 64);  // the persisted bundle, before the server was reachable
  EXPECT_EQ(writes.back(), 96);
}

TEST_F(FleetTest, KillDashNineDuringAPolicyBurstLosesNoAcknowledgedWrite) {
  ServerProcess server(dir_);
  KillDuringAPolicyBurst(server);
}

// On PostgreSQL: after each kill -9 the restarted server carries on from the database with no
// acknowledged write lost.
TEST_F(FleetTest, OnPostgresKillDashNineLosesNoAcknowledgedWrite) {
  if (!rxfleet::testing::PostgresAvailable()) GTEST_SKIP() << "no test PostgreSQL server";
  rxfleet::testing::TestDatabase db;
  ServerProcess server(db.uri());
  KillDuringAPolicyBurst(server);
}

void FleetTest::KillDuringAPolicyBurst(ServerProcess& server) {
  ASSERT_TRUE(server.Start());
  // Every write changes its policy's description to a new sequence number, so a stored policy
  // tells which write it holds. policy -> sequence number of its last acknowledged write.
  std::map<std::string, int64_t> acknowledged;
  uint64_t max_bundle_version = 0;
  int64_t sequence = 0;
  for (int round = 0; round < 3; ++round) {
    absl::Mutex mu;
    bool stop = false;
    int writes = 0;
    std::thread writer([&] {
      while (true) {
        int64_t seq;
        {
          absl::MutexLock lock(&mu);
          if (stop) return;
          seq = ++sequence;
        }
        const std::string name = absl::StrCat("p", seq % 40);
        v1::Policy policy = HoldPolicy(name, 32, {}, {});
        policy.mutable_spec()->set_description(absl::StrCat(seq));
        absl::StatusOr<v1::ApplyPolicyResponse> r = server.Apply(policy);
        absl::MutexLock lock(&mu);
        if (!r.ok()) continue;  // cut by the kill: not acknowledged
        acknowledged[name] = seq;
        EXPECT_GT(r->bundle_version(), max_bundle_version);
        max_bundle_version = std::max(max_bundle_version, r->bundle_version());
        ++writes;
      }
    });
    ASSERT_TRUE(WaitFor(
        [&] {
          absl::MutexLock lock(&mu);
          return writes >= 30;
        },
        absl::Seconds(60)));
    server.Kill();  // mid-burst: the writer is between or inside calls
    {
      absl::MutexLock lock(&mu);
      stop = true;
    }
    writer.join();
    // A PostgreSQL server's lock ends with its session, which the database may notice a moment
    // after the kill: starting again is retried for a while.
    ASSERT_TRUE(WaitFor([&] { return server.Start(); }, absl::Seconds(30)));

    v1::ListPoliciesRequest request;
    request.set_page_size(1000);
    v1::ListPoliciesResponse stored;
    grpc::ClientContext context;
    ASSERT_TRUE(server.fleet().ListPolicies(WithDeadline(&context), request, &stored).ok());
    std::map<std::string, int64_t> stored_sequence;
    for (const v1::Policy& p : stored.policies()) {
      int64_t seq = 0;
      if (absl::SimpleAtoi(p.spec().description(), &seq)) {
        stored_sequence[p.metadata().name()] = seq;
      }
    }
    for (const auto& [name, seq] : acknowledged) {
      ASSERT_TRUE(stored_sequence.contains(name)) << "acknowledged policy " << name << " lost";
      // The last acknowledged write, or a later one the kill cut after its commit.
      EXPECT_GE(stored_sequence[name], seq) << name << ": an acknowledged write was lost";
    }
    // The bundle version never goes backwards.
    absl::StatusOr<v1::ApplyPolicyResponse> next =
        server.Apply(HoldPolicy(absl::StrCat("after-", round), 32, {}, {}));
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_GT(next->bundle_version(), max_bundle_version);
    max_bundle_version = next->bundle_version();
  }
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServerBinaryTest, FlagsVersionAndExitCodes) {
  const std::string server = BinaryPath("server/rxfleet-server");
  ProcessResult version = RunProcess({server, "--version"}, absl::Seconds(20));
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.stdout_text, "0.1.0\n");
  ProcessResult help = RunProcess({server, "--help"}, absl::Seconds(20));
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag :
       {"--listen", "--db", "--http-listen", "--stale-after", "--push-debounce"}) {
    EXPECT_THAT(help.stdout_text, HasSubstr(flag));
  }
  EXPECT_THAT(help.stdout_text, HasSubstr("127.0.0.1:7443"));
  ProcessResult bad = RunProcess({server, "--no-such-flag"}, absl::Seconds(20));
  EXPECT_EQ(bad.exit_code, 2);
  ProcessResult bad_duration = RunProcess({server, "--stale-after", "soon"}, absl::Seconds(20));
  EXPECT_EQ(bad_duration.exit_code, 2);
  // Regression: --audit-retention 0s was accepted and would have pruned every audit event.
  ProcessResult no_audit = RunProcess({server, "--audit-retention", "0s"}, absl::Seconds(20));
  EXPECT_EQ(no_audit.exit_code, 2);
  EXPECT_THAT(no_audit.stderr_text, HasSubstr("at least 1h"));
  ProcessResult never_fresh = RunProcess({server, "--stale-after", "0s"}, absl::Seconds(20));
  EXPECT_EQ(never_fresh.exit_code, 2);
  TempDir dir;
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(dir.File("not-a-dir"), "x").ok());
  ProcessResult no_tls = RunProcess(
      {server, "--listen", "127.0.0.1:0", "--http-listen", "none", "--db", dir.File("server.db")},
      absl::Seconds(20));
  EXPECT_EQ(no_tls.exit_code, 2);
  EXPECT_THAT(no_tls.stderr_text, HasSubstr("--insecure"));
  ProcessResult bad_db =
      RunProcess({server, "--insecure", "--listen", "127.0.0.1:0", "--http-listen", "none", "--db",
                  dir.File("not-a-dir/server.db")},
                 absl::Seconds(20));
  EXPECT_EQ(bad_db.exit_code, 1);
  EXPECT_THAT(bad_db.stderr_text, HasSubstr("not-a-dir"));
}

// A port another process holds is named as such, for the HTTP and the gRPC listener, instead
// of civetweb's "null context when constructing CivetServer".
TEST(ServerProcessTest, BusyPortsAreNamed) {
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string busy = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  const std::string server = BinaryPath("server/rxfleet-server");
  TempDir dir;
  ProcessResult http = RunProcess({server, "--insecure", "--listen", "127.0.0.1:0", "--http-listen",
                                   busy, "--db", dir.File("a.db")},
                                  absl::Seconds(20));
  EXPECT_EQ(http.exit_code, 1);
  EXPECT_THAT(http.stderr_text, HasSubstr("--http-listen: " + busy + " is already in use"));
  EXPECT_THAT(http.stderr_text, Not(HasSubstr("null context")));
  ProcessResult grpc_port = RunProcess(
      {server, "--insecure", "--listen", busy, "--http-listen", "none", "--db", dir.File("b.db")},
      absl::Seconds(20));
  EXPECT_EQ(grpc_port.exit_code, 1);
  EXPECT_THAT(grpc_port.stderr_text, HasSubstr("--listen: " + busy + " is already in use"));
  ::close(holder);
}

}  // namespace
}  // namespace rxfleet
