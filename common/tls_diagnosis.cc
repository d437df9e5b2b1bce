#include "common/tls_diagnosis.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

struct SslCtxFree {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
};
struct SslFree {
  void operator()(SSL* p) const { SSL_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using CtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;
using SslPtr = std::unique_ptr<SSL, SslFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// A TCP connection to host:port with send/receive timeouts, or -1.
int ConnectTcp(const std::string& host, const std::string& port, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  const timeval tv = absl::ToTimeval(timeout);
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

std::string NameText(X509_NAME* name) {
  if (name == nullptr) return "?";
  char buffer[512];
  X509_NAME_oneline(name, buffer, sizeof(buffer));
  return buffer;
}

std::string TimeText(const ASN1_TIME* time) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || time == nullptr || ASN1_TIME_print(bio.get(), time) != 1) return "?";
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// DNS names and IP addresses of the certificate's subjectAltName.
std::vector<std::string> CertificateNames(X509* cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_STRING* s = name->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      const int length = ASN1_STRING_length(s);
      if (length == 4 || length == 16) {
        ::inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof(text));
        out.emplace_back(text);
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string Describe(X509* cert) {
  if (cert == nullptr) return "(none)";
  return absl::StrCat("subject ", NameText(X509_get_subject_name(cert)), ", issued by ",
                      NameText(X509_get_issuer_name(cert)), ", valid ",
                      TimeText(X509_get0_notBefore(cert)), " to ",
                      TimeText(X509_get0_notAfter(cert)));
}

X509Ptr ReadCertificate(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(bio == nullptr ? nullptr
                                : PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// Loads the setup's CA and client certificate into `ctx`; a problem with the files themselves
// is the explanation.
std::optional<std::string> LoadFiles(SSL_CTX* ctx, const TlsClientSetup& setup) {
  if (setup.ca_pem.empty()) {
    SSL_CTX_set_default_verify_paths(ctx);
  } else {
    BioPtr bio(BIO_new_mem_buf(setup.ca_pem.data(), static_cast<int>(setup.ca_pem.size())));
    int loaded = 0;
    while (bio != nullptr) {
      X509Ptr ca(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
      if (ca == nullptr) break;
      if (X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.get()) == 1) ++loaded;
    }
    ERR_clear_error();
    if (loaded == 0) {
      return absl::StrCat("TLS: ", setup.ca_source,
                          " holds no PEM certificate: it must be the fleet CA certificate "
                          "(ca.crt of rxfleet-certs)");
    }
  }
  if (setup.cert_pem.empty()) return std::nullopt;
  X509Ptr cert = ReadCertificate(setup.cert_pem);
  BioPtr key_bio(BIO_new_mem_buf(setup.key_pem.data(), static_cast<int>(setup.key_pem.size())));
  PkeyPtr key(key_bio == nullptr
                  ? nullptr
                  : PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (cert == nullptr) {
    return absl::StrCat("TLS: ", setup.cert_source, " holds no PEM certificate");
  }
  if (key == nullptr) {
    return absl::StrCat("TLS: the key of ", setup.cert_source, " is not a PEM private key");
  }
  if (SSL_CTX_use_certificate(ctx, cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return absl::StrCat("TLS: the key does not belong to ", setup.cert_source,
                        " (pass the .key file made with that certificate)");
  }
  return std::nullopt;
}

std::string AlertText(int reason) {
  const char* text = ERR_reason_error_string(ERR_PACK(ERR_LIB_SSL, 0, reason));
  return text != nullptr ? text : absl::StrCat("reason ", reason);
}

bool IsPlaintextPeer(int reason, int ssl_error) {
  switch (reason) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return true;
    default:
      return reason == 0 && (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN);
  }
}

// The client-certificate side: the server answered the handshake (or the first read) with an
// alert about our certificate.
std::optional<std::string> ClientCertificateProblem(int reason, const TlsClientSetup& setup) {
  const bool sent = !setup.cert_pem.empty();
  switch (reason) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
      if (!sent) {
        return std::string(
            "TLS: the server requires a client certificate and this client sent none: pass a "
            "certificate and key signed by the fleet CA (rxfleetctl --cert-file/--key-file, "
            "rxfleet-agent --tls-cert/--tls-key)");
      }
      [[fallthrough]];
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR: {
      if (!sent) break;
      X509Ptr cert = ReadCertificate(setup.cert_pem);
      return absl::StrCat("TLS: the server refused the client certificate from ", setup.cert_source,
                          " (", Describe(cert.get()), "; the server says: ", AlertText(reason),
                          "): check that it is signed by the CA the server trusts for clients "
                          "(rxfleet-server --tls-client-ca) and has not expired");
    }
    default:
      break;
  }
  return std::nullopt;
}

std::string ServerCertificateProblem(long verify, X509* peer, const std::string& host,
                                     const TlsClientSetup& setup) {
  const std::string what = absl::StrCat("the server's certificate (", Describe(peer), ")");
  switch (verify) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH: {
      const std::vector<std::string> names = CertificateNames(peer);
      return absl::StrCat(
          "TLS: ", what, " is for ", names.empty() ? "no names" : absl::StrJoin(names, ", "),
          ", not for '", host,
          "' that this client connects to: connect with one of those names or addresses, or "
          "reissue the server certificate for this one (rxfleet-certs server NAME --ip ADDR)");
    }
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return absl::StrCat("TLS: ", what,
                          " has expired: renew it on the server (rxfleet-server --tls-cert)");
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return absl::StrCat("TLS: ", what,
                          " is not valid yet: check the clocks of this host and the server");
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return absl::StrCat("TLS: this client does not trust ", what, ": it is not signed by ",
                          setup.ca_source,
                          "; check that the CA file is the fleet CA that signed the server "
                          "certificate (rxfleet-server --tls-cert)");
    default:
      return absl::StrCat("TLS: ", what, " fails verification against ", setup.ca_source, ": ",
                          X509_verify_cert_error_string(verify));
  }
}

// Blocks SIGPIPE on this thread while alive: writing to a connection the server already
// closed (it refused our certificate) must fail with EPIPE, not kill the process. A SIGPIPE
// raised meanwhile is taken off the thread before the old mask returns.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    const timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

std::optional<std::string> Explain(const std::string& address, const TlsClientSetup& setup,
                                   absl::Duration timeout) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const Socket socket(ConnectTcp(host, port, timeout));
  if (socket.fd() < 0) return std::nullopt;  // not reachable: gRPC's message says so

  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) return std::nullopt;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // verified below, to name the cause
  if (setup.tls) {
    if (std::optional<std::string> problem = LoadFiles(ctx.get(), setup)) return problem;
  }
  SslPtr ssl(SSL_new(ctx.get()));
  if (ssl == nullptr) return std::nullopt;
  SSL_set_fd(ssl.get(), socket.fd());
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_set_alpn_protos(ssl.get(), kAlpn, sizeof(kAlpn));
  unsigned char ip[16];
  const bool is_ip =
      ::inet_pton(AF_INET, host.c_str(), ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), ip) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), host.c_str());
    SSL_set1_host(ssl.get(), host.c_str());
  }

  ERR_clear_error();
  const int connected = SSL_connect(ssl.get());
  const int connect_reason = connected == 1 ? 0 : ERR_GET_REASON(ERR_peek_last_error());
  const int connect_error = connected == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl.get(), connected);
  ERR_clear_error();
  if (!setup.tls) {
    if (connected != 1) return std::nullopt;  // plaintext server, as the client expects
    return absl::StrCat(
        "TLS: the server at ", address,
        " speaks TLS but this client connects in plaintext: drop --insecure and pass the fleet "
        "CA (rxfleetctl --ca-file, rxfleet-agent --tls-ca)");
  }
  if (connected != 1) {
    if (std::optional<std::string> problem = ClientCertificateProblem(connect_reason, setup)) {
      return problem;
    }
    if (IsPlaintextPeer(connect_reason, connect_error)) {
      return absl::StrCat(
          "TLS: the server at ", address,
          " does not speak TLS (was it started with --insecure?): connect in plaintext "
          "(rxfleetctl --insecure, rxfleet-agent without --tls-ca) or start the server with "
          "--tls-cert, --tls-key and --tls-client-ca");
    }
    return absl::StrCat("TLS: the handshake with ", address,
                        " failed: ", AlertText(connect_reason));
  }
  const long verify = SSL_get_verify_result(ssl.get());
  if (verify != X509_V_OK) {
    X509Ptr peer(SSL_get1_peer_certificate(ssl.get()));
    return ServerCertificateProblem(verify, peer.get(), host, setup);
  }
  // TLS 1.3 servers judge the client certificate after the handshake: send the HTTP/2 preface
  // and an empty SETTINGS frame; a server that accepts us answers with its SETTINGS.
  static constexpr char kPreface[] =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
  ERR_clear_error();
  if (SSL_write(ssl.get(), kPreface, sizeof(kPreface) - 1) > 0) {
    char reply[64];
    if (SSL_read(ssl.get(), reply, sizeof(reply)) > 0) return std::nullopt;
  }
  const int reason = ERR_GET_REASON(ERR_peek_last_error());
  ERR_clear_error();
  if (std::optional<std::string> problem = ClientCertificateProblem(reason, setup)) {
    return problem;
  }
  // The server hung up right after a handshake that verified it, without naming an alert it
  // recognises: it judged the client certificate (or its absence).
  if (setup.cert_pem.empty()) {
    return ClientCertificateProblem(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED, setup);
  }
  X509Ptr cert = ReadCertificate(setup.cert_pem);
  return absl::StrCat("TLS: the server refused the client certificate from ", setup.cert_source,
                      " (", Describe(cert.get()),
                      "; the server closed the connection right after the handshake): check "
                      "that it is signed by the CA the server trusts for clients "
                      "(rxfleet-server --tls-client-ca) and has not expired");
}

}  // namespace

std::optional<std::string> ExplainTlsFailure(std::string_view address, const TlsClientSetup& setup,
                                             absl::Duration timeout) {
  const SigpipeBlock block;
  return Explain(std::string(address), setup, timeout);
}

}  // namespace rxfleet::common
