#include "tests/cli/test_util.h"

#include <cstdlib>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "rxfleet/v1/local_status.pb.h"
#include "tests/support/paths.h"

namespace rxfleet::cli::testing {

template <typename T>
T LoadResponse(std::string_view name) {
  T message;
  const std::string path = rxfleet::testing::SourcePath(
      std::string("tests/fixtures/cli/responses/") + std::string(name) + ".textproto");
  auto text = rxfleet::testing::ReadTextFile(path);
  if (!text.ok()) {
    ADD_FAILURE() << "cannot read " << path;
    return message;
  }
  if (!google::protobuf::TextFormat::ParseFromString(*text, &message)) {
    ADD_FAILURE() << "cannot parse " << path << " as " << message.GetTypeName();
  }
  return message;
}

template v1::ListHostsResponse LoadResponse<v1::ListHostsResponse>(std::string_view);
template v1::ListAdaptersResponse LoadResponse<v1::ListAdaptersResponse>(std::string_view);
template v1::ListPoliciesResponse LoadResponse<v1::ListPoliciesResponse>(std::string_view);
template v1::ListEventsResponse LoadResponse<v1::ListEventsResponse>(std::string_view);
template v1::ExplainAdapterResponse LoadResponse<v1::ExplainAdapterResponse>(std::string_view);
template v1::GetStatusResponse LoadResponse<v1::GetStatusResponse>(std::string_view);
template v1::ListExperimentsResponse LoadResponse<v1::ListExperimentsResponse>(std::string_view);
template v1::ListHoldTuningsResponse LoadResponse<v1::ListHoldTuningsResponse>(std::string_view);

void ExpectGolden(std::string_view name, const std::string& actual) {
  const std::string path =
      rxfleet::testing::SourcePath(std::string("tests/fixtures/cli/golden/") + std::string(name));
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    auto written = rxfleet::testing::WriteTextFile(path, actual);
    EXPECT_TRUE(written.ok()) << written.ToString();
    return;
  }
  auto expected = rxfleet::testing::ReadTextFile(path);
  ASSERT_TRUE(expected.ok()) << "missing golden file " << path
                             << " (run the test with UPDATE_GOLDEN=1 to create it)";
  EXPECT_EQ(actual, *expected) << "output differs from " << path
                               << " (if the change is intended: UPDATE_GOLDEN=1, see docs/CLI.md)";
}

CapturedRun::CapturedRun(FleetClient* fleet, LocalStatusClient* local, std::string stdin_text)
    : in(std::move(stdin_text)) {
  ctx.streams = Streams{&in, &out, &err};
  ctx.now = kGoldenNow;
  ctx.stop = stop.get_token();
  ctx.fleet = [fleet]() -> absl::StatusOr<FleetClient*> {
    if (fleet == nullptr) return absl::InternalError("no fleet client in this test");
    return fleet;
  };
  ctx.local = [local]() -> absl::StatusOr<LocalStatusClient*> {
    if (local == nullptr) return absl::InternalError("no local client in this test");
    return local;
  };
}

}  // namespace rxfleet::cli::testing
