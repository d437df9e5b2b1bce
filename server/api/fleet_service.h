#pragma once

// FleetService on the gRPC callback API. Unary calls are queued on a WorkQueue (they may write
// SQLite with fsync) and finish from there, so callback threads never block; when the queue is
// full a call fails with RESOURCE_EXHAUSTED. WatchEvents is a callback server-streaming reactor
// with a capped per-watch queue: a watcher that falls more than kMaxWatchBacklog events behind
// is ended with RESOURCE_EXHAUSTED (list, then watch again). Experiment RPCs are served by the
// ExperimentController (server/experiments/controller.h). Every call is authorized first (role
// table in server/auth/authorizer.cc).

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "server/api/fleet_api.h"
#include "server/api/status.h"
#include "server/api/work_queue.h"
#include "server/auth/authorizer.h"
#include "server/registry/event_log.h"
#include "server/store/token_store.h"

namespace rxfleet::server {

class ExperimentController;
class WatchReactor;

/// Events a watcher may have queued before it is ended.
inline constexpr size_t kMaxWatchBacklog = 1024;

class FleetServiceImpl final : public v1::FleetService::CallbackService {
 public:
  /// `api`, `events`, `work`, `auth`, `tokens` and `experiments` must outlive the service (and
  /// the gRPC server). Every call is authorized by `auth` (server/auth/authorizer.h) before it
  /// runs; `tokens` is null in insecure mode (the token RPCs then answer FAILED_PRECONDITION).
  /// Without `experiments` the experiment RPCs answer UNIMPLEMENTED.
  FleetServiceImpl(FleetApi* api, EventLog* events, WorkQueue* work, Authorizer* auth,
                   TokenStore* tokens, ExperimentController* experiments = nullptr);
  ~FleetServiceImpl() override;

  /// Ends every watch with UNAVAILABLE("server shutting down"); new watches are refused.
  void Shutdown();

  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* context,
                                      const v1::ListHostsRequest* request,
                                      v1::ListHostsResponse* response) override;
  grpc::ServerUnaryReactor* GetHost(grpc::CallbackServerContext* context,
                                    const v1::GetHostRequest* request, v1::Host* response) override;
  grpc::ServerUnaryReactor* ListAdapters(grpc::CallbackServerContext* context,
                                         const v1::ListAdaptersRequest* request,
                                         v1::ListAdaptersResponse* response) override;
  grpc::ServerUnaryReactor* GetAdapter(grpc::CallbackServerContext* context,
                                       const v1::GetAdapterRequest* request,
                                       v1::Adapter* response) override;
  grpc::ServerUnaryReactor* ApplyPolicy(grpc::CallbackServerContext* context,
                                        const v1::ApplyPolicyRequest* request,
                                        v1::ApplyPolicyResponse* response) override;
  grpc::ServerUnaryReactor* GetPolicy(grpc::CallbackServerContext* context,
                                      const v1::GetPolicyRequest* request,
                                      v1::Policy* response) override;
  grpc::ServerUnaryReactor* ListPolicies(grpc::CallbackServerContext* context,
                                         const v1::ListPoliciesRequest* request,
                                         v1::ListPoliciesResponse* response) override;
  grpc::ServerUnaryReactor* DeletePolicy(grpc::CallbackServerContext* context,
                                         const v1::DeletePolicyRequest* request,
                                         v1::DeletePolicyResponse* response) override;
  grpc::ServerUnaryReactor* ExplainAdapter(grpc::CallbackServerContext* context,
                                           const v1::ExplainAdapterRequest* request,
                                           v1::ExplainAdapterResponse* response) override;
  grpc::ServerUnaryReactor* CreateExperiment(grpc::CallbackServerContext* context,
                                             const v1::CreateExperimentRequest* request,
                                             v1::CreateExperimentResponse* response) override;
  grpc::ServerUnaryReactor* ListExperiments(grpc::CallbackServerContext* context,
                                            const v1::ListExperimentsRequest* request,
                                            v1::ListExperimentsResponse* response) override;
  grpc::ServerUnaryReactor* GetExperiment(grpc::CallbackServerContext* context,
                                          const v1::GetExperimentRequest* request,
                                          v1::Experiment* response) override;
  grpc::ServerUnaryReactor* DeleteExperiment(grpc::CallbackServerContext* context,
                                             const v1::DeleteExperimentRequest* request,
                                             v1::Experiment* response) override;
  grpc::ServerUnaryReactor* StopExperiment(grpc::CallbackServerContext* context,
                                           const v1::StopExperimentRequest* request,
                                           v1::Experiment* response) override;
  grpc::ServerUnaryReactor* GetExperimentReport(grpc::CallbackServerContext* context,
                                                const v1::GetExperimentReportRequest* request,
                                                v1::ExperimentReport* response) override;
  grpc::ServerUnaryReactor* PromoteExperiment(grpc::CallbackServerContext* context,
                                              const v1::PromoteExperimentRequest* request,
                                              v1::PromoteExperimentResponse* response) override;
  grpc::ServerUnaryReactor* CreateHoldTuning(grpc::CallbackServerContext* context,
                                             const v1::CreateHoldTuningRequest* request,
                                             v1::CreateHoldTuningResponse* response) override;
  grpc::ServerUnaryReactor* ListHoldTunings(grpc::CallbackServerContext* context,
                                            const v1::ListHoldTuningsRequest* request,
                                            v1::ListHoldTuningsResponse* response) override;
  grpc::ServerUnaryReactor* GetHoldTuning(grpc::CallbackServerContext* context,
                                          const v1::GetHoldTuningRequest* request,
                                          v1::HoldTuning* response) override;
  grpc::ServerUnaryReactor* ApproveHoldTuning(grpc::CallbackServerContext* context,
                                              const v1::ApproveHoldTuningRequest* request,
                                              v1::ApproveHoldTuningResponse* response) override;
  grpc::ServerUnaryReactor* StopHoldTuning(grpc::CallbackServerContext* context,
                                           const v1::StopHoldTuningRequest* request,
                                           v1::HoldTuning* response) override;
  grpc::ServerUnaryReactor* DeleteHoldTuning(grpc::CallbackServerContext* context,
                                             const v1::DeleteHoldTuningRequest* request,
                                             v1::HoldTuning* response) override;
  grpc::ServerUnaryReactor* ListEvents(grpc::CallbackServerContext* context,
                                       const v1::ListEventsRequest* request,
                                       v1::ListEventsResponse* response) override;
  grpc::ServerWriteReactor<v1::Event>* WatchEvents(grpc::CallbackServerContext* context,
                                                   const v1::WatchEventsRequest* request) override;
  // Token administration (server/api/token_rpcs.cc).
  grpc::ServerUnaryReactor* CreateToken(grpc::CallbackServerContext* context,
                                        const v1::CreateTokenRequest* request,
                                        v1::CreateTokenResponse* response) override;
  grpc::ServerUnaryReactor* ListTokens(grpc::CallbackServerContext* context,
                                       const v1::ListTokensRequest* request,
                                       v1::ListTokensResponse* response) override;
  grpc::ServerUnaryReactor* RevokeToken(grpc::CallbackServerContext* context,
                                        const v1::RevokeTokenRequest* request,
                                        v1::RevokeTokenResponse* response) override;

