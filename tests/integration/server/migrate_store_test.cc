// `rxfleet-server migrate-store` as an operator runs it: refused while the SQLite server runs,
// then the stopped server's fleet copied into PostgreSQL, where a server started with
// --db postgresql://... carries on with the same policies, versions and tokens; refused again
// once the target is not empty. Real processes, the ctest fixture's PostgreSQL server.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/support/paths.h"
#include "tests/support/postgres.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::StartedServer;
using ::rxfleet::testing::StartServerProcess;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::TestDatabase;
using ::testing::HasSubstr;

constexpr absl::Duration kCall = absl::Seconds(60);

grpc::ClientContext* WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

ProcessResult Server(std::vector<std::string> args) {
  args.insert(args.begin(), BinaryPath("server/rxfleet-server"));
  return RunProcess(args, kCall);
}

absl::StatusOr<StartedServer> StartServer(const std::string& db) {
  return StartServerProcess({BinaryPath("server/rxfleet-server"), "--insecure", "--listen",
                             "127.0.0.1:0", "--db", db, "--http-listen", "none", "--drain-timeout",
                             "2s"});
}

std::unique_ptr<v1::FleetService::Stub> Fleet(const StartedServer& server) {
  return v1::FleetService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port),
                                                       grpc::InsecureChannelCredentials()));
}

absl::StatusOr<v1::Policy> ApplyHold(v1::FleetService::Stub& fleet, const std::string& name,
                                     uint32_t hold_us) {
  v1::ApplyPolicyRequest request;
  request.mutable_policy()->mutable_metadata()->set_name(name);
  request.mutable_policy()->mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  v1::ApplyPolicyResponse response;
  grpc::ClientContext context;
  const grpc::Status status = fleet.ApplyPolicy(WithDeadline(&context), request, &response);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return response.policy();
}

absl::StatusOr<v1::Policy> GetPolicy(v1::FleetService::Stub& fleet, const std::string& name) {
  v1::GetPolicyRequest request;
  request.set_name(name);
  v1::Policy policy;
  grpc::ClientContext context;
  const grpc::Status status = fleet.GetPolicy(WithDeadline(&context), request, &policy);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return policy;
}

TEST(MigrateStoreTest, AStoppedServersFleetMovesToPostgresAndCarriesOn) {
  if (!rxfleet::testing::PostgresAvailable()) {
    GTEST_SKIP() << "no test PostgreSQL server: RXFLEET_TEST_PG_DIR is unset (ctest sets it)";
  }
  TempDir dir("rxfleet-migrate-store");
  const std::string db = dir.File("server.db");
  TestDatabase target;

  ProcessResult token = Server({"tokens", "create", "ops", "--role", "operator", "--db", db});
  ASSERT_EQ(token.exit_code, 0) << token.stderr_text;

  absl::StatusOr<StartedServer> sqlite_server = StartServer(db);
  ASSERT_TRUE(sqlite_server.ok()) << sqlite_server.status();
  std::unique_ptr<v1::FleetService::Stub> fleet = Fleet(*sqlite_server);
  ASSERT_TRUE(ApplyHold(*fleet, "hold-a", 32).ok());
  absl::StatusOr<v1::Policy> before = ApplyHold(*fleet, "hold-a", 64);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->metadata().generation(), 2);

  // While the server runs on the file, nothing is copied.
  ProcessResult in_use = Server({"migrate-store", "--from", "sqlite:" + db, "--to", target.uri()});
  EXPECT_EQ(in_use.exit_code, 1) << in_use.stderr_text;
  EXPECT_THAT(in_use.stderr_text, HasSubstr("is in use by another rxfleet-server"));
  EXPECT_EQ(sqlite_server->child->Terminate(absl::Seconds(20)), 0);

  ProcessResult copied = Server({"migrate-store", "--from", "sqlite:" + db, "--to", target.uri()});
  ASSERT_EQ(copied.exit_code, 0) << copied.stderr_text;
  EXPECT_THAT(copied.stdout_text, HasSubstr("1 policies"));
  EXPECT_THAT(copied.stdout_text, HasSubstr("1 tokens"));
  EXPECT_THAT(copied.stdout_text, HasSubstr("revision 2, bundle version 3"));

  ProcessResult again = Server({"migrate-store", "--from", "sqlite:" + db, "--to", target.uri()});
  EXPECT_EQ(again.exit_code, 1) << again.stderr_text;
  EXPECT_THAT(again.stderr_text, HasSubstr("is not empty"));

  // The token came along: the list on PostgreSQL names it.
  ProcessResult tokens = Server({"tokens", "list", "--db", target.uri()});
  ASSERT_EQ(tokens.exit_code, 0) << tokens.stderr_text;
  EXPECT_THAT(tokens.stdout_text, HasSubstr("ops\toperator"));

  // A server on PostgreSQL starts from the copied state and continues above its versions.
  absl::StatusOr<StartedServer> pg_server = StartServer(target.uri());
  ASSERT_TRUE(pg_server.ok()) << pg_server.status();
  EXPECT_THAT(pg_server->start_line, HasSubstr("bundle version 3, 1 policies"));
  fleet = Fleet(*pg_server);
  absl::StatusOr<v1::Policy> after = GetPolicy(*fleet, "hold-a");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->metadata().uid(), before->metadata().uid());
  EXPECT_EQ(after->metadata().resource_version(), before->metadata().resource_version());
  EXPECT_EQ(after->metadata().generation(), 2);
  EXPECT_EQ(after->spec().settings().hold_us(), 64u);
  absl::StatusOr<v1::Policy> next = ApplyHold(*fleet, "hold-b", 96);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->metadata().resource_version(), "3");
  EXPECT_EQ(pg_server->child->Terminate(absl::Seconds(20)), 0);
}

TEST(MigrateStoreTest, UsageErrorsExitWithTwoAndAMissingFileWithOne) {
  TempDir dir("rxfleet-migrate-store");
  ProcessResult not_pg =
      Server({"migrate-store", "--from", "sqlite:" + dir.File("a.db"), "--to", dir.File("b.db")});
  EXPECT_EQ(not_pg.exit_code, 2) << not_pg.stderr_text;
  EXPECT_THAT(not_pg.stderr_text, HasSubstr("--to must be a PostgreSQL connection URI"));
  ProcessResult from_pg =
      Server({"migrate-store", "--from", "postgresql://", "--to", "postgresql://"});
  EXPECT_EQ(from_pg.exit_code, 2) << from_pg.stderr_text;
  EXPECT_THAT(from_pg.stderr_text, HasSubstr("must be an SQLite database"));
  // A mistyped path is not created.
  const std::string missing = dir.File("typo/server.db");
  ProcessResult none = Server({"migrate-store", "--from", "sqlite:" + missing, "--to",
                               "postgresql://rx@127.0.0.1:1/fleet"});
  EXPECT_EQ(none.exit_code, 1) << none.stderr_text;
  EXPECT_THAT(none.stderr_text, HasSubstr("no database at " + missing));
  EXPECT_FALSE(std::filesystem::exists(dir.File("typo")));
}

}  // namespace
}  // namespace rxfleet
