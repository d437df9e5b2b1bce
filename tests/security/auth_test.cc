// Unit tests of server/auth (tokens, roles, the method -> role table) and server/store's token
// table on real SQLite files.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "rxfleet/v1/agent_service.grpc.pb.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "server/auth/authorizer.h"
#include "server/auth/token.h"
#include "server/fleet_server.h"
#include "server/store/store.h"
#include "server/store/token_store.h"
#include "tests/support/paths.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TokenTest, TokensAreRandomPrefixedAndUrlSafe) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> token = GenerateToken();
    ASSERT_TRUE(token.ok()) << token.status();
    EXPECT_THAT(*token, StartsWith("rxf_"));
    EXPECT_EQ(token->size(), 4u + 43u);  // base64url of 32 bytes, unpadded
    EXPECT_EQ(token->find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789-_",
                                       4),
              std::string::npos);
    EXPECT_TRUE(seen.insert(*token).second);
  }
}

TEST(TokenTest, HashesAreSha256AndCompareExactly) {
  const std::string a = HashToken("rxf_a");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_TRUE(HashesEqual(a, HashToken("rxf_a")));
  EXPECT_FALSE(HashesEqual(a, HashToken("rxf_b")));
  EXPECT_FALSE(HashesEqual(a, a.substr(1)));
  EXPECT_FALSE(HashesEqual("", ""));
}

TEST(TokenTest, RolesAndNames) {
  EXPECT_EQ(*ParseRole("operator"), Role::kOperator);
  EXPECT_THAT(ParseRole("root").status().message(), HasSubstr("viewer, operator, admin"));
  EXPECT_TRUE(ValidateTokenName("ci-readonly.2").ok());
  EXPECT_FALSE(ValidateTokenName("").ok());
  EXPECT_FALSE(ValidateTokenName("-x").ok());
  EXPECT_FALSE(ValidateTokenName("a b").ok());
  EXPECT_FALSE(ValidateTokenName(std::string(65, 'a')).ok());
}

// Every FleetService method is in the role table: a new RPC without an entry would be refused
// for everyone, and this test names it.
TEST(AuthorizerTest, EveryFleetServiceMethodHasARole) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "rxfleet.v1.FleetService");
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_TRUE(RequiredRole(service->method(i)->name()).has_value())
        << service->method(i)->name() << " has no entry in RequiredRole (server/auth)";
  }
  EXPECT_EQ(RequiredRole("ApplyPolicy"), Role::kOperator);
  EXPECT_EQ(RequiredRole("CreateExperiment"), Role::kOperator);
  EXPECT_EQ(RequiredRole("GetExperimentReport"), Role::kViewer);
  EXPECT_EQ(RequiredRole("RevokeToken"), Role::kAdmin);
  EXPECT_FALSE(RequiredRole("Connect").has_value());
}

TEST(TokenStoreTest, CreateFindListRevoke) {
  rxfleet::testing::TempDir dir("rxfleet-tokens");
  const std::string path = dir.File("server.db");
  ASSERT_TRUE(Store::Open({path}).ok());
  absl::StatusOr<std::unique_ptr<TokenStore>> store = TokenStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Time now = absl::FromUnixSeconds(1767225600);
  absl::StatusOr<CreatedToken> ops = (*store)->Create("ops", Role::kOperator, "test", now);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_TRUE(absl::IsAlreadyExists((*store)->Create("ops", Role::kViewer, "test", now).status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*store)->Create("a b", Role::kViewer, "t", now).status()));

  // A second connection (another process in production) sees the token at once.
  absl::StatusOr<std::unique_ptr<TokenStore>> other = TokenStore::Open(path);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<std::optional<TokenRecord>> found = (*other)->Find(ops->token);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->name, "ops");
  EXPECT_EQ((*found)->role, Role::kOperator);
  EXPECT_EQ((*found)->create_time, now);
  EXPECT_FALSE((*other)->Find("rxf_other")->has_value());

  auto listed = (*store)->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);

  ASSERT_TRUE((*other)->Revoke("ops").ok());
  EXPECT_FALSE((*store)->Find(ops->token)->has_value());
  EXPECT_TRUE(absl::IsNotFound((*store)->Revoke("ops").status()));

  // Only the hash is stored (in the database or its write-ahead log).
  for (const std::string& file : {path, path + "-wal"}) {
    auto raw = rxfleet::testing::ReadTextFile(file);
    if (raw.ok()) {
      EXPECT_EQ(raw->find(ops->token), std::string::npos) << file;
    }
  }
}

}  // namespace
}  // namespace rxfleet::server

namespace rxfleet::server {
namespace {

// A client that opens an agent stream and never says Hello is disconnected after
// hello_timeout instead of holding server memory forever.
TEST(HelloTimeoutTest, SilentStreamIsClosed) {
  rxfleet::testing::TempDir dir("rxfleet-hello");
  FleetServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir.File("server.db");
  options.hello_timeout = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<FleetServer>> server = FleetServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::AgentService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = stub->Connect(&context);
  v1::ServerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("no Hello within"));
}

}  // namespace
}  // namespace rxfleet::server
