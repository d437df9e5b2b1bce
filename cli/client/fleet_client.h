#pragma once

#include <functional>
#include <stop_token>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rxfleet/v1/fleet_service.pb.h"

namespace rxfleet::cli {

/// The FleetService calls rxfleetctl makes, one method per RPC, with gRPC status codes carried
/// over unchanged into absl::Status codes (NOT_FOUND, ABORTED, INVALID_ARGUMENT, ...).
/// The gRPC implementation is in grpc_clients.h; tests use a mock with canned responses.
/// Every call honours the client's deadline and is cancelled (CANCELLED) when the client's
/// stop token is triggered.
class FleetClient {
 public:
  virtual ~FleetClient() = default;

  virtual absl::StatusOr<v1::ListHostsResponse> ListHosts(const v1::ListHostsRequest& request) = 0;
  virtual absl::StatusOr<v1::Host> GetHost(const v1::GetHostRequest& request) = 0;
  virtual absl::StatusOr<v1::ListAdaptersResponse> ListAdapters(
      const v1::ListAdaptersRequest& request) = 0;
  virtual absl::StatusOr<v1::Adapter> GetAdapter(const v1::GetAdapterRequest& request) = 0;
  virtual absl::StatusOr<v1::ApplyPolicyResponse> ApplyPolicy(
      const v1::ApplyPolicyRequest& request) = 0;
  virtual absl::StatusOr<v1::Policy> GetPolicy(const v1::GetPolicyRequest& request) = 0;
  virtual absl::StatusOr<v1::ListPoliciesResponse> ListPolicies(
      const v1::ListPoliciesRequest& request) = 0;
  virtual absl::StatusOr<v1::DeletePolicyResponse> DeletePolicy(
      const v1::DeletePolicyRequest& request) = 0;
  virtual absl::StatusOr<v1::ExplainAdapterResponse> ExplainAdapter(
      const v1::ExplainAdapterRequest& request) = 0;
  virtual absl::StatusOr<v1::CreateExperimentResponse> CreateExperiment(
      const v1::CreateExperimentRequest& request) = 0;
  virtual absl::StatusOr<v1::ListExperimentsResponse> ListExperiments(
      const v1::ListExperimentsRequest& request) = 0;
  virtual absl::StatusOr<v1::Experiment> GetExperiment(const v1::GetExperimentRequest& request) = 0;
  virtual absl::StatusOr<v1::Experiment> StopExperiment(
      const v1::StopExperimentRequest& request) = 0;
  virtual absl::StatusOr<v1::Experiment> DeleteExperiment(
      const v1::DeleteExperimentRequest& request) = 0;
  virtual absl::StatusOr<v1::ExperimentReport> GetExperimentReport(
      const v1::GetExperimentReportRequest& request) = 0;
  virtual absl::StatusOr<v1::PromoteExperimentResponse> PromoteExperiment(
      const v1::PromoteExperimentRequest& request) = 0;
  virtual absl::StatusOr<v1::CreateHoldTuningResponse> CreateHoldTuning(
      const v1::CreateHoldTuningRequest& request) = 0;
  virtual absl::StatusOr<v1::ListHoldTuningsResponse> ListHoldTunings(
      const v1::ListHoldTuningsRequest& request) = 0;
  virtual absl::StatusOr<v1::HoldTuning> GetHoldTuning(const v1::GetHoldTuningRequest& request) = 0;
  virtual absl::StatusOr<v1::ApproveHoldTuningResponse> ApproveHoldTuning(
      const v1::ApproveHoldTuningRequest& request) = 0;
  virtual absl::StatusOr<v1::HoldTuning> StopHoldTuning(
      const v1::StopHoldTuningRequest& request) = 0;
  virtual absl::StatusOr<v1::HoldTuning> DeleteHoldTuning(
      const v1::DeleteHoldTuningRequest& request) = 0;
  virtual absl::StatusOr<v1::ListEventsResponse> ListEvents(
      const v1::ListEventsRequest& request) = 0;

  /// Streams events to `on_event` until the server ends the stream or `stop` is triggered.
  /// No deadline applies to the stream (only to connecting). Returns OK when stopped through
  /// `stop`, otherwise the status the stream ended with (UNAVAILABLE on server shutdown,
  /// OUT_OF_RANGE for a resume version the server no longer holds).
  virtual absl::Status WatchEvents(const v1::WatchEventsRequest& request,
                                   const std::function<void(const v1::Event&)>& on_event,
                                   std::stop_token stop) = 0;
};

}  // namespace rxfleet::cli
