// /sd/agents: which agent-announced metrics addresses are published, and which labels a host
// may set. Pure functions on Registry::MetricsTarget values.
#include "server/http/sd_target.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/http/http_server.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;

Registry::MetricsTarget Target(const std::string& host, const std::string& address,
                               const std::string& peer = "ipv4:10.0.0.5:51234") {
  Registry::MetricsTarget target;
  target.host_id = host;
  target.address = address;
  target.peer_address = peer;
  target.connected = true;
  return target;
}

TEST(SdTargetTest, LinkLocalAndUnscrapableAddressesAreNeverPublished) {
  for (const char* address : {"169.254.169.254:80", "169.254.0.1:9477", "0.0.0.0:9477",
                              "224.0.0.1:9477", "255.255.255.255:9477", "[fe80::1]:9477",
                              "[::]:9477", "[ff02::1]:9477", "[::ffff:169.254.169.254]:80"}) {
    SCOPED_TRACE(address);
    const absl::Status status = CheckSdTarget(address, "ipv4:10.0.0.5:1", {});
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(status.message()), HasSubstr(address));
  }
  for (const char* address :
       {"10.0.0.5:9477", "127.0.0.1:9477", "pi1.lab:9477", "[::1]:9477", "192.168.1.20:9477"}) {
    EXPECT_TRUE(CheckSdTarget(address, "ipv4:10.0.0.5:1", {}).ok()) << address;
  }
}

TEST(SdTargetTest, PeerAddressCanBeRequired) {
  SdTargetPolicy policy;
  policy.require_peer_address = true;
  EXPECT_TRUE(CheckSdTarget("10.0.0.5:9477", "ipv4:10.0.0.5:51234", policy).ok());
  EXPECT_TRUE(CheckSdTarget("[2001:db8::7]:9477", "ipv6:[2001:db8::7]:4000", policy).ok());
  EXPECT_TRUE(CheckSdTarget("10.0.0.5:9477", "ipv6:[::ffff:10.0.0.5]:4000", policy).ok());
  const absl::Status other = CheckSdTarget("10.0.0.9:9477", "ipv4:10.0.0.5:51234", policy);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.message()), HasSubstr("not the agent's own address 10.0.0.5"));
  EXPECT_FALSE(CheckSdTarget("pi1.lab:9477", "ipv4:10.0.0.5:51234", policy).ok());
}

TEST(ServiceDiscoveryJsonTest, RefusedTargetsAreLeftOutAndReported) {
  std::vector<std::string> refused;
  const nlohmann::json groups = nlohmann::json::parse(ServiceDiscoveryJson(
      {Target("good", "10.0.0.5:9477"), Target("evil", "169.254.169.254:80")}, {}, &refused));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["targets"][0], "10.0.0.5:9477");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0], HasSubstr("host evil: metrics address 169.254.169.254:80"));

  SdTargetPolicy strict;
  strict.require_peer_address = true;
  EXPECT_EQ(
      nlohmann::json::parse(ServiceDiscoveryJson({Target("far", "10.0.0.9:9477")}, strict)).size(),
      0u);
}

// Host labels named job or instance replaced the scrape's job and instance; __ labels set the
// scrape address, scheme or path.
TEST(ServiceDiscoveryJsonTest, ReservedLabelsCannotBeSetByHosts) {
  Registry::MetricsTarget target = Target("pi1", "10.0.0.5:9477");
  target.labels = {{"job", "node"},         {"instance", "elsewhere:80"},
                   {"host", "other"},       {"__metrics_path__", "/admin"},
                   {"__scheme__", "https"}, {"board", "pi5"}};
  const nlohmann::json groups = nlohmann::json::parse(ServiceDiscoveryJson({target}));
  ASSERT_EQ(groups.size(), 1u);
  const nlohmann::json& labels = groups[0]["labels"];
  EXPECT_FALSE(labels.contains("job"));
  EXPECT_FALSE(labels.contains("instance"));
  EXPECT_FALSE(labels.contains("__metrics_path__"));
  EXPECT_FALSE(labels.contains("__scheme__"));
  EXPECT_EQ(labels["host"], "pi1");
  EXPECT_EQ(labels["board"], "pi5");
  EXPECT_EQ(labels["__meta_rxfleet_connected"], "true");
}

}  // namespace
}  // namespace rxfleet::server
