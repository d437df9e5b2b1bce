#pragma once

// Plain-word explanations of failed TLS connections to rxfleet-server, for rxfleetctl and the
// agent's link. gRPC reports them as "Socket closed", "failed to connect to all addresses" or
// raw handshake lines; after such a failure the client calls ExplainTlsFailure, which repeats
// the handshake once with OpenSSL and the same files and says which side refused which
// certificate and what to check.

#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace rxfleet::common {

/// How the failing client connects.
struct TlsClientSetup {
  /// False: the client speaks plaintext (rxfleetctl --insecure, an agent without --tls-ca).
  bool tls = true;
  /// PEM texts; empty ca_pem = the system's trusted roots. cert_pem/key_pem empty = no client
  /// certificate.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  /// How the files were given, for messages: e.g. "--ca-file /etc/rxfleet/ca.crt".
  std::string ca_source = "the system's trusted CAs";
  std::string cert_source = "the client certificate";
};

/// Connects to `address` (HOST:PORT, IPv6 in brackets) as `setup` says, once, each step within
/// `timeout`, and explains what fails:
///  - plaintext client, TLS server: "the server speaks TLS but this client connects in
///    plaintext: ...";
///  - TLS client, plaintext server: "the server at X does not speak TLS (started with
///    --insecure?): ...";
///  - server certificate not signed by the trusted CA, expired or not yet valid, or not naming
///    the host connected to (names the certificate's subject, issuer, dates and names);
///  - client certificate refused by the server (missing, unknown CA, expired) per the TLS
///    alert the server sent.
/// nullopt when nothing TLS-related fails (TCP refused, unresolvable host, or the handshake
/// and the first HTTP/2 exchange work): the caller's own message stands.
std::optional<std::string> ExplainTlsFailure(std::string_view address, const TlsClientSetup& setup,
                                             absl::Duration timeout = absl::Seconds(3));

}  // namespace rxfleet::common
