#pragma once

// Who may call what on rxfleet-server's gRPC port (docs/SECURITY.md).
//
// FleetService (operators, rxfleetctl): a bearer token in the `authorization` metadata
// ("Bearer rxf_..."), looked up in the TokenStore on every call, carrying a role. The one
// method -> role table is RequiredRole(); a method missing from it is refused for everyone.
// Denials answer UNAUTHENTICATED (no token, unknown or revoked token) or PERMISSION_DENIED
// (role too low, naming the role needed), are logged as warnings and counted in
// rxfleet_server_auth_denied_total{method,reason}.
//
// AgentService (agents): a client certificate verified against the fleet CA; the Hello's
// host_id must be the certificate's CN or one of its DNS SANs (HostIdentities()).
//
// Insecure mode (rxfleet-server --insecure; the in-process default of FleetServer): no TLS and
// no authentication at all; every caller acts as admin under the name
// "unauthenticated from <peer> (<user-agent>)", and Hello is not checked against a certificate.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "server/api/log_limiter.h"
#include "server/auth/token.h"
#include "server/store/token_store.h"

namespace rxfleet::server {

/// The role a FleetService method needs (method = the name after the last '/', e.g.
/// "ApplyPolicy"); nullopt for methods not in the table, which nobody may call. With `dry_run`
/// (the request's dry_run field), the role its dry run needs: viewer for ApplyPolicy,
/// DeletePolicy, CreateExperiment and PromoteExperiment, which change nothing in a dry run.
std::optional<Role> RequiredRole(std::string_view method, bool dry_run = false);

/// An authenticated operator.
struct Principal {
  /// Audit actor: "token:<name>" or, in insecure mode, "unauthenticated from <peer> (<ua>)".
  std::string actor;
  Role role = Role::kAdmin;
};

/// The identities a verified client certificate gives its peer: the subject CN and the DNS
/// SANs (gRPC's x509_common_name and x509_subject_alternative_name properties). Empty when the
/// peer sent no certificate (or the connection is not TLS).
std::vector<std::string> HostIdentities(const grpc::AuthContext& context);

class Authorizer {
 public:
  /// `tokens` null = insecure mode. The counter family is registered in `registry`.
  Authorizer(TokenStore* tokens, prometheus::Registry& registry);

  bool insecure() const { return tokens_ == nullptr; }

  /// Checks that the caller of `method` (FleetService method name) may call it. Errors:
  /// Unauthenticated, PermissionDenied (see the file comment), Unavailable/Internal if the
  /// token table cannot be read. May read SQLite: call it off the gRPC callback threads when
  /// possible.
  absl::StatusOr<Principal> Authorize(const grpc::ServerContextBase& context,
                                      std::string_view method, bool dry_run = false);

  /// Counts and logs a refused agent stream (reason: "no_client_certificate",
  /// "host_id_mismatch"). Denials are logged at most once per reason every 10 s (the line
  /// after a quiet spell says how many were suppressed); every one is counted.
  void RecordAgentDenial(std::string_view reason, std::string_view message);
  /// Counts a refused agent stream without logging (the caller logs).
  void CountAgentDenial(std::string_view reason);

 private:
  absl::Status Deny(std::string_view method, std::string_view reason, absl::Status status);

  TokenStore* const tokens_;
  prometheus::Family<prometheus::Counter>& denied_;
  LogLimiter log_;
};

}  // namespace rxfleet::server