 private:
  friend class WatchReactor;

  /// Queues `fn` on the work queue after authorizing the caller for `method` (pass __func__:
  /// the FleetService method name, looked up in RequiredRole()). `fn` returns
  /// StatusOr<Response> and takes either no argument or the authenticated `const Caller&`.
  /// `dry_run`: the request's dry_run field (a dry run may need a lower role).
  template <typename Response, typename Fn>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, std::string_view method,
                                Response* response, Fn fn, bool dry_run = false);
  /// Records an audit event for a change to a token.
  void AuditToken(const Caller& caller, std::string_view action, std::string_view name,
                  const absl::Status& result);
  /// Records an audit event for a change to an experiment (create, stop, promote), with the
  /// resource versions before and after and the result.
  void AuditExperiment(const Caller& caller, std::string_view action, std::string_view name,
                       std::string_view detail, std::string_view old_version,
                       std::string_view new_version, bool dry_run, const absl::Status& result);
  /// Run() of `fn(controller)` or `fn(controller, caller)`, or UNIMPLEMENTED without a
  /// controller (after authorization).
  template <typename Response, typename Fn>
  grpc::ServerUnaryReactor* RunExperiment(grpc::CallbackServerContext* context,
                                          std::string_view method, Response* response, Fn fn,
                                          bool dry_run = false);
  void Forget(WatchReactor* watch);

  FleetApi* const api_;
  EventLog* const events_;
  WorkQueue* const work_;
  Authorizer* const auth_;
  TokenStore* const tokens_;
  ExperimentController* const experiments_;

  absl::Mutex watches_mu_;
  std::set<WatchReactor*> watches_ ABSL_GUARDED_BY(watches_mu_);
  bool shutting_down_ ABSL_GUARDED_BY(watches_mu_) = false;
};

template <typename Response, typename Fn>
grpc::ServerUnaryReactor* FleetServiceImpl::Run(grpc::CallbackServerContext* context,
                                                std::string_view method, Response* response, Fn fn,
                                                bool dry_run) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The context stays valid until Finish; the token lookup reads SQLite, so it runs here on
  // the work queue rather than on a callback thread.
  const bool queued = work_->Submit(
      [this, context, method, reactor, response, dry_run, fn = std::move(fn)]() mutable {
        absl::StatusOr<Principal> principal = auth_->Authorize(*context, method, dry_run);
        absl::StatusOr<Response> result = absl::UnknownError("not run");
        if (!principal.ok()) {
          result = principal.status();
        } else if constexpr (std::is_invocable_v<Fn&, const Caller&>) {
          result = fn(Caller{principal->actor});
        } else {
          result = fn();
        }
        if (result.ok()) *response = *std::move(result);
        reactor->Finish(ToGrpcStatus(result.status()));
      });
  if (!queued) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "the server is busy with other requests; retry shortly"));
  }
  return reactor;
}

}  // namespace rxfleet::server
