// FleetService token administration: CreateToken, ListTokens, RevokeToken (admin only, see
// server/auth/authorizer.cc), each change recorded as an audit event.

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/api/fleet_service.h"
#include "server/api/status.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

constexpr char kNoTokens[] =
    "the server runs with --insecure: there are no tokens (start it with TLS to use them)";

v1::TokenInfo ToProto(const TokenRecord& record) {
  v1::TokenInfo info;
  info.set_name(record.name);
  info.set_role(std::string(RoleName(record.role)));
  *info.mutable_create_time() = common::TimeToProto(record.create_time);
  info.set_created_by(record.created_by);
  return info;
}

}  // namespace

void FleetServiceImpl::AuditToken(const Caller& caller, std::string_view action,
                                  std::string_view name, const absl::Status& result) {
  RecordAudit(*events_, caller, "Token", action, name, "", "", "", false, result);
}

grpc::ServerUnaryReactor* FleetServiceImpl::CreateToken(grpc::CallbackServerContext* context,
                                                        const v1::CreateTokenRequest* request,
                                                        v1::CreateTokenResponse* response) {
  return Run(context, __func__, response,
             [this, request](const Caller& caller) -> absl::StatusOr<v1::CreateTokenResponse> {
               if (tokens_ == nullptr) return absl::FailedPreconditionError(kNoTokens);
               absl::StatusOr<Role> role = ParseRole(request->role());
               if (!role.ok()) return absl::InvalidArgumentError(role.status().message());
               absl::StatusOr<CreatedToken> created =
                   tokens_->Create(request->name(), *role, caller.actor, absl::Now());
               AuditToken(caller, "CreateToken", request->name(), created.status());
               if (!created.ok()) return created.status();
               v1::CreateTokenResponse out;
               *out.mutable_info() = ToProto(created->record);
               out.set_token(std::move(created->token));
               return out;
             });
}

grpc::ServerUnaryReactor* FleetServiceImpl::ListTokens(grpc::CallbackServerContext* context,
                                                       const v1::ListTokensRequest*,
                                                       v1::ListTokensResponse* response) {
  return Run(context, __func__, response, [this]() -> absl::StatusOr<v1::ListTokensResponse> {
    if (tokens_ == nullptr) return absl::FailedPreconditionError(kNoTokens);
    absl::StatusOr<std::vector<TokenRecord>> records = tokens_->List();
    if (!records.ok()) return records.status();
    v1::ListTokensResponse out;
    for (const TokenRecord& record : *records) *out.add_tokens() = ToProto(record);
    return out;
  });
}

grpc::ServerUnaryReactor* FleetServiceImpl::RevokeToken(grpc::CallbackServerContext* context,
                                                        const v1::RevokeTokenRequest* request,
                                                        v1::RevokeTokenResponse* response) {
  return Run(context, __func__, response,
             [this, request](const Caller& caller) -> absl::StatusOr<v1::RevokeTokenResponse> {
               if (tokens_ == nullptr) return absl::FailedPreconditionError(kNoTokens);
               if (request->name().empty()) {
                 return absl::InvalidArgumentError("name: required");
               }
               absl::StatusOr<TokenRecord> revoked = tokens_->Revoke(request->name());
               AuditToken(caller, "RevokeToken", request->name(), revoked.status());
               if (!revoked.ok()) return revoked.status();
               v1::RevokeTokenResponse out;
               *out.mutable_info() = ToProto(*revoked);
               return out;
             });
}

}  // namespace rxfleet::server
