// agent/link/server_list: parsing `--server a:7443,b:7443` and the rotation over the entries
// (which entry next, when a round of failures calls for the backoff).
#include "agent/link/server_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rxfleet::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<std::vector<std::string>> parsed = ParseServerAddresses(text);
  EXPECT_FALSE(parsed.ok()) << text;
  if (parsed.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  return std::string(parsed.status().message());
}

TEST(ParseServerAddressesTest, OneEntryAsBefore) {
  absl::StatusOr<std::vector<std::string>> parsed = ParseServerAddresses("fleet.example:7443");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre("fleet.example:7443"));
}

TEST(ParseServerAddressesTest, SeveralEntriesInOrderWithNamesIpv4AndIpv6) {
  absl::StatusOr<std::vector<std::string>> parsed =
      ParseServerAddresses("b.example:7443,10.0.0.2:7443, [2001:db8::1]:7443 ,[::1]:1");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed,
              ElementsAre("b.example:7443", "10.0.0.2:7443", "[2001:db8::1]:7443", "[::1]:1"));
}

TEST(ParseServerAddressesTest, EmptyValuesAndEntriesAreRefused) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("no server address"));
  EXPECT_THAT(ErrorOf("  "), HasSubstr("no server address"));
  EXPECT_THAT(ErrorOf("a:1,,b:1"), HasSubstr("entry 2 is empty"));
  EXPECT_THAT(ErrorOf("a:1,"), HasSubstr("entry 2 is empty"));
  EXPECT_THAT(ErrorOf(",a:1"), HasSubstr("entry 1 is empty"));
  EXPECT_THAT(ErrorOf("a:1, ,b:1"), HasSubstr("entry 2 is empty"));
}

TEST(ParseServerAddressesTest, BadEntriesAreNamedWithTheirPosition) {
  EXPECT_THAT(ErrorOf("a:1,b"), HasSubstr("entry 2: address \"b\" needs a port"));
  EXPECT_THAT(ErrorOf("a:1,b:99999"), HasSubstr("entry 2: address \"b:99999\": port must be"));
  EXPECT_THAT(ErrorOf("a:x"), HasSubstr("entry 1"));
  EXPECT_THAT(ErrorOf("a:1,::1:7443"), HasSubstr("IPv6 host in brackets"));
  EXPECT_THAT(ErrorOf("a:1,:7443"), HasSubstr("has no host"));
  // Port 0 is for listening ("any free port"); no server is there.
  EXPECT_THAT(ErrorOf("a:1,b:0"), HasSubstr("entry 2: address \"b:0\": port 0"));
  EXPECT_THAT(ErrorOf("b:000"), HasSubstr("port 0"));
}

TEST(ParseServerAddressesTest, DuplicatesAreRefusedAlsoInOtherCase) {
  EXPECT_THAT(ErrorOf("a:1,b:1,a:1"), HasSubstr("entry 3: \"a:1\" is already in the list"));
  EXPECT_THAT(ErrorOf("Fleet.Example:7443,fleet.example:7443"), HasSubstr("already in the list"));
  EXPECT_THAT(ErrorOf("a:1, a:1"), HasSubstr("already in the list"));
  // Another port of the same host is another server.
  EXPECT_TRUE(ParseServerAddresses("a:7443,a:7444").ok());
}

TEST(ParseServerAddressesTest, AtMostTheBound) {
  std::vector<std::string> entries;
  std::string list;
  for (size_t i = 0; i < kMaxServerAddresses; ++i) {
    absl::StrAppend(&list, i == 0 ? "" : ",", "s", i, ".example:7443");
  }
  absl::StatusOr<std::vector<std::string>> full = ParseServerAddresses(list);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->size(), kMaxServerAddresses);
  EXPECT_THAT(ErrorOf(absl::StrCat(list, ",one-more.example:7443")),
              HasSubstr(absl::StrCat("more than ", kMaxServerAddresses)));
}

TEST(ServerRotationTest, StartsAtTheGivenEntryAndWraps) {
  ServerRotation rotation(3, 1);
  EXPECT_EQ(rotation.current(), 1u);
  rotation.EndAttempt(false);
  EXPECT_EQ(rotation.current(), 2u);
  rotation.EndAttempt(false);
  EXPECT_EQ(rotation.current(), 0u);
  rotation.EndAttempt(true);
  EXPECT_EQ(rotation.current(), 1u);
  EXPECT_EQ(ServerRotation(3, 7).current(), 1u);  // modulo the size
}

// Within a round the next entry is tried promptly; once every entry failed in turn, the backoff.
TEST(ServerRotationTest, OnlyAWholeFailedRoundCallsForTheBackoff) {
  ServerRotation rotation(3, 0);
  EXPECT_FALSE(rotation.EndAttempt(false));  // 0 failed, try 1
  EXPECT_FALSE(rotation.EndAttempt(false));  // 1 failed, try 2
  EXPECT_TRUE(rotation.EndAttempt(false));   // 2 failed: the round failed
  EXPECT_EQ(rotation.failures_in_round(), 0u);
  EXPECT_FALSE(rotation.EndAttempt(false));  // a new round
  EXPECT_FALSE(rotation.EndAttempt(false));
  EXPECT_TRUE(rotation.EndAttempt(false));
}

// A stream that worked starts a new round, its own end counting as the round's first failure:
// after a replica that served the agent goes away, the others are tried before any backoff.
TEST(ServerRotationTest, AStreamThatWorkedStartsANewRound) {
  ServerRotation rotation(2, 0);
  EXPECT_FALSE(rotation.EndAttempt(false));  // 0 failed, try 1
  EXPECT_FALSE(rotation.EndAttempt(true));   // 1 worked, then ended: try 0 promptly
  EXPECT_EQ(rotation.current(), 0u);
  EXPECT_TRUE(rotation.EndAttempt(false));  // 0 failed too: both failed in turn
  EXPECT_EQ(rotation.current(), 1u);
}

// One entry: every end is a whole round, so a single server is paced by the backoff as before.
TEST(ServerRotationTest, WithOneEntryEveryEndIsARound) {
  ServerRotation rotation(1, 5);
  EXPECT_EQ(rotation.current(), 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(rotation.EndAttempt(false));
    EXPECT_TRUE(rotation.EndAttempt(true));
    EXPECT_EQ(rotation.current(), 0u);
  }
}

}  // namespace
}  // namespace rxfleet::agent
