#include "server/api/fleet_service.h"

#include <deque>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto/convert.h"
#include "common/string_view_compat.h"
#include "server/api/family_guard.h"
#include "server/api/finish_gate.h"
#include "server/api/status.h"
#include "server/experiments/controller.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

}  // namespace

// One WatchEvents call. Events arrive from the event log (under its lock) and are queued here;
// one write is in flight at a time. Lifetime: deleted in OnDone, after unregistering from the
// event log (which waits for a callback in progress) and from the service.
class WatchReactor final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  WatchReactor(FleetServiceImpl* service, EventLog* events) : service_(service), events_(events) {}

  // Registers with the event log (replaying from the requested version). Runs inside the
  // WatchEvents handler; End() before it completes is deferred until it does.
  void Start(const v1::WatchEventsRequest& request) {
    {
      absl::MutexLock lock(&mu_);
      if (gate_.finishing()) {  // refused before it started
        FinishIf(gate_.Start());
        return;
      }
    }
    std::optional<uint64_t> after;
    absl::Status status = absl::OkStatus();
    if (!request.resource_version().empty()) {
      uint64_t version = 0;
      if (absl::SimpleAtoi(request.resource_version(), &version)) {
        after = version;
      } else {
        status = absl::InvalidArgumentError(absl::StrCat("resource_version '",
                                                         request.resource_version(),
                                                         "' is not an event resource version"));
      }
    }
    std::optional<uint64_t> watch_id;
    if (status.ok()) {
      absl::StatusOr<uint64_t> id =
          events_->Watch(request.filter(), after, [this](const v1::Event& e) { Enqueue(e); });
      if (id.ok()) {
        watch_id = *id;
      } else {
        status = id.status();
      }
    }
    absl::MutexLock lock(&mu_);
    watch_id_ = watch_id;
    if (!status.ok()) gate_.Request(ToGrpcStatus(status));
    // Finishes now if the start failed or End() arrived while starting.
    FinishIf(gate_.Start());
  }

  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    FinishIf(gate_.Request(status));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty()) queue_.pop_front();
    if (FinishIf(gate_.WriteDone(ok)) || gate_.finishing()) return;
    if (!queue_.empty()) StartWriteLocked();
  }

  void OnCancel() override { End(grpc::Status::CANCELLED); }

  void OnDone() override {
    std::optional<uint64_t> watch_id;
    {
      absl::MutexLock lock(&mu_);
      watch_id = watch_id_;
    }
    if (watch_id.has_value()) events_->Unwatch(*watch_id);
    service_->Forget(this);
    delete this;
  }

 private:
  void Enqueue(const v1::Event& event) {
    absl::MutexLock lock(&mu_);
    if (gate_.finishing()) return;
    if (queue_.size() >= kMaxWatchBacklog) {
      FinishIf(gate_.Request(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       absl::StrCat("the watch fell more than ", kMaxWatchBacklog,
                                    " events behind; list the events, then watch again"))));
      return;
    }
    queue_.push_back(event);
    if (!gate_.writing()) StartWriteLocked();
  }

  void StartWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    gate_.WriteStarted();
    StartWrite(&queue_.front());
  }

  // Finishes when the gate says so; returns `now`.
  bool FinishIf(bool now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!now) return false;
    queue_.clear();
    Finish(gate_.status());
    return true;
  }

  FleetServiceImpl* const service_;
  EventLog* const events_;
  absl::Mutex mu_;
  std::deque<v1::Event> queue_ ABSL_GUARDED_BY(mu_);  // front = the write in flight
  FinishGate gate_ ABSL_GUARDED_BY(mu_){/*started=*/false};
  std::optional<uint64_t> watch_id_ ABSL_GUARDED_BY(mu_);
};

FleetServiceImpl::FleetServiceImpl(FleetApi* api, EventLog* events, WorkQueue* work,
                                   Authorizer* auth, TokenStore* tokens,
                                   ExperimentController* experiments)
    : api_(api),
      events_(events),
      work_(work),
      auth_(auth),
      tokens_(tokens),
      experiments_(experiments) {}

FleetServiceImpl::~FleetServiceImpl() = default;

template <typename Response, typename Fn>
grpc::ServerUnaryReactor* FleetServiceImpl::RunExperiment(grpc::CallbackServerContext* context,
                                                          std::string_view method,
                                                          Response* response, Fn fn, bool dry_run) {
  return Run(
      context, method, response,
      [this, fn](const Caller& caller) -> absl::StatusOr<Response> {
        if (experiments_ == nullptr) {
          return absl::UnimplementedError("experiments are not enabled in this server");
        }
        if constexpr (std::is_invocable_v<Fn&, ExperimentController&, const Caller&>) {
          return fn(*experiments_, caller);
        } else {
          return fn(*experiments_);
        }
      },
      dry_run);
}

