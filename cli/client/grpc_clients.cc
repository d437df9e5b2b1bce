#include "cli/client/grpc_clients.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/string_view_compat.h"
#include "common/tls_diagnosis.h"
#include "grpcpp/grpcpp.h"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "rxfleet/v1/local_status.grpc.pb.h"
#include "rxfleet/version.h"

namespace rxfleet::cli {
namespace {

// What the caller sees when a call fails: gRPC codes map 1:1 onto absl codes; connection
// failures get a message naming the peer; a stop request becomes CANCELLED "interrupted".
absl::Status ToAbsl(const grpc::Status& status, absl::string_view peer, absl::Duration timeout,
                    bool stopped) {
  if (status.ok()) return absl::OkStatus();
  if (stopped && status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::CancelledError("interrupted");
  }
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // The server answered, but its PostgreSQL database did not (server/store/pq.h names it).
      if (absl::StrContains(status.error_message(), "(PostgreSQL ")) {
        return absl::Status(code, absl::StrCat(peer, " answered but cannot reach its database: ",
                                               status.error_message()));
      }
      return absl::Status(code, absl::StrCat("cannot reach ", peer, ": ", status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::Status(
          code, absl::StrCat("no answer from ", peer, " within ", absl::FormatDuration(timeout),
                             " (--timeout): ", status.error_message()));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::Status(code,
                          absl::StrCat(peer, " rejected the credentials: ", status.error_message(),
                                       " (set --token or RXFLEET_TOKEN)"));
    default:
      return absl::Status(code, status.error_message());
  }
}

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetUserAgentPrefix(absl::StrCat("rxfleetctl/", kVersion));
  return args;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot be read"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class GrpcFleetClient final : public FleetClient {
 public:
  GrpcFleetClient(std::shared_ptr<grpc::Channel> channel, ConnectionSettings settings,
                  common::TlsClientSetup tls, std::stop_token stop)
      : tls_(std::move(tls)),
        channel_(channel),
        stub_(v1::FleetService::NewStub(channel)),
        settings_(std::move(settings)),
        peer_(absl::StrCat("rxfleet-server at ", settings_.server, " (server address from ",
                           settings_.server_origin, ")")),
        stop_(std::move(stop)) {}

  absl::StatusOr<v1::ListHostsResponse> ListHosts(const v1::ListHostsRequest& request) override {
    return Unary<v1::ListHostsResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ListHosts(ctx, request, response);
    });
  }
  absl::StatusOr<v1::Host> GetHost(const v1::GetHostRequest& request) override {
    return Unary<v1::Host>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->GetHost(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ListAdaptersResponse> ListAdapters(
      const v1::ListAdaptersRequest& request) override {
    return Unary<v1::ListAdaptersResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ListAdapters(ctx, request, response);
    });
  }
  absl::StatusOr<v1::Adapter> GetAdapter(const v1::GetAdapterRequest& request) override {
    return Unary<v1::Adapter>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->GetAdapter(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ApplyPolicyResponse> ApplyPolicy(
      const v1::ApplyPolicyRequest& request) override {
    return Unary<v1::ApplyPolicyResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ApplyPolicy(ctx, request, response);
    });
  }
  absl::StatusOr<v1::Policy> GetPolicy(const v1::GetPolicyRequest& request) override {
    return Unary<v1::Policy>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->GetPolicy(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ListPoliciesResponse> ListPolicies(
      const v1::ListPoliciesRequest& request) override {
    return Unary<v1::ListPoliciesResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ListPolicies(ctx, request, response);
    });
  }
  absl::StatusOr<v1::DeletePolicyResponse> DeletePolicy(
      const v1::DeletePolicyRequest& request) override {
    return Unary<v1::DeletePolicyResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->DeletePolicy(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ExplainAdapterResponse> ExplainAdapter(
      const v1::ExplainAdapterRequest& request) override {
    return Unary<v1::ExplainAdapterResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ExplainAdapter(ctx, request, response);
    });
  }
  absl::StatusOr<v1::CreateExperimentResponse> CreateExperiment(
      const v1::CreateExperimentRequest& request) override {
    return Unary<v1::CreateExperimentResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->CreateExperiment(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ListExperimentsResponse> ListExperiments(
      const v1::ListExperimentsRequest& request) override {
    return Unary<v1::ListExperimentsResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ListExperiments(ctx, request, response);
    });
  }
  absl::StatusOr<v1::Experiment> GetExperiment(const v1::GetExperimentRequest& request) override {
    return Unary<v1::Experiment>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->GetExperiment(ctx, request, response);
    });
  }
  absl::StatusOr<v1::Experiment> StopExperiment(const v1::StopExperimentRequest& request) override {
    return Unary<v1::Experiment>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->StopExperiment(ctx, request, response);
    });
  }
  absl::StatusOr<v1::Experiment> DeleteExperiment(
      const v1::DeleteExperimentRequest& request) override {
    return Unary<v1::Experiment>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->DeleteExperiment(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ExperimentReport> GetExperimentReport(
      const v1::GetExperimentReportRequest& request) override {
    return Unary<v1::ExperimentReport>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->GetExperimentReport(ctx, request, response);
    });
  }
  absl::StatusOr<v1::PromoteExperimentResponse> PromoteExperiment(
      const v1::PromoteExperimentRequest& request) override {
    return Unary<v1::PromoteExperimentResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->PromoteExperiment(ctx, request, response);
    });
  }
  absl::StatusOr<v1::CreateHoldTuningResponse> CreateHoldTuning(
      const v1::CreateHoldTuningRequest& request) override {
    return Unary<v1::CreateHoldTuningResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->CreateHoldTuning(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ListHoldTuningsResponse> ListHoldTunings(
      const v1::ListHoldTuningsRequest& request) override {
    return Unary<v1::ListHoldTuningsResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ListHoldTunings(ctx, request, response);
    });
  }
  absl::StatusOr<v1::HoldTuning> GetHoldTuning(const v1::GetHoldTuningRequest& request) override {
    return Unary<v1::HoldTuning>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->GetHoldTuning(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ApproveHoldTuningResponse> ApproveHoldTuning(
      const v1::ApproveHoldTuningRequest& request) override {
    return Unary<v1::ApproveHoldTuningResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ApproveHoldTuning(ctx, request, response);
    });
  }
  absl::StatusOr<v1::HoldTuning> StopHoldTuning(const v1::StopHoldTuningRequest& request) override {
    return Unary<v1::HoldTuning>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->StopHoldTuning(ctx, request, response);
    });
  }
  absl::StatusOr<v1::HoldTuning> DeleteHoldTuning(
      const v1::DeleteHoldTuningRequest& request) override {
    return Unary<v1::HoldTuning>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->DeleteHoldTuning(ctx, request, response);
    });
  }
  absl::StatusOr<v1::ListEventsResponse> ListEvents(const v1::ListEventsRequest& request) override {
    return Unary<v1::ListEventsResponse>([&](grpc::ClientContext* ctx, auto* response) {
      return stub_->ListEvents(ctx, request, response);
    });
  }

  absl::Status WatchEvents(const v1::WatchEventsRequest& request,
                           const std::function<void(const v1::Event&)>& on_event,
                           std::stop_token stop) override {
    // The stream itself has no deadline, but reaching the server does.
    if (absl::Status connected = AwaitConnection(stop); !connected.ok()) {
      return stop.stop_requested() ? absl::OkStatus() : connected;
    }
    grpc::ClientContext ctx;
    AddMetadata(ctx);
    std::stop_callback cancel_on_client_stop(stop_, [&ctx] { ctx.TryCancel(); });
    std::stop_callback cancel_on_stop(stop, [&ctx] { ctx.TryCancel(); });
    std::unique_ptr<grpc::ClientReader<v1::Event>> reader = stub_->WatchEvents(&ctx, request);
    v1::Event event;
    while (reader->Read(&event)) on_event(event);
    const grpc::Status status = reader->Finish();
    if (stop.stop_requested() || stop_.stop_requested()) {
      // An interrupted watch is the normal way to end it.
      if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) {
        return absl::OkStatus();
      }
    }
    if (status.ok()) {
      return absl::UnavailableError(absl::StrCat(peer_, " ended the watch"));
    }
    return Failed(status, /*stopped=*/false);
  }

 private:
  // ToAbsl, with a failed connection explained in plain words when TLS is the cause (gRPC
  // says "Socket closed" or prints handshake internals).
  absl::Status Failed(const grpc::Status& status, bool stopped) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE && !stopped) {
      if (std::optional<std::string> why = common::ExplainTlsFailure(settings_.server, tls_)) {
        return absl::UnavailableError(absl::StrCat("cannot reach ", peer_, ": ", *why));
      }
    }
    return ToAbsl(status, peer_, settings_.timeout, stopped);
  }

  // Waits until the channel is READY (OK), fails fast (OK too: the call then reports why), or
  // the timeout passes (DEADLINE_EXCEEDED). Wakes every 100 ms to notice a stop request.
  absl::Status AwaitConnection(const std::stop_token& stop) {
    const absl::Time deadline = absl::Now() + settings_.timeout;
    grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
           state != GRPC_CHANNEL_SHUTDOWN) {
      if (stop.stop_requested() || stop_.stop_requested()) {
        return absl::CancelledError("interrupted");
      }
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("no answer from ", peer_, " within ",
                                                        absl::FormatDuration(settings_.timeout),
                                                        " (--timeout)"));
      }
      channel_->WaitForStateChange(
          state, absl::ToChronoTime(std::min(deadline, now + absl::Milliseconds(100))));
      state = channel_->GetState(/*try_to_connect=*/true);
    }
    return absl::OkStatus();
  }

  void AddMetadata(grpc::ClientContext& ctx) const {
    if (!settings_.token.empty()) {
      ctx.AddMetadata("authorization", absl::StrCat("Bearer ", settings_.token));
    }
  }

  template <typename Response, typename Call>
  absl::StatusOr<Response> Unary(Call call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + settings_.timeout));
    AddMetadata(ctx);
    std::stop_callback cancel(stop_, [&ctx] { ctx.TryCancel(); });
    Response response;
    const grpc::Status status = call(&ctx, &response);
    if (!status.ok()) return Failed(status, stop_.stop_requested());
    return response;
  }

  const common::TlsClientSetup tls_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::FleetService::Stub> stub_;
  ConnectionSettings settings_;
  std::string peer_;
  std::stop_token stop_;
};

