// Policy probe slots over real gRPC on loopback: a policy with a probe against one iperf3
// server matches adapters of two hosts, and their bundles carry distinct, non-overlapping
// ProbeSlots (PolicyBundle.probe_slots); a host whose probe no server policy decides, and a
// host whose agent does not run probes, get none; an inventory change moves only that host's
// slots. Every wait is on a condition with a deadline.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "tests/server/test_server.h"

namespace rxfleet::server {
namespace {

using testing::Deadline;
using testing::ReportedAdapter;
using testing::TestAgent;
using testing::TestServer;
using testing::WaitFor;

// Hello (labels board=`board`, the `probes` capability when `probes`) and an inventory of
// `adapters` (ids).
bool Connect(TestAgent& agent, const std::string& host_id, const std::string& board, bool probes,
             const std::vector<std::string>& adapters) {
  v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id(host_id);
  (*hello.mutable_hello()->mutable_labels())["board"] = board;
  hello.mutable_hello()->set_agent_version("test");
  hello.mutable_hello()->add_capabilities("experiments");
  if (probes) hello.mutable_hello()->add_capabilities("probes");
  v1::AgentMessage inventory;
  for (const std::string& id : adapters) {
    *inventory.mutable_inventory()->add_adapters() = ReportedAdapter(id, v1::USB_SPEED_SUPER, 1024);
  }
  return agent.Send(hello) && agent.Send(inventory);
}

bool SendInventory(TestAgent& agent, const std::vector<std::string>& adapters) {
  v1::AgentMessage inventory;
  for (const std::string& id : adapters) {
    *inventory.mutable_inventory()->add_adapters() = ReportedAdapter(id, v1::USB_SPEED_SUPER, 1024);
  }
  return agent.Send(inventory);
}

// adapter id -> (policy, offset) of the agent's newest bundle; empty without one.
std::map<std::string, std::pair<std::string, absl::Duration>> Slots(const TestAgent& agent) {
  std::map<std::string, std::pair<std::string, absl::Duration>> out;
  const std::optional<v1::PolicyBundle> bundle = agent.last_bundle();
  if (!bundle.has_value()) return out;
  for (const v1::ProbeSlot& slot : bundle->probe_slots()) {
    out[slot.adapter_id()] = {slot.policy(), common::DurationFromProto(slot.offset())};
  }
  return out;
}

bool HasPolicy(const TestAgent& agent, const std::string& name) {
  const std::optional<v1::PolicyBundle> bundle = agent.last_bundle();
  if (!bundle.has_value()) return false;
  for (const v1::Policy& p : bundle->policies()) {
    if (p.metadata().name() == name) return true;
  }
  return false;
}

TEST(ProbeSlotsServiceTest, HostsSharingAnIperfServerGetDistinctNonOverlappingSlots) {
  std::unique_ptr<TestServer> server = TestServer::Start();
  ASSERT_NE(server, nullptr);
  TestAgent a(server->address()), b(server->address()), office(server->address()),
      old_agent(server->address());
  ASSERT_TRUE(Connect(a, "host-a", "lab", true, {"port-1", "port-2"}));
  ASSERT_TRUE(Connect(b, "host-b", "lab", true, {"port-1"}));
  ASSERT_TRUE(Connect(office, "host-c", "office", true, {"port-1"}));
  ASSERT_TRUE(Connect(old_agent, "host-d", "lab", false, {"port-1"}));
  ASSERT_TRUE(WaitFor([&] {
    for (const char* host : {"host-a", "host-b", "host-c", "host-d"}) {
      absl::StatusOr<v1::Host> h = server->GetHost(host);
      if (!h.ok() || h->status().adapter_count() == 0) return false;
    }
    return true;
  }));

  // 10 s TCP downloads every minute against one iperf3 server, on the lab hosts only: slots of
  // 12 s, five fit in the minute.
  v1::ApplyPolicyRequest request;
  v1::Policy* policy = request.mutable_policy();
  policy->mutable_metadata()->set_name("lab-probe");
  (*policy->mutable_spec()->mutable_selector()->mutable_match_labels())["board"] = "lab";
  v1::ProbeSpec* probe = policy->mutable_spec()->mutable_probe();
  probe->set_server("10.0.0.5");
  probe->mutable_duration()->set_seconds(10);
  probe->mutable_interval()->set_seconds(60);
  {
    v1::ApplyPolicyResponse response;
    grpc::ClientContext context;
    const grpc::Status status = server->fleet().ApplyPolicy(Deadline(&context), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_TRUE(WaitFor([&] { return Slots(a).size() == 2 && Slots(b).size() == 1; }));
  ASSERT_TRUE(
      WaitFor([&] { return HasPolicy(office, "lab-probe") && HasPolicy(old_agent, "lab-probe"); }));

  std::vector<absl::Duration> offsets;
  for (const TestAgent* agent : {&a, &b}) {
    for (const auto& [adapter, slot] : Slots(*agent)) {
      EXPECT_EQ(slot.first, "lab-probe") << adapter;
      offsets.push_back(slot.second);
    }
  }
  // Numbers in (host, adapter) order: host-a/port-1, host-a/port-2, host-b/port-1.
  EXPECT_EQ(Slots(a).at("port-1").second, absl::Seconds(1));
  EXPECT_EQ(Slots(a).at("port-2").second, absl::Seconds(13));
  EXPECT_EQ(Slots(b).at("port-1").second, absl::Seconds(25));
  // Every pair of runs is a 10 s probe plus the 2 s margin apart, modulo the 60 s interval.
  for (size_t i = 0; i < offsets.size(); ++i) {
    for (size_t j = 0; j < offsets.size(); ++j) {
      if (i == j) continue;
      const absl::Duration gap =
          ((offsets[j] - offsets[i]) % absl::Seconds(60) + absl::Seconds(60)) % absl::Seconds(60);
      EXPECT_GE(gap, absl::Seconds(12)) << i << " " << j;
    }
  }
  // The office host's probe is decided by no policy; host-d's agent does not run probes.
  EXPECT_TRUE(Slots(office).empty());
  EXPECT_TRUE(Slots(old_agent).empty());

  // host-b plugs in a second adapter: it gets the next slot and re-receives its bundle; host-a's
  // slots stay.
  const auto a_before = Slots(a);
  ASSERT_TRUE(SendInventory(b, {"port-1", "port-2"}));
  ASSERT_TRUE(WaitFor([&] { return Slots(b).size() == 2; }));
  EXPECT_EQ(Slots(b).at("port-1").second, absl::Seconds(25));
  EXPECT_EQ(Slots(b).at("port-2").second, absl::Seconds(37));
  EXPECT_EQ(Slots(a), a_before);

  // host-a unplugs port-1: its number is freed, port-2 keeps its slot.
  ASSERT_TRUE(SendInventory(a, {"port-2"}));
  ASSERT_TRUE(WaitFor([&] { return Slots(a).size() == 1; }));
  EXPECT_EQ(Slots(a).at("port-2").second, absl::Seconds(13));
  EXPECT_EQ(Slots(b).at("port-2").second, absl::Seconds(37));

  // Deleting the policy empties every host's slots with the next bundle.
  {
    v1::DeletePolicyRequest del;
    del.set_name("lab-probe");
    v1::DeletePolicyResponse response;
    grpc::ClientContext context;
    const grpc::Status status = server->fleet().DeletePolicy(Deadline(&context), del, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_TRUE(WaitFor([&] {
    return !HasPolicy(a, "lab-probe") && !HasPolicy(b, "lab-probe") && Slots(a).empty() &&
           Slots(b).empty();
  }));
}

}  // namespace
}  // namespace rxfleet::server