void FleetServiceImpl::AuditExperiment(const Caller& caller, std::string_view action,
                                       std::string_view name, std::string_view detail,
                                       std::string_view old_version, std::string_view new_version,
                                       bool dry_run, const absl::Status& result) {
  RecordAudit(*events_, caller, "Experiment", action, name, detail, old_version, new_version,
              dry_run, result);
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListHosts(grpc::CallbackServerContext* context,
                                                      const v1::ListHostsRequest* request,
                                                      v1::ListHostsResponse* response) {
  return Run(context, __func__, response, [this, request] { return api_->ListHosts(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::GetHost(grpc::CallbackServerContext* context,
                                                    const v1::GetHostRequest* request,
                                                    v1::Host* response) {
  return Run(context, __func__, response, [this, request] { return api_->GetHost(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListAdapters(grpc::CallbackServerContext* context,
                                                         const v1::ListAdaptersRequest* request,
                                                         v1::ListAdaptersResponse* response) {
  return Run(context, __func__, response, [this, request] { return api_->ListAdapters(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::GetAdapter(grpc::CallbackServerContext* context,
                                                       const v1::GetAdapterRequest* request,
                                                       v1::Adapter* response) {
  return Run(context, __func__, response, [this, request] { return api_->GetAdapter(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::ApplyPolicy(grpc::CallbackServerContext* context,
                                                        const v1::ApplyPolicyRequest* request,
                                                        v1::ApplyPolicyResponse* response) {
  return Run(
      context, __func__, response,
      [this, request](const Caller& caller) { return api_->ApplyPolicy(*request, caller); },
      request->dry_run());
}

grpc::ServerUnaryReactor* FleetServiceImpl::GetPolicy(grpc::CallbackServerContext* context,
                                                      const v1::GetPolicyRequest* request,
                                                      v1::Policy* response) {
  return Run(context, __func__, response, [this, request] { return api_->GetPolicy(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListPolicies(grpc::CallbackServerContext* context,
                                                         const v1::ListPoliciesRequest* request,
                                                         v1::ListPoliciesResponse* response) {
  return Run(context, __func__, response, [this, request] { return api_->ListPolicies(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::DeletePolicy(grpc::CallbackServerContext* context,
                                                         const v1::DeletePolicyRequest* request,
                                                         v1::DeletePolicyResponse* response) {
  return Run(
      context, __func__, response,
      [this, request](const Caller& caller) { return api_->DeletePolicy(*request, caller); },
      request->dry_run());
}

grpc::ServerUnaryReactor* FleetServiceImpl::ExplainAdapter(grpc::CallbackServerContext* context,
                                                           const v1::ExplainAdapterRequest* request,
                                                           v1::ExplainAdapterResponse* response) {
  return Run(context, __func__, response,
             [this, request] { return api_->ExplainAdapter(*request); });
}

grpc::ServerUnaryReactor* FleetServiceImpl::CreateExperiment(
    grpc::CallbackServerContext* context, const v1::CreateExperimentRequest* request,
    v1::CreateExperimentResponse* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        // Arms always set a hold: observe-only adapters are refused here (dry runs list them
        // as ineligible instead). An invalid selector is the controller's to report.
        const std::string name = request->experiment().metadata().name();
        absl::StatusOr<common::Selector> selector =
            common::SelectorFromProto(request->experiment().spec().selector());
        const std::vector<v1::Adapter> registered = api_->RegisteredAdapters();
        if (selector.ok() && !request->dry_run()) {
          if (absl::Status refused = RefuseSettingsOnObserveOnly(
                  absl::StrCat("experiment '", name, "'"), *selector, registered);
              !refused.ok()) {
            AuditExperiment(caller, "CreateExperiment", name, "", "", "", false, refused);
            return absl::StatusOr<v1::CreateExperimentResponse>(refused);
          }
        }
        absl::StatusOr<v1::CreateExperimentResponse> created =
            experiments.CreateExperiment(*request);
        if (created.ok() && selector.ok() && request->dry_run()) {
          // The controller lists adapters it does not manage as ineligible; name the family's
          // reason for observe-only ones.
          for (const v1::Adapter* adapter : ObserveOnlyMatches(*selector, registered)) {
            for (v1::IneligibleAdapter& entry : *created->mutable_ineligible_adapters()) {
              if (entry.adapter().name() == adapter->metadata().name() &&
                  entry.adapter().host_id() == adapter->host_id()) {
                entry.set_reason(ObserveOnlyReason(*adapter));
              }
            }
          }
        }
        AuditExperiment(caller, "CreateExperiment", request->experiment().metadata().name(), "", "",
                        created.ok() ? created->experiment().metadata().resource_version() : "",
                        request->dry_run(), created.status());
        return created;
      },
      request->dry_run());
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListExperiments(
    grpc::CallbackServerContext* context, const v1::ListExperimentsRequest* request,
    v1::ListExperimentsResponse* response) {
  return RunExperiment(context, __func__, response, [request](ExperimentController& experiments) {
    return experiments.ListExperiments(*request);
  });
}

grpc::ServerUnaryReactor* FleetServiceImpl::GetExperiment(grpc::CallbackServerContext* context,
                                                          const v1::GetExperimentRequest* request,
                                                          v1::Experiment* response) {
  return RunExperiment(context, __func__, response, [request](ExperimentController& experiments) {
    return experiments.GetExperiment(*request);
  });
}

grpc::ServerUnaryReactor* FleetServiceImpl::StopExperiment(grpc::CallbackServerContext* context,
                                                           const v1::StopExperimentRequest* request,
                                                           v1::Experiment* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        absl::StatusOr<v1::Experiment> stopped = experiments.StopExperiment(*request);
        AuditExperiment(caller, "StopExperiment", request->name(),
                        request->reason().empty() ? "" : absl::StrCat(" (", request->reason(), ")"),
                        request->resource_version(),
                        stopped.ok() ? stopped->metadata().resource_version() : "", false,
                        stopped.status());
        return stopped;
      });
}

grpc::ServerUnaryReactor* FleetServiceImpl::DeleteExperiment(
    grpc::CallbackServerContext* context, const v1::DeleteExperimentRequest* request,
    v1::Experiment* response) {
  return RunExperiment(context, __func__, response,
                       [this, request](ExperimentController& experiments, const Caller& caller) {
                         absl::StatusOr<v1::Experiment> deleted =
                             experiments.DeleteExperiment(*request);
                         AuditExperiment(caller, "DeleteExperiment", request->name(), "",
                                         deleted.ok() ? deleted->metadata().resource_version() : "",
                                         "", false, deleted.status());
                         return deleted;
                       });
}

grpc::ServerUnaryReactor* FleetServiceImpl::GetExperimentReport(
    grpc::CallbackServerContext* context, const v1::GetExperimentReportRequest* request,
    v1::ExperimentReport* response) {
  return RunExperiment(context, __func__, response, [request](ExperimentController& experiments) {
    return experiments.GetExperimentReport(*request);
  });
}

grpc::ServerUnaryReactor* FleetServiceImpl::PromoteExperiment(
    grpc::CallbackServerContext* context, const v1::PromoteExperimentRequest* request,
    v1::PromoteExperimentResponse* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        absl::StatusOr<v1::PromoteExperimentResponse> promoted =
            experiments.PromoteExperiment(*request, caller.actor);
        const std::string detail = absl::StrCat(
            " arm ", request->arm(),
            promoted.ok() ? absl::StrCat(" as policy ", promoted->policy().metadata().name()) : "");
        AuditExperiment(caller, "PromoteExperiment", request->name(), detail, "",
                        promoted.ok() ? promoted->policy().metadata().resource_version() : "",
                        request->dry_run(), promoted.status());
        return promoted;
      },
      request->dry_run());
}

grpc::ServerUnaryReactor* FleetServiceImpl::CreateHoldTuning(
    grpc::CallbackServerContext* context, const v1::CreateHoldTuningRequest* request,
    v1::CreateHoldTuningResponse* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        // Every candidate is a hold: observe-only adapters are refused as for experiments.
        const std::string name = request->tuning().metadata().name();
        absl::StatusOr<common::Selector> selector =
            common::SelectorFromProto(request->tuning().spec().selector());
        if (selector.ok()) {
          if (absl::Status refused = RefuseSettingsOnObserveOnly(
                  absl::StrCat("hold tuning '", name, "'"), *selector, api_->RegisteredAdapters());
              !refused.ok()) {
            RecordAudit(*events_, caller, "HoldTuning", "CreateHoldTuning", name, "", "", "",
                        request->dry_run(), refused);
            return absl::StatusOr<v1::CreateHoldTuningResponse>(refused);
          }
        }
        absl::StatusOr<v1::CreateHoldTuningResponse> created =
            experiments.CreateHoldTuning(*request);
        RecordAudit(*events_, caller, "HoldTuning", "CreateHoldTuning", name, "", "",
                    created.ok() ? created->tuning().metadata().resource_version() : "",
                    request->dry_run(), created.status());
        return created;
      },
      request->dry_run());
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListHoldTunings(
    grpc::CallbackServerContext* context, const v1::ListHoldTuningsRequest* request,
    v1::ListHoldTuningsResponse* response) {
  return RunExperiment(context, __func__, response, [request](ExperimentController& experiments) {
    return experiments.ListHoldTunings(*request);
  });
}

grpc::ServerUnaryReactor* FleetServiceImpl::GetHoldTuning(grpc::CallbackServerContext* context,
                                                          const v1::GetHoldTuningRequest* request,
                                                          v1::HoldTuning* response) {
  return RunExperiment(context, __func__, response, [request](ExperimentController& experiments) {
    return experiments.GetHoldTuning(*request);
  });
}

grpc::ServerUnaryReactor* FleetServiceImpl::ApproveHoldTuning(
    grpc::CallbackServerContext* context, const v1::ApproveHoldTuningRequest* request,
    v1::ApproveHoldTuningResponse* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        absl::StatusOr<v1::ApproveHoldTuningResponse> approved =
            experiments.ApproveHoldTuning(*request, caller.actor);
        std::vector<std::string> policies;
        if (approved.ok()) {
          for (const v1::Policy& p : approved->policies()) policies.push_back(p.metadata().name());
        }
        RecordAudit(*events_, caller, "HoldTuning", "ApproveHoldTuning", request->name(),
                    policies.empty() ? "" : absl::StrCat(" as ", absl::StrJoin(policies, ", ")),
                    request->resource_version(),
                    approved.ok() ? approved->tuning().metadata().resource_version() : "",
                    request->dry_run(), approved.status());
        return approved;
      },
      request->dry_run());
}

grpc::ServerUnaryReactor* FleetServiceImpl::StopHoldTuning(grpc::CallbackServerContext* context,
                                                           const v1::StopHoldTuningRequest* request,
                                                           v1::HoldTuning* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        absl::StatusOr<v1::HoldTuning> stopped = experiments.StopHoldTuning(*request);
        RecordAudit(*events_, caller, "HoldTuning", "StopHoldTuning", request->name(),
                    request->reason().empty() ? "" : absl::StrCat(" (", request->reason(), ")"),
                    request->resource_version(),
                    stopped.ok() ? stopped->metadata().resource_version() : "", false,
                    stopped.status());
        return stopped;
      });
}

grpc::ServerUnaryReactor* FleetServiceImpl::DeleteHoldTuning(
    grpc::CallbackServerContext* context, const v1::DeleteHoldTuningRequest* request,
    v1::HoldTuning* response) {
  return RunExperiment(
      context, __func__, response,
      [this, request](ExperimentController& experiments, const Caller& caller) {
        absl::StatusOr<v1::HoldTuning> deleted = experiments.DeleteHoldTuning(*request);
        RecordAudit(*events_, caller, "HoldTuning", "DeleteHoldTuning", request->name(), "",
                    deleted.ok() ? deleted->metadata().resource_version() : "", "", false,
                    deleted.status());
        return deleted;
      });
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListEvents(grpc::CallbackServerContext* context,
                                                       const v1::ListEventsRequest* request,
                                                       v1::ListEventsResponse* response) {
  return Run(context, __func__, response, [this, request] { return api_->ListEvents(*request); });
}

grpc::ServerWriteReactor<v1::Event>* FleetServiceImpl::WatchEvents(
    grpc::CallbackServerContext* context, const v1::WatchEventsRequest* request) {
  auto* watch = new WatchReactor(this, events_);
  bool refused = false;
  {
    absl::MutexLock lock(&watches_mu_);
    refused = shutting_down_;
    watches_.insert(watch);
  }
  if (refused) watch->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  if (absl::StatusOr<Principal> principal = auth_->Authorize(*context, __func__); !principal.ok()) {
    watch->End(ToGrpcStatus(principal.status()));
  }
  watch->Start(*request);
  return watch;
}

void FleetServiceImpl::Forget(WatchReactor* watch) {
  absl::MutexLock lock(&watches_mu_);
  watches_.erase(watch);
}

void FleetServiceImpl::Shutdown() {
  absl::MutexLock lock(&watches_mu_);
  shutting_down_ = true;
  for (WatchReactor* watch : watches_) {
    watch->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }
}

}  // namespace rxfleet::server
