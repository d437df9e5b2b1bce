#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "cli/client/fleet_client.h"
#include "cli/client/local_status_client.h"
#include "cli/commands/command.h"
#include "gmock/gmock.h"

namespace rxfleet::cli::testing {

/// "Now" of every golden test: 2026-04-12T12:00:00Z (the fixtures' times are relative to it).
inline const absl::Time kGoldenNow = absl::FromUnixSeconds(1775995200);

class MockFleetClient : public FleetClient {
 public:
  MOCK_METHOD(absl::StatusOr<v1::ListHostsResponse>, ListHosts, (const v1::ListHostsRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::Host>, GetHost, (const v1::GetHostRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListAdaptersResponse>, ListAdapters,
              (const v1::ListAdaptersRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::Adapter>, GetAdapter, (const v1::GetAdapterRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ApplyPolicyResponse>, ApplyPolicy, (const v1::ApplyPolicyRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::Policy>, GetPolicy, (const v1::GetPolicyRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListPoliciesResponse>, ListPolicies,
              (const v1::ListPoliciesRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::DeletePolicyResponse>, DeletePolicy,
              (const v1::DeletePolicyRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ExplainAdapterResponse>, ExplainAdapter,
              (const v1::ExplainAdapterRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::CreateExperimentResponse>, CreateExperiment,
              (const v1::CreateExperimentRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListExperimentsResponse>, ListExperiments,
              (const v1::ListExperimentsRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::Experiment>, GetExperiment, (const v1::GetExperimentRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::Experiment>, StopExperiment, (const v1::StopExperimentRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::Experiment>, DeleteExperiment,
              (const v1::DeleteExperimentRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ExperimentReport>, GetExperimentReport,
              (const v1::GetExperimentReportRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::PromoteExperimentResponse>, PromoteExperiment,
              (const v1::PromoteExperimentRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::CreateHoldTuningResponse>, CreateHoldTuning,
              (const v1::CreateHoldTuningRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListHoldTuningsResponse>, ListHoldTunings,
              (const v1::ListHoldTuningsRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::HoldTuning>, GetHoldTuning, (const v1::GetHoldTuningRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::ApproveHoldTuningResponse>, ApproveHoldTuning,
              (const v1::ApproveHoldTuningRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::HoldTuning>, StopHoldTuning, (const v1::StopHoldTuningRequest&),
              (override));
  MOCK_METHOD(absl::StatusOr<v1::HoldTuning>, DeleteHoldTuning,
              (const v1::DeleteHoldTuningRequest&), (override));
  MOCK_METHOD(absl::StatusOr<v1::ListEventsResponse>, ListEvents, (const v1::ListEventsRequest&),
              (override));
  MOCK_METHOD(absl::Status, WatchEvents,
              (const v1::WatchEventsRequest&, const std::function<void(const v1::Event&)>&,
               std::stop_token),
              (override));
};

class MockLocalStatusClient : public LocalStatusClient {
 public:
  MOCK_METHOD(absl::StatusOr<v1::GetStatusResponse>, GetStatus, (const v1::GetStatusRequest&),
              (override));
};

/// Parses tests/fixtures/cli/responses/NAME.textproto into a T; fails the test (and returns
/// an empty T) if it cannot be read or parsed.
template <typename T>
T LoadResponse(std::string_view name);

/// Compares `actual` with tests/fixtures/cli/golden/NAME. With UPDATE_GOLDEN=1 in the
/// environment the file is (re)written from `actual` instead, and the test passes.
void ExpectGolden(std::string_view name, const std::string& actual);

/// A CommandContext writing to string streams, with kGoldenNow and the given clients.
struct CapturedRun {
  explicit CapturedRun(FleetClient* fleet = nullptr, LocalStatusClient* local = nullptr,
                       std::string stdin_text = "");
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  std::stop_source stop;
  CommandContext ctx;
};

}  // namespace rxfleet::cli::testing