class GrpcLocalStatusClient final : public LocalStatusClient {
 public:
  GrpcLocalStatusClient(std::shared_ptr<grpc::Channel> channel, std::string socket_path,
                        absl::Duration timeout, std::stop_token stop)
      : stub_(v1::LocalStatusService::NewStub(channel)),
        peer_(absl::StrCat("rxfleet-agent on ", socket_path, " (--local-socket)")),
        timeout_(timeout),
        stop_(std::move(stop)) {}

  absl::StatusOr<v1::GetStatusResponse> GetStatus(const v1::GetStatusRequest& request) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    std::stop_callback cancel(stop_, [&ctx] { ctx.TryCancel(); });
    v1::GetStatusResponse response;
    const grpc::Status status = stub_->GetStatus(&ctx, request, &response);
    if (!status.ok()) return ToAbsl(status, peer_, timeout_, stop_.stop_requested());
    return response;
  }

 private:
  std::unique_ptr<v1::LocalStatusService::Stub> stub_;
  std::string peer_;
  absl::Duration timeout_;
  std::stop_token stop_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FleetClient>> ConnectFleet(const ConnectionSettings& settings,
                                                          std::stop_token stop) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  common::TlsClientSetup tls;
  tls.tls = settings.tls;
  if (settings.tls) {
    grpc::SslCredentialsOptions options;
    if (!settings.ca_file.empty()) {
      auto ca = ReadPem(settings.ca_file, "CA file");
      if (!ca.ok()) return ca.status();
      options.pem_root_certs = *std::move(ca);
      tls.ca_source = absl::StrCat("the CA file ", settings.ca_file);
    }
    if (!settings.cert_file.empty()) {
      auto cert = ReadPem(settings.cert_file, "certificate file");
      if (!cert.ok()) return cert.status();
      auto key = ReadPem(settings.key_file, "key file");
      if (!key.ok()) return key.status();
      options.pem_cert_chain = *std::move(cert);
      options.pem_private_key = *std::move(key);
      tls.cert_source = settings.cert_file;
    }
    tls.ca_pem = options.pem_root_certs;
    tls.cert_pem = options.pem_cert_chain;
    tls.key_pem = options.pem_private_key;
    credentials = grpc::SslCredentials(options);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  auto channel = grpc::CreateCustomChannel(settings.server, credentials, ChannelArgs());
  return std::make_unique<GrpcFleetClient>(std::move(channel), settings, std::move(tls),
                                           std::move(stop));
}

std::unique_ptr<LocalStatusClient> ConnectLocalStatus(std::string_view socket_path,
                                                      absl::Duration timeout,
                                                      std::stop_token stop) {
  auto channel = grpc::CreateCustomChannel(absl::StrCat("unix:", common::ToAbslView(socket_path)),
                                           grpc::InsecureChannelCredentials(), ChannelArgs());
  return std::make_unique<GrpcLocalStatusClient>(std::move(channel), std::string(socket_path),
                                                 timeout, std::move(stop));
}

}  // namespace rxfleet::cli
