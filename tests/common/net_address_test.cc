#include "common/net_address.h"

#include "gtest/gtest.h"

namespace rxfleet::common {
namespace {

TEST(ValidateHostPort, AcceptsNamesAddressesAndPortZero) {
  EXPECT_TRUE(ValidateHostPort("127.0.0.1:7443").ok());
  EXPECT_TRUE(ValidateHostPort("fleet.example:7443").ok());
  EXPECT_TRUE(ValidateHostPort("[::1]:65535").ok());
  EXPECT_TRUE(ValidateHostPort("0.0.0.0:0").ok());
}

// Found by trying the programs: gRPC wrapped 99999 onto port 34463 and listened there.
TEST(ValidateHostPort, RejectsPortsAboveTheRange) {
  const absl::Status status = ValidateHostPort("127.0.0.1:99999");
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_NE(status.message().find("0 to 65535"), absl::string_view::npos) << status;
}

TEST(ValidateHostPort, RejectsMalformedAddresses) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", ":7443", "host:74x3", "host:-1", "::1:7443",
                          "host:123456789012"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ValidateHostPort(bad))) << bad;
  }
}

}  // namespace
}  // namespace rxfleet::common
