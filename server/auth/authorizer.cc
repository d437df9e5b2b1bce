#include "server/auth/authorizer.h"

#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "server/log.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

struct MethodRole {
  std::string_view method;
  Role role;
  // The role a dry run of the method needs: a dry run validates and predicts, it changes
  // nothing, so whoever may read the fleet may ask (`rxfleetctl diff`, `apply --dry-run`).
  std::optional<Role> dry_run_role = std::nullopt;
};

// The one table of FleetService methods and the role each needs.
constexpr std::array kMethodRoles = {
    MethodRole{"ListHosts", Role::kViewer},
    MethodRole{"GetHost", Role::kViewer},
    MethodRole{"ListAdapters", Role::kViewer},
    MethodRole{"GetAdapter", Role::kViewer},
    MethodRole{"ApplyPolicy", Role::kOperator, Role::kViewer},
    MethodRole{"GetPolicy", Role::kViewer},
    MethodRole{"ListPolicies", Role::kViewer},
    MethodRole{"DeletePolicy", Role::kOperator, Role::kViewer},
    MethodRole{"ExplainAdapter", Role::kViewer},
    MethodRole{"CreateExperiment", Role::kOperator, Role::kViewer},
    MethodRole{"ListExperiments", Role::kViewer},
    MethodRole{"GetExperiment", Role::kViewer},
    MethodRole{"StopExperiment", Role::kOperator},
    MethodRole{"DeleteExperiment", Role::kOperator},
    MethodRole{"GetExperimentReport", Role::kViewer},
    MethodRole{"PromoteExperiment", Role::kOperator, Role::kViewer},
    MethodRole{"CreateHoldTuning", Role::kOperator, Role::kViewer},
    MethodRole{"ListHoldTunings", Role::kViewer},
    MethodRole{"GetHoldTuning", Role::kViewer},
    MethodRole{"ApproveHoldTuning", Role::kOperator, Role::kViewer},
    MethodRole{"StopHoldTuning", Role::kOperator},
    MethodRole{"DeleteHoldTuning", Role::kOperator},
    MethodRole{"ListEvents", Role::kViewer},
    MethodRole{"WatchEvents", Role::kViewer},
    MethodRole{"CreateToken", Role::kAdmin},
    MethodRole{"ListTokens", Role::kAdmin},
    MethodRole{"RevokeToken", Role::kAdmin},
};

std::string InsecureActor(const grpc::ServerContextBase& context) {
  std::string actor = absl::StrCat("unauthenticated from ", context.peer());
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("user-agent"); it != metadata.end()) {
    absl::StrAppend(&actor, " (", absl::string_view(it->second.data(), it->second.size()), ")");
  }
  return actor;
}

}  // namespace

std::optional<Role> RequiredRole(std::string_view method, bool dry_run) {
  for (const MethodRole& entry : kMethodRoles) {
    if (entry.method != method) continue;
    return dry_run && entry.dry_run_role.has_value() ? *entry.dry_run_role : entry.role;
  }
  return std::nullopt;
}

std::vector<std::string> HostIdentities(const grpc::AuthContext& context) {
  std::vector<std::string> ids;
  if (!context.IsPeerAuthenticated()) return ids;
  // peer_dns holds the DNS SANs only; x509_subject_alternative_name would also admit URI,
  // email and IP SANs, which docs/SECURITY.md does not accept as a host identity.
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_PEER_DNS_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : context.FindPropertyValues(property)) {
      ids.emplace_back(value.data(), value.size());
    }
  }
  return ids;
}

Authorizer::Authorizer(TokenStore* tokens, prometheus::Registry& registry)
    : tokens_(tokens),
      denied_(prometheus::BuildCounter()
                  .Name("rxfleet_server_auth_denied_total")
                  .Help("Calls and agent streams refused by authentication or authorization, "
                        "by method and reason")
                  .Register(registry)) {}

absl::Status Authorizer::Deny(std::string_view method, std::string_view reason,
                              absl::Status status) {
  denied_.Add({{"method", std::string(method)}, {"reason", std::string(reason)}}).Increment();
  // Anyone who reaches the port can provoke this line: rate-limited per reason.
  log_.Log(LogLevel::kWarning, reason,
           absl::StrCat("denied ", ToAbslView(method), ": ", status.message()));
  return status;
}

void Authorizer::RecordAgentDenial(std::string_view reason, std::string_view message) {
  CountAgentDenial(reason);
  log_.Log(LogLevel::kWarning, absl::StrCat("Connect/", ToAbslView(reason)),
           absl::StrCat("denied Connect: ", ToAbslView(message)));
}

void Authorizer::CountAgentDenial(std::string_view reason) {
  denied_.Add({{"method", "Connect"}, {"reason", std::string(reason)}}).Increment();
}

absl::StatusOr<Principal> Authorizer::Authorize(const grpc::ServerContextBase& context,
                                                std::string_view method, bool dry_run) {
  const std::optional<Role> needed = RequiredRole(method, dry_run);
  if (!needed.has_value()) {
    return Deny(method, "unknown_method",
                absl::PermissionDeniedError(absl::StrCat(
                    ToAbslView(method), " is not in the server's role table; nobody may call it")));
  }
  if (insecure()) return Principal{InsecureActor(context), Role::kAdmin};

  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view header = it == metadata.end()
                                       ? absl::string_view()
                                       : absl::string_view(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "bearer ";
  if (header.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(header.substr(0, kBearer.size()), kBearer)) {
    return Deny(
        method, "no_token",
        absl::UnauthenticatedError(absl::StrCat(
            ToAbslView(method), " needs a bearer token with role ", ToAbslView(RoleName(*needed)),
            " (rxfleetctl --token or RXFLEET_TOKEN; tokens are made with "
            "`rxfleet-server tokens create`)")));
  }
  const absl::string_view token = absl::StripAsciiWhitespace(header.substr(kBearer.size()));
  absl::StatusOr<std::optional<TokenRecord>> record = tokens_->Find(common::ToStdView(token));
  if (!record.ok()) return Deny(method, "store_error", record.status());
  if (!record->has_value()) {
    return Deny(method, "unknown_token",
                absl::UnauthenticatedError(
                    "the bearer token is not valid (revoked, mistyped or from another server)"));
  }
  const TokenRecord& found = **record;
  if (found.role < *needed) {
    return Deny(method, "role",
                absl::PermissionDeniedError(absl::StrCat(
                    ToAbslView(method), " needs role ", ToAbslView(RoleName(*needed)), "; token '",
                    found.name, "' has role ", ToAbslView(RoleName(found.role)))));
  }
  return Principal{absl::StrCat("token:", found.name), found.role};
}

}  // namespace rxfleet::server
