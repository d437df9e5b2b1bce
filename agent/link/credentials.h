#pragma once

// TLS of the agent's link to rxfleet-server (docs/SECURITY.md): the agent verifies the server
// against the fleet CA and presents its own client certificate, whose CN / DNS SAN is its host
// id (the server refuses a Hello for any other host).

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tls_diagnosis.h"

namespace rxfleet::agent {

/// PEM files of the link's TLS. All three are required.
struct LinkTlsFiles {
  std::string ca_file;    ///< CA certificate(s) that sign the server certificate
  std::string cert_file;  ///< this host's client certificate (chain)
  std::string key_file;   ///< its private key
};

/// Reads the three files (InvalidArgument naming the flag as LinkCredentials) into the setup
/// common::ExplainTlsFailure uses to explain a failed connection.
absl::StatusOr<common::TlsClientSetup> LinkTlsSetup(const LinkTlsFiles& files);

/// Reads the files and builds SSL channel credentials. Called before every connection
/// attempt, so certificates rotated on disk are used from the next reconnect on. Errors:
/// InvalidArgument naming the file (missing, unreadable or not PEM).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LinkCredentials(
    const LinkTlsFiles& files);

}  // namespace rxfleet::agent
