#pragma once

// FleetService on the gRPC callback API. Unary calls are queued on a WorkQueue (they may write
// SQLite with fsync) and finish from there, so callback threads never block; when the queue is
// full a call fails with RESOURCE_EXHAUSTED. WatchEvents is a callback server-streaming reactor
// with a capped per-watch queue: a watcher that falls more than kMaxWatchBacklog events behind
// is ended with RESOURCE_EXHAUSTED (list, then watch again). Experiment RPCs are served by the
// ExperimentController (server/experiments/controller.h).

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "server/api/fleet_api.h"
#include "server/api/work_queue.h"
#include "server/registry/event_log.h"

namespace rxfleet::server {

class ExperimentController;
class WatchReactor;

/// Events a watcher may have queued before it is ended.
inline constexpr size_t kMaxWatchBacklog = 1024;

class FleetServiceImpl final : public v1::FleetService::CallbackService {
 public:
  /// `api`, `events`, `work` and `experiments` must outlive the service (and the gRPC
  /// server). Without `experiments` the experiment RPCs answer UNIMPLEMENTED.
  FleetServiceImpl(FleetApi* api, EventLog* events, WorkQueue* work,
                   ExperimentController* experiments = nullptr);
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
  grpc::ServerUnaryReactor* StopExperiment(grpc::CallbackServerContext* context,
                                           const v1::StopExperimentRequest* request,
                                           v1::Experiment* response) override;
  grpc::ServerUnaryReactor* GetExperimentReport(grpc::CallbackServerContext* context,
                                                const v1::GetExperimentReportRequest* request,
                                                v1::ExperimentReport* response) override;
  grpc::ServerUnaryReactor* PromoteExperiment(grpc::CallbackServerContext* context,
                                              const v1::PromoteExperimentRequest* request,
                                              v1::PromoteExperimentResponse* response) override;
  grpc::ServerUnaryReactor* ListEvents(grpc::CallbackServerContext* context,
                                       const v1::ListEventsRequest* request,
                                       v1::ListEventsResponse* response) override;
  grpc::ServerWriteReactor<v1::Event>* WatchEvents(grpc::CallbackServerContext* context,
                                                   const v1::WatchEventsRequest* request) override;

 private:
  friend class WatchReactor;

  template <typename Response, typename Fn>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, Response* response, Fn fn);
  /// Runs `fn(controller)` on the work queue, or answers UNIMPLEMENTED without a controller.
  template <typename Response, typename Fn>
  grpc::ServerUnaryReactor* RunExperiment(grpc::CallbackServerContext* context, Response* response,
                                          Fn fn);
  void Forget(WatchReactor* watch);

  FleetApi* const api_;
  EventLog* const events_;
  WorkQueue* const work_;
  ExperimentController* const experiments_;

  absl::Mutex watches_mu_;
  std::set<WatchReactor*> watches_ ABSL_GUARDED_BY(watches_mu_);
  bool shutting_down_ ABSL_GUARDED_BY(watches_mu_) = false;
};

}  // namespace rxfleet::server
