// Bounds on what agents report about adapters, over loopback against an in-process server:
// adapters per host across updates (not only per message), the size of every string an agent
// sends, and list pages that stay under the gRPC message limit however large the items are.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

v1::AgentMessage UpdateOf(int first, int count) {
  v1::AgentMessage message;
  for (int i = first; i < first + count; ++i) {
    *message.mutable_adapter_update()->add_adapters() =
        ReportedAdapter(absl::StrCat("port-1-", i), v1::USB_SPEED_SUPER, 32);
  }
  return message;
}

absl::StatusOr<v1::ListAdaptersResponse> ListAdapters(TestServer& server, int page_size,
                                                      const std::string& token = "") {
  v1::ListAdaptersRequest request;
  request.set_page_size(page_size);
  request.set_page_token(token);
  v1::ListAdaptersResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  grpc::Status status = server.fleet().ListAdapters(&context, request, &response);
  if (!status.ok()) return testing::ToAbsl(status);
  return response;
}

// 40 updates of 256 new adapters each used to grow one host to 10,240 adapters (each update
// was within the per-message bound). The update that would pass the per-host bound is refused
// with a message naming it, and the host keeps what it had.
TEST(AdapterBoundsTest, UpdatesCannotGrowAHostPastTheBound) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1"));
  ASSERT_TRUE(agent.WaitForBundle(1).has_value());
  for (int round = 0; round < 40 && !agent.ended(); ++round) {
    if (!agent.Send(UpdateOf(round * 256, 256))) break;
  }
  const grpc::Status status = agent.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("at most 256 adapters per host"));
  EXPECT_THAT(status.error_message(), HasSubstr("--max-adapters-per-host"));
  absl::StatusOr<v1::Host> host = server->GetHost("h1");
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->status().adapter_count(), 256u);

  // Replacing adapters (removed ids with new ones) within the bound is fine.
  TestAgent again(server->address());
  ASSERT_TRUE(again.Connect("h1", {ReportedAdapter("port-2-1", v1::USB_SPEED_SUPER, 32)}));
  ASSERT_TRUE(again.WaitForBundle(1).has_value());
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().adapter_count() == 1; }));
  v1::AgentMessage swap = UpdateOf(0, 255);
  swap.mutable_adapter_update()->add_removed_adapter_ids("port-2-1");
  ASSERT_TRUE(again.Send(swap));
  v1::AgentMessage one_more = UpdateOf(1000, 1);
  ASSERT_TRUE(again.Send(one_more));
  ASSERT_TRUE(WaitFor([&] { return server->GetHost("h1")->status().adapter_count() == 256; }));
  EXPECT_FALSE(again.ended());
}

TEST(AdapterBoundsTest, TheBoundIsAnOption) {
  FleetServerOptions options;
  options.max_adapters_per_host = 4;
  std::unique_ptr<TestServer> server = TestServer::Start(options);
  ASSERT_NE(server, nullptr);
  TestAgent agent(server->address());
  std::vector<v1::Adapter> five;
  for (int i = 0; i < 5; ++i) {
    five.push_back(ReportedAdapter(absl::StrCat("port-1-", i), v1::USB_SPEED_SUPER, 32));
  }
  ASSERT_TRUE(agent.Connect("h1", five));
  const grpc::Status status = agent.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("at most 4"));
}

// Every string an agent sends about an adapter is bounded; the refusal names the field.
TEST(AdapterBoundsTest, LongStringsAreRefusedNamingTheField) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  struct Case {
    std::string field;
    std::function<void(v1::AdapterStatus&)> set;
  };
  const std::vector<Case> cases = {
      {"status.chip", [](v1::AdapterStatus& s) { s.set_chip(std::string(300, 'c')); }},
      {"status.product", [](v1::AdapterStatus& s) { s.set_product(std::string(300, 'p')); }},
      {"status.diagnoses[0].message",
       [](v1::AdapterStatus& s) {
         v1::Diagnosis* d = s.add_diagnoses();
         d->set_code("usb3_capable_at_usb2");
         d->set_message(std::string(5000, 'd'));
       }},
      {"status.diagnoses",
       [](v1::AdapterStatus& s) {
         for (int i = 0; i < 100; ++i) s.add_diagnoses()->set_code("x");
       }},
      {"status.conditions[0].reason",
       [](v1::AdapterStatus& s) { s.add_conditions()->set_reason(std::string(300, 'r')); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    v1::Adapter adapter = ReportedAdapter("port-1-1", v1::USB_SPEED_SUPER, 32);
    c.set(*adapter.mutable_status());
    TestAgent agent(server->address());
    ASSERT_TRUE(agent.Connect("h1", {adapter}));
    const grpc::Status status = agent.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat("adapters[0].", c.field)));
  }
  // Strings at the bound are accepted.
  v1::Adapter adapter = ReportedAdapter("port-1-1", v1::USB_SPEED_SUPER, 32);
  adapter.mutable_status()->set_product(std::string(256, 'p'));
  TestAgent agent(server->address());
  ASSERT_TRUE(agent.Connect("h1", {adapter}));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Host> host = server->GetHost("h1");
    return host.ok() && host->status().adapter_count() == 1;
  }));
  EXPECT_FALSE(agent.ended());
}

// Three hosts of 256 adapters with long (but allowed) diagnoses: a page of 1000 adapters used to
// be one ~10 MB response, which no client accepts ("Received message larger than max"). Pages
// are also bounded in bytes now, and every adapter is still listed exactly once.
TEST(AdapterBoundsTest, PagesStayUnderTheMessageLimit) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<TestAgent>> agents;
  for (int h = 0; h < 3; ++h) {
    std::vector<v1::Adapter> adapters;
    for (int i = 0; i < 256; ++i) {
      v1::Adapter adapter = ReportedAdapter(absl::StrCat("port-1-", i), v1::USB_SPEED_HIGH, 32);
      for (int d = 0; d < 12; ++d) {
        v1::Diagnosis* diagnosis = adapter.mutable_status()->add_diagnoses();
        diagnosis->set_code(absl::StrCat("note_", d));
        diagnosis->set_message(std::string(1000, 'a' + d));
      }
      adapters.push_back(std::move(adapter));
    }
    agents.push_back(std::make_unique<TestAgent>(server->address()));
    ASSERT_TRUE(agents.back()->Connect(absl::StrCat("h", h), adapters));
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int h = 0; h < 3; ++h) {
          absl::StatusOr<v1::Host> host = server->GetHost(absl::StrCat("h", h));
          if (!host.ok() || host->status().adapter_count() != 256) return false;
        }
        return true;
      },
      absl::Seconds(60)));
  std::string token;
  size_t listed = 0;
  int pages = 0;
  do {
    absl::StatusOr<v1::ListAdaptersResponse> page = ListAdapters(*server, 1000, token);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LT(page->ByteSizeLong(), size_t{4} << 20);
    EXPECT_GT(page->adapters_size(), 0);
    listed += page->adapters_size();
    token = page->next_page_token();
    ASSERT_LT(++pages, 100);
  } while (!token.empty());
  EXPECT_EQ(listed, 3u * 256u);
  EXPECT_GT(pages, 1);
}

}  // namespace
}  // namespace rxfleet::server
